import CoreMLSchema

typealias MILProgram = CoreML__Specification__MILSpec__Program
typealias MILFunction = CoreML__Specification__MILSpec__Function
typealias MILBlock = CoreML__Specification__MILSpec__Block
typealias MILOperation = CoreML__Specification__MILSpec__Operation
typealias MILArgument = CoreML__Specification__MILSpec__Argument
typealias MILNamedValueType = CoreML__Specification__MILSpec__NamedValueType
typealias MILValue = CoreML__Specification__MILSpec__Value

extension ModelFile {
    /// The ML program as MIL text (the `model.mil` of a compiled bundle), or
    /// nil when the model is not an ML program.
    ///
    /// Only a top-level `mlProgram` is printed; a pipeline holding ML programs
    /// gives nil. The text is deterministic: see `ProgramTextPrinter`.
    public func programText() -> String? {
        let model = specification.root.pointee
        guard model.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM,
              let program = model.mlprogram
        else { return nil }
        return ProgramTextPrinter.text(of: UnsafePointer(program))
    }
}

/// Prints an unpacked MIL program as text in the form of Apple's `model.mil`.
///
/// ```
/// program(1.0)
/// [buildInfo = dict<string, string>({{"coremltools-version", "9.0"}})]
/// {
///     func main<ios15>(tensor<fp32, [1, 16]> x) {
///             tensor<fp32, [1, 32]> y = relu(x = x)[name = string("y")];
///         } -> (y);
/// }
/// ```
///
/// Nested blocks (of `cond`, `while_loop`, …) follow their operation, one per
/// `blockN(inputs) { … } -> (outputs)`, indented four more spaces than it.
package enum ProgramTextPrinter {
    /// MIL text for `program`: deterministic (functions sorted by name, map
    /// entries such as attributes and op inputs sorted by key), one operation
    /// per line.
    ///
    /// The program must stay alive while printing. Values are printed in full,
    /// however large; a map key given twice keeps its last value, as protobuf
    /// map semantics say. The text ends with a newline.
    package static func text(of program: UnsafePointer<CoreML__Specification__MILSpec__Program>) -> String {
        var lines = ["program(\(program.pointee.version).0)"]
        let attributes = attributeList(sortedEntries(program.pointee.attributes, program.pointee.n_attributes, key: \.key, value: \.value))
        if !attributes.isEmpty { lines.append(attributes) }
        lines.append("{")
        var first = true
        for (name, function) in sortedEntries(program.pointee.functions, program.pointee.n_functions, key: \.key, value: \.value) {
            guard let function else { continue }
            for (opset, block) in sortedEntries(function.pointee.block_specializations,
                                                function.pointee.n_block_specializations, key: \.key, value: \.value) {
                if !first { lines.append("") }
                first = false
                appendFunction(name: name, opset: opset, function: function, block: block, to: &lines)
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The opset name MIL text uses for a schema opset (`CoreML7` → `ios17`).
    package static func opsetName(_ opset: String) -> String {
        switch opset {
        case "CoreML5": "ios15"
        case "CoreML6": "ios16"
        case "CoreML7": "ios17"
        case "CoreML8": "ios18"
        case "CoreML9": "ios26"
        default: opset.lowercased()
        }
    }

    private static let indentStep = "    "

    private static func appendFunction(name: String, opset: String, function: UnsafeMutablePointer<MILFunction>,
                                       block: UnsafeMutablePointer<MILBlock>?, to lines: inout [String]) {
        let inputs = elements(function.pointee.inputs, function.pointee.n_inputs).map(namedValueText).joined(separator: ", ")
        let functionAttributes = attributeList(sortedEntries(function.pointee.attributes, function.pointee.n_attributes,
                                                             key: \.key, value: \.value))
        let blockAttributes = block.map { attributeList(sortedEntries($0.pointee.attributes, $0.pointee.n_attributes, key: \.key, value: \.value)) } ?? ""
        lines.append("\(indentStep)func \(name)<\(opsetName(opset))>(\(inputs))\(functionAttributes)\(blockAttributes) {")
        // Apple's layout: operations two steps in, the closing brace one step in.
        if let block { appendOperations(of: block, indent: String(repeating: indentStep, count: 3), to: &lines) }
        let outputs = block.map { strings($0.pointee.outputs, $0.pointee.n_outputs) } ?? []
        lines.append("\(indentStep)\(indentStep)} -> (\(outputs.joined(separator: ", ")));")
    }

    private static func appendOperations(of block: UnsafeMutablePointer<MILBlock>, indent: String, to lines: inout [String]) {
        for operation in elements(block.pointee.operations, block.pointee.n_operations) {
            appendOperation(operation, indent: indent, to: &lines)
        }
    }

    private static func appendOperation(_ operation: UnsafeMutablePointer<MILOperation>, indent: String, to lines: inout [String]) {
        let op = operation.pointee
        let outputs = elements(op.outputs, op.n_outputs).map(namedValueText).joined(separator: ", ")
        let inputs = sortedEntries(op.inputs, op.n_inputs, key: \.key, value: \.value)
            .map { "\($0.key) = \(argumentText($0.value))" }
            .joined(separator: ", ")
        let attributes = attributeList(sortedEntries(op.attributes, op.n_attributes, key: \.key, value: \.value))
        let assignment = outputs.isEmpty ? "" : "\(outputs) = "
        let call = "\(indent)\(assignment)\(ModelSpec.text(op.type))(\(inputs))\(attributes)"
        let blocks = elements(op.blocks, op.n_blocks)
        guard !blocks.isEmpty else {
            lines.append(call + ";")
            return
        }
        lines.append(call)
        let blockIndent = indent + indentStep
        for (index, block) in blocks.enumerated() {
            let inputs = elements(block.pointee.inputs, block.pointee.n_inputs).map(namedValueText).joined(separator: ", ")
            let attributes = attributeList(sortedEntries(block.pointee.attributes, block.pointee.n_attributes, key: \.key, value: \.value))
            lines.append("\(blockIndent)block\(index)(\(inputs))\(attributes) {")
            appendOperations(of: block, indent: blockIndent + indentStep, to: &lines)
            let outputs = strings(block.pointee.outputs, block.pointee.n_outputs).joined(separator: ", ")
            let end = index == blocks.count - 1 ? ";" : ""
            lines.append("\(blockIndent)} -> (\(outputs))\(end)")
        }
    }

    /// `type name`, as in a function's inputs or an operation's outputs.
    private static func namedValueText(_ named: UnsafeMutablePointer<MILNamedValueType>) -> String {
        "\(MILTextFormat.type(named.pointee.type)) \(ModelSpec.text(named.pointee.name))"
    }

    /// One binding as itself; none or several as a tuple `(a, b)`.
    private static func argumentText(_ argument: UnsafeMutablePointer<MILArgument>?) -> String {
        guard let argument else { return "()" }
        let bindings = elements(argument.pointee.arguments, argument.pointee.n_arguments).map { binding in
            switch binding.pointee.binding_case {
            case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME:
                ModelSpec.text(binding.pointee.name)
            case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE:
                MILTextFormat.value(binding.pointee.value)
            default:
                "?"
            }
        }
        return bindings.count == 1 ? bindings[0] : "(\(bindings.joined(separator: ", ")))"
    }

    /// `[key = value, …]`, or empty when there are no attributes.
    private static func attributeList(_ entries: [(key: String, value: UnsafeMutablePointer<MILValue>?)]) -> String {
        guard !entries.isEmpty else { return "" }
        return "[" + entries.map { "\($0.key) = \(MILTextFormat.value($0.value))" }.joined(separator: ", ") + "]"
    }
}

/// The entries of a protobuf-c map field sorted by key; of a key given more
/// than once, the last entry wins.
func sortedEntries<Entry, Value>(
    _ base: UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>?, _ count: Int,
    key: KeyPath<Entry, UnsafeMutablePointer<CChar>?>, value: KeyPath<Entry, Value>
) -> [(key: String, value: Value)] {
    var byKey: [String: Value] = [:]
    for entry in elements(base, count) {
        byKey[text(entry.pointee[keyPath: key])] = entry.pointee[keyPath: value]
    }
    return byKey.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }
}
