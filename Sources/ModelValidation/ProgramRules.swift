import CoreMLSchema
import ModelSpec

/// Rules on ML programs: the main function against the model description,
/// names defined before use, and constants in the weight file.
enum ProgramRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, context: ValidationContext, sink: inout DiagnosticSink) {
        guard let program = model.pointee.mlprogram?.pointee else {
            sink.error("program.main.missing", "the ML program is empty (no functions)")
            return
        }
        let functions = elements(program.functions, program.n_functions)
        guard functions.contains(where: { text($0.pointee.key) == "main" }) else {
            let names = functions.map { quoted(text($0.pointee.key)) }.joined(separator: ", ")
            sink.error("program.main.missing", "the program has no function \"main\"" + (names.isEmpty ? "" : " (it has \(names))"))
            return
        }
        for entry in functions {
            let name = text(entry.pointee.key)
            guard let function = entry.pointee.value?.pointee else { continue }
            sink.at("function \(quoted(name))") { sink in
                checkFunction(function, isMain: name == "main", model: model, context: context, sink: &sink)
            }
        }
    }

    private static func checkFunction(
        _ function: CoreML__Specification__MILSpec__Function, isMain: Bool,
        model: UnsafePointer<CoreML__Specification__Model>, context: ValidationContext, sink: inout DiagnosticSink
    ) {
        let inputs = elements(function.inputs, function.n_inputs).map { text($0.pointee.name) }
        let opset = text(function.opset)
        let blocks = elements(function.block_specializations, function.n_block_specializations)
        guard let main = blocks.first(where: { text($0.pointee.key) == opset })?.pointee.value?.pointee else {
            sink.error("program.function.block", "the function has no block for its opset \(quoted(opset))")
            return
        }
        if isMain {
            let declared = (model.inputs + model.states).map(\.name)
            compare(declared: declared, found: inputs, what: "input", sink: &sink)
            compare(declared: model.outputs.map(\.name), found: strings(main.outputs, main.n_outputs), what: "output", sink: &sink)
        }
        var scope = Set(inputs)
        checkBlock(main, scope: &scope, context: context, sink: &sink)
    }

    /// Reports names the description declares that the function lacks, and the reverse.
    private static func compare(declared: [String], found: [String], what: String, sink: inout DiagnosticSink) {
        let missing = declared.filter { !found.contains($0) }
        let extra = found.filter { !declared.contains($0) }
        for name in missing {
            sink.error("program.main.\(what)s", "the model declares \(what) \(quoted(name)) but the main function has no such \(what)")
        }
        for name in extra {
            sink.error("program.main.\(what)s", "the main function has \(what) \(quoted(name)), which the model description does not declare")
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
                for attribute in elements(op.attributes, op.n_attributes) {
                    guard let value = attribute.pointee.value?.pointee,
                          value.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
                          let blob = value.blobfilevalue?.pointee
                    else { continue }
                    let tensor = value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
                        ? value.type?.pointee.tensortype?.pointee : nil
                    checkBlob(file: text(blob.filename), offset: blob.offset, tensor: tensor,
                              attribute: text(attribute.pointee.key), context: context, sink: &sink)
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

    private static func checkBlob(
        file: String, offset: UInt64, tensor: CoreML__Specification__MILSpec__TensorType?, attribute: String,
        context: ValidationContext, sink: inout DiagnosticSink
    ) {
        let record: MILBlobFile.BlobMetadata
        switch context.blobs.metadata(file: file, offset: offset) {
        case .success(let found):
            record = found
        case .failure(let error):
            sink.error("program.blob.unreadable", "\(attribute) refers to \(file) at offset \(offset): \(blobProblem(error))")
            return
        }
        guard let tensor else { return }
        let declared = milDataTypeName(tensor.datatype)
        guard let expected = blobDataType(tensor.datatype) else {
            sink.error("program.blob.dataType", "\(attribute) is a \(declared) tensor, which the weight file cannot store")
            return
        }
        guard let stored = record.dataType else { return }
        if stored != expected {
            sink.error("program.blob.dataType",
                       "\(attribute) is a \(declared) tensor but its blob at offset \(offset) holds \(String(describing: stored)) data")
            return
        }
        let count = elementCount(tensor)
        guard count > 0 else { return }
        let (bits, overflow) = UInt64(count).multipliedReportingOverflow(by: UInt64(expected.bitWidth))
        let (storedBits, storedOverflow) = record.sizeInBytes.multipliedReportingOverflow(by: 8)
        guard !overflow, !storedOverflow else { return }
        let usedBits = storedBits >= record.paddingBits ? storedBits - record.paddingBits : 0
        if usedBits != bits {
            let expectedBytes = bits / 8 + (bits % 8 == 0 ? 0 : 1)
            let padding = record.paddingBits == 0 ? "" : " less \(record.paddingBits) padding bits"
            sink.error("program.blob.size",
                       "\(attribute) blob at offset \(offset) holds \(record.sizeInBytes) bytes\(padding), expected \(expectedBytes) = \(count) \(declared) values × \(expected.bitWidth) bits")
        }
    }

    /// A blob file problem without the absolute path the error carries.
    private static func blobProblem(_ error: BlobFileError) -> String {
        switch error {
        case .cannotRead(_, let reason): reason
        case .tooSmall(_, let size): "the file has \(size) bytes, too few for a blob file header (64)"
        case .unsupportedVersion(_, let version): "blob file version \(version), expected 2"
        case .recordOutOfRange(_, _, let fileSize): "no record fits there (the file has \(fileSize) bytes)"
        case .badSentinel(_, _, let found): "no blob record there (sentinel 0x\(String(found, radix: 16)), expected 0xdeadbeef)"
        case .unknownDataType(_, _, let code): "the record has unknown data type code \(code)"
        case .dataOutOfRange(_, _, let dataOffset, let size, let fileSize):
            "the record claims \(size) bytes at \(dataOffset), past the end of the file (\(fileSize) bytes)"
        }
    }

    /// The blob storage type holding tensors of a MIL data type.
    static func blobDataType(_ type: CoreML__Specification__MILSpec__DataType) -> MILBlobFile.DataType? {
        switch type {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16: .float16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32: .float32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16: .bfloat16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: .uint8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: .int8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16: .int16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16: .uint16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32: .int32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32: .uint32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: .int4
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: .uint1
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: .uint2
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: .uint3
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: .uint4
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: .uint6
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E4M3FN: .float8E4M3FN
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E5M2: .float8E5M2
        default: nil
        }
    }
}
