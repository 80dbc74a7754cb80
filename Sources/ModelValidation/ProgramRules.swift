import CoreMLSchema
import ModelSpec

/// Rules on ML programs: each function against the description of its interface,
/// names defined before use, and constants in the weight file.
enum ProgramRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, context: ValidationContext, sink: inout DiagnosticSink) {
        guard let program = model.pointee.mlprogram?.pointee else {
            sink.error("program.main.missing", "the ML program is empty (no functions)")
            return
        }
        let functions = elements(program.functions, program.n_functions)
        let names = functions.map { text($0.pointee.key) }
        let isMultiFunction = (model.pointee.description?.pointee.n_functions ?? 0) > 0
        let interfaces = model.interfaces
        if isMultiFunction {
            // Each described function (the default among them) must be in the program.
            for interface in interfaces where !names.contains(interface.function) {
                sink.error("program.function.missing", "the description declares function \(quoted(interface.function)), which the program lacks")
            }
        } else if !names.contains("main") {
            let list = names.map(quoted).joined(separator: ", ")
            sink.error("program.main.missing", "the program has no function \"main\"" + (list.isEmpty ? "" : " (it has \(list))"))
            return
        }
        for entry in functions {
            let name = text(entry.pointee.key)
            guard let function = entry.pointee.value?.pointee else { continue }
            let interface = isMultiFunction ? interfaces.first { $0.function == name } : (name == "main" ? interfaces.first : nil)
            sink.at("function \(quoted(name))") { sink in
                checkFunction(function, interface: interface, context: context, sink: &sink)
            }
        }
    }

    /// Checks one function: its block for its opset, its interface against
    /// the description's (when the description declares one for it), names
    /// and weight file references.
    private static func checkFunction(
        _ function: CoreML__Specification__MILSpec__Function, interface: Interface?,
        context: ValidationContext, sink: inout DiagnosticSink
    ) {
        let inputs = elements(function.inputs, function.n_inputs).map { text($0.pointee.name) }
        let opset = text(function.opset)
        let blocks = elements(function.block_specializations, function.n_block_specializations)
        guard let main = blocks.first(where: { text($0.pointee.key) == opset })?.pointee.value?.pointee else {
            sink.error("program.function.block", "the function has no block for its opset \(quoted(opset))")
            return
        }
        if let interface {
            let declared = (interface.inputs + interface.states).map(\.name)
            compare(declared: declared, found: inputs, what: "input", sink: &sink)
            compare(declared: interface.outputs.map(\.name), found: strings(main.outputs, main.n_outputs), what: "output", sink: &sink)
        }
        // Every block specialization is checked, not only the opset's own.
        for block in blocks {
            guard let body = block.pointee.value?.pointee else { continue }
            var scope = Set(inputs)
            if blocks.count == 1 {
                checkBlock(body, scope: &scope, context: context, sink: &sink)
            } else {
                sink.at("block \(quoted(text(block.pointee.key)))") { sink in
                    checkBlock(body, scope: &scope, context: context, sink: &sink)
                }
            }
        }
    }

    /// Reports names the description declares that the function lacks, and the reverse.
    private static func compare(declared: [String], found: [String], what: String, sink: inout DiagnosticSink) {
        let missing = declared.filter { !found.contains($0) }
        let extra = found.filter { !declared.contains($0) }
        for name in missing {
            sink.error("program.main.\(what)s", "the model declares \(what) \(quoted(name)) but the function has no such \(what)")
        }
        for name in extra {
            sink.error("program.main.\(what)s", "the function has \(what) \(quoted(name)), which the model description does not declare")
        }
    }

    private static func checkBlock(
        _ block: CoreML__Specification__MILSpec__Block, scope: inout Set<String>, context: ValidationContext, sink: inout DiagnosticSink
    ) {
        for input in elements(block.inputs, block.n_inputs) {
            scope.insert(text(input.pointee.name))
        }
        for (index, operation) in elements(block.operations, block.n_operations).enumerated() {
            let op = operation.pointee
            let outputs = elements(op.outputs, op.n_outputs).map { text($0.pointee.name) }
            let location = "operation \(index) \(quoted(outputs.first ?? "")) (\(text(op.type)))"
            sink.at(location) { sink in
                for input in elements(op.inputs, op.n_inputs) {
                    let parameter = text(input.pointee.key)
                    let bindings = input.pointee.value.map { elements($0.pointee.arguments, $0.pointee.n_arguments) } ?? []
                    for binding in bindings where binding.pointee.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME {
                        let name = text(binding.pointee.name)
                        if !scope.contains(name) {
                            sink.error("program.operation.input.undefined",
                                       "input \(quoted(parameter)) names \(quoted(name)), which is not defined before this operation")
                        }
                    }
                }
                // Weight file references: constants' attributes and, since
                // iOS 18, operation inputs (constexpr_blockwise_shift_scale's
                // data and scale, constexpr_lut_to_dense's indices and lut).
                for attribute in elements(op.attributes, op.n_attributes) {
                    guard let value = attribute.pointee.value else { continue }
                    checkBlob(value.pointee, name: text(attribute.pointee.key), context: context, sink: &sink)
                }
                for input in elements(op.inputs, op.n_inputs) {
                    let bindings = input.pointee.value.map { elements($0.pointee.arguments, $0.pointee.n_arguments) } ?? []
                    for (position, binding) in bindings.enumerated()
                    where binding.pointee.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE {
                        guard let value = binding.pointee.value else { continue }
                        let key = text(input.pointee.key)
                        checkBlob(value.pointee, name: bindings.count > 1 ? "\(key)[\(position)]" : key, context: context, sink: &sink)
                    }
                }
                for (blockIndex, nested) in elements(op.blocks, op.n_blocks).enumerated() {
                    var inner = scope
                    sink.at("block \(blockIndex)") { sink in
                        checkBlock(nested.pointee, scope: &inner, context: context, sink: &sink)
                    }
                }
            }
            for output in outputs { scope.insert(output) }
        }
        for output in strings(block.outputs, block.n_outputs) where !scope.contains(output) {
            sink.error("program.block.output.undefined", "the block output \(quoted(output)) is not defined in the block")
        }
    }

    /// Checks a value held in a weight file: its record can be read and
    /// holds exactly the values of its tensor type.
    private static func checkBlob(
        _ value: CoreML__Specification__MILSpec__Value, name: String, context: ValidationContext, sink: inout DiagnosticSink
    ) {
        guard value.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
              let blob = value.blobfilevalue?.pointee
        else { return }
        let file = text(blob.filename)
        let record: MILBlobFile.BlobMetadata
        switch context.blobs.metadata(file: file, offset: blob.offset) {
        case .success(let found):
            record = found
        case .failure(let error):
            sink.error("program.blob.unreadable", "\(name) refers to \(file) at offset \(blob.offset): \(error.detail)")
            return
        }
        guard value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE,
              let tensor = value.type?.pointee.tensortype?.pointee,
              let mismatch = BlobTensorMismatch.check(record, offset: blob.offset, tensor: tensor)
        else { return }
        switch mismatch {
        case .unstorable, .dataType: sink.error("program.blob.dataType", "\(name) is \(mismatch)")
        case .size: sink.error("program.blob.size", "\(name) \(mismatch)")
        }
    }
}
