import CoreMLSchema


/// Reads the functions, operation histogram and weight-file constants of an
/// ML program.
struct ProgramReader {
    private(set) var functions: [ProgramFunction] = []
    private(set) var operations: [String: Int] = [:]
    private(set) var blobWeights: [BlobWeight] = []

    init(program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>, blobs: BlobMetadataReader?) {
        for entry in elements(program.pointee.functions, program.pointee.n_functions) {
            guard let function = entry.pointee.value?.pointee else { continue }
            let opset = text(function.opset)
            let blocks = elements(function.block_specializations, function.n_block_specializations)
            let main = blocks.first { text($0.pointee.key) == opset }?.pointee.value
            functions.append(ProgramFunction(
                name: text(entry.pointee.key), opset: opset,
                inputs: elements(function.inputs, function.n_inputs).map { text($0.pointee.name) },
                outputs: main.map { strings($0.pointee.outputs, $0.pointee.n_outputs) } ?? []))
            for block in blocks {
                if let body = block.pointee.value { visit(body, blobs: blobs) }
            }
        }
    }

    private mutating func visit(_ block: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>, blobs: BlobMetadataReader?) {
        for operation in elements(block.pointee.operations, block.pointee.n_operations) {
            let op = operation.pointee
            operations[text(op.type), default: 0] += 1
            let outputName = elements(op.outputs, op.n_outputs).first.map { text($0.pointee.name) } ?? ""
            for attribute in elements(op.attributes, op.n_attributes) {
                guard let value = attribute.pointee.value?.pointee,
                      value.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
                      let blob = value.blobfilevalue?.pointee
                else { continue }
                let key = text(attribute.pointee.key)
                let tensor = value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
                    ? value.type?.pointee.tensortype?.pointee : nil
                let file = text(blob.filename)
                var weight = BlobWeight(
                    name: key == "val" ? outputName : "\(outputName).\(key)",
                    dataType: tensor.map { milDataTypeName($0.datatype) } ?? "unknown",
                    count: tensor.map(elementCount) ?? 0,
                    file: file, offset: blob.offset, bytes: nil, problem: nil)
                switch blobs?.metadata(file: file, offset: blob.offset) {
                case .success(let record): weight.bytes = record.sizeInBytes
                case .failure(let error): weight.problem = error.description
                case nil: break
                }
                blobWeights.append(weight)
            }
            for nested in elements(op.blocks, op.n_blocks) {
                visit(nested, blobs: blobs)
            }
        }
    }
}

/// The MIL schema name of a data type (`FLOAT32`, `INT8`, …).
package func milDataTypeName(_ type: CoreML__Specification__MILSpec__DataType) -> String {
    enumValueName(core_ml__specification__milspec__data_type__descriptor,
                  Int32(bitPattern: type.rawValue))
}

/// The number of elements a tensor type declares; 0 when a dimension is unknown.
package func elementCount(_ tensor: CoreML__Specification__MILSpec__TensorType) -> Int {
    var count = 1
    for dimension in elements(tensor.dimensions, tensor.n_dimensions) {
        guard dimension.pointee.dimension_case == CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT,
              let size = dimension.pointee.constant?.pointee.size,
              size <= UInt64(Int.max)
        else { return 0 }
        let (product, overflow) = count.multipliedReportingOverflow(by: Int(size))
        guard !overflow else { return 0 }
        count = product
    }
    return count
}
