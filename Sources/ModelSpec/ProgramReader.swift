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
                if let body = block.pointee.value { count(body) }
            }
        }
        // Every weight file reference, wherever the program holds it: const
        // attributes, operation inputs (iOS 18 constexpr operations), nested
        // blocks, every function and block specialization.
        for location in WeightLocator(root: UnsafePointer(program)).locations {
            guard let (file, offset) = location.blobReference else { continue }
            let tensor = location.tensorType
            var weight = BlobWeight(
                name: location.displayName,
                dataType: tensor.map { milDataTypeName($0.datatype) } ?? "unknown",
                count: tensor.map(elementCount) ?? 0,
                file: file, offset: offset, bytes: nil, problem: nil)
            switch blobs?.metadata(file: file, offset: offset) {
            case .success(let record):
                weight.bytes = record.sizeInBytes
                if let tensor, let mismatch = BlobTensorMismatch.check(record, offset: offset, tensor: tensor) {
                    weight.problem = "\(file) at offset \(offset): \(mismatch)"
                }
            case .failure(let error):
                weight.problem = "\(file) at offset \(offset): \(error.detail)"
            case nil:
                break
            }
            blobWeights.append(weight)
        }
        // In weight file order, as the blobs lie in the file.
        blobWeights.sort { ($0.file, $0.offset, $0.name) < ($1.file, $1.offset, $1.name) }
    }

    private mutating func count(_ block: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>) {
        for operation in elements(block.pointee.operations, block.pointee.n_operations) {
            operations[text(operation.pointee.type), default: 0] += 1
            for nested in elements(operation.pointee.blocks, operation.pointee.n_blocks) {
                count(nested)
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
