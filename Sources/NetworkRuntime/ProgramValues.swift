import CoreMLSchema
import Foundation
import ModelFeatures
import ModelSpec

/// A value of an ML program known when the model is loaded: a constant, or
/// what a `constexpr_*` operation makes of constants. Numbers are kept as
/// float32 (fp16 programs compute in fp32) with integers alongside.
struct ProgramConstant: Sendable {
    var shape: [Int]
    var floats: [Float]
    var string: String? { strings.first }
    /// String tensors (class labels, modes).
    var strings: [String] = []

    init(shape: [Int], floats: [Float], strings: [String] = []) {
        self.shape = shape
        self.floats = floats
        self.strings = strings
    }

    init(shape: [Int], floats: [Float], string: String?) {
        self.init(shape: shape, floats: floats, strings: string.map { [$0] } ?? [])
    }

    var count: Int { floats.count }
    var ints: [Int] { floats.map { Int($0) } }
    var scalar: Float? { floats.count == 1 ? floats[0] : nil }
}

/// Reads program values: immediate tensors and blobs of the weight file.
struct ProgramValueReader {
    /// Weight files, each opened once per model.
    private let files: MILWeightFiles

    /// `modelDirectory`: the directory `@model_path` names (a bundle or the package's model folder).
    init(modelDirectory: String?) {
        files = MILWeightFiles(modelDirectory: modelDirectory)
    }

    func constant(_ value: CoreML__Specification__MILSpec__Value, owner: String) throws(RuntimeError) -> ProgramConstant {
        let tensorType = value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
            ? value.type?.pointee.tensortype?.pointee : nil
        let shape = tensorType.map { elements($0.dimensions, $0.n_dimensions).map { Int($0.pointee.constant?.pointee.size ?? 0) } } ?? []
        let dataType = tensorType?.datatype ?? CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32
        switch value.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            if let immediate = value.immediatevalue?.pointee,
               immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST,
               let list = immediate.list?.pointee {
                // A list of scalars (class labels): its elements joined into one tensor.
                var joined = ProgramConstant(shape: [], floats: [])
                for element in elements(list.values, list.n_values) {
                    let part = try constant(element.pointee, owner: owner)
                    joined.floats += part.floats
                    joined.strings += part.strings
                }
                joined.shape = [max(joined.floats.count, joined.strings.count)]
                return joined
            }
            guard let immediate = value.immediatevalue?.pointee,
                  immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR,
                  let tensor = immediate.tensor?.pointee
            else {
                throw .unsupportedLayer(layer: owner, kind: "const", reason: "only tensor constants are supported (not lists, tuples or dictionaries)")
            }
            return try immediateTensor(tensor, shape: shape, dataType: dataType, owner: owner)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            guard let blob = value.blobfilevalue?.pointee else { break }
            let bytes = try blobBytes(text(blob.filename), offset: blob.offset, owner: owner)
            let count = max(1, shape.reduce(1, *))
            return ProgramConstant(shape: shape, floats: try Self.decode(bytes, dataType: dataType, count: count, owner: owner))
        default:
            break
        }
        throw .invalidParameters(model: "operation \"\(owner)\"", detail: "a value with nothing in it")
    }

    private func immediateTensor(_ tensor: CoreML__Specification__MILSpec__TensorValue, shape: [Int],
                                 dataType: CoreML__Specification__MILSpec__DataType, owner: String) throws(RuntimeError) -> ProgramConstant {
        switch tensor.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS:
            return ProgramConstant(shape: shape, floats: tensor.floats.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? [])
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_DOUBLES:
            return ProgramConstant(shape: shape, floats: (tensor.doubles.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map(Float.init))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS:
            return ProgramConstant(shape: shape, floats: (tensor.ints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map(Float.init))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_LONG_INTS:
            return ProgramConstant(shape: shape, floats: (tensor.longints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map(Float.init))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS:
            return ProgramConstant(shape: shape, floats: (tensor.bools.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map { $0 != 0 ? 1 : 0 })
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS:
            let values = tensor.strings.map { strings($0.pointee.values, $0.pointee.n_values) } ?? []
            return ProgramConstant(shape: shape, floats: [], strings: values)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES:
            guard let bytes = tensor.bytes?.pointee.values else { break }
            let raw = UnsafeRawBufferPointer(start: bytes.data, count: bytes.len)
            return ProgramConstant(shape: shape, floats: try Self.decode(raw, dataType: dataType, count: max(1, shape.reduce(1, *)), owner: owner))
        default:
            break
        }
        throw .invalidParameters(model: "operation \"\(owner)\"", detail: "an empty tensor value")
    }

    private func blobBytes(_ reference: String, offset: UInt64, owner: String) throws(RuntimeError) -> UnsafeRawBufferPointer {
        do {
            return try files.bytes(reference: reference, offset: offset)
        } catch {
            throw .invalidParameters(model: "operation \"\(owner)\"", detail: error.description)
        }
    }

    /// Raw little-endian values of `dataType` as floats; sub-byte types are
    /// packed from the lowest bit of each byte up.
    static func decode(_ bytes: UnsafeRawBufferPointer, dataType: CoreML__Specification__MILSpec__DataType,
                       count: Int, owner: String) throws(RuntimeError) -> [Float] {
        func need(_ size: Int) throws(RuntimeError) {
            guard bytes.count >= size else {
                throw .invalidParameters(model: "operation \"\(owner)\"", detail: "\(bytes.count) bytes for \(count) values that need \(size)")
            }
        }
        func subByte(_ bits: Int, signed: Bool) throws(RuntimeError) -> [Float] {
            try need((count * bits + 7) / 8)
            return unpack(bytes, bits: bits, count: count, signed: signed).map(Float.init)
        }
        switch dataType {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32:
            try need(count * 4)
            return (0..<count).map { Float(bitPattern: bytes.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16:
            try need(count * 2)
            return (0..<count).map { Float(Float16(bitPattern: bytes.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self))) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8:
            try need(count)
            return (0..<count).map { Float(Int8(bitPattern: bytes[$0])) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8:
            try need(count)
            return (0..<count).map { Float(bytes[$0]) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16:
            try need(count * 2)
            return (0..<count).map { Float(bytes.loadUnaligned(fromByteOffset: $0 * 2, as: Int16.self)) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16:
            try need(count * 2)
            return (0..<count).map { Float(bytes.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self)) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32:
            try need(count * 4)
            return (0..<count).map { Float(bytes.loadUnaligned(fromByteOffset: $0 * 4, as: Int32.self)) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32:
            try need(count * 4)
            return (0..<count).map { Float(bytes.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: return try subByte(4, signed: true)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: return try subByte(4, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: return try subByte(2, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: return try subByte(1, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: return try subByte(3, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: return try subByte(6, signed: false)
        default:
            throw .unsupportedLayer(layer: owner, kind: "const", reason: "values of data type \(milDataTypeName(dataType)) are not supported")
        }
    }
}

/// `count` codes of `bits` bits each, packed from the lowest bit of each byte
/// up, as MIL blob storage packs sub-byte types; `signed` sign-extends them.
///
/// - Precondition: `bytes` holds at least `count × bits` bits.
func unpack<Bytes: RandomAccessCollection>(_ bytes: Bytes, bits: Int, count: Int, signed: Bool = false) -> [Int]
    where Bytes.Element == UInt8, Bytes.Index == Int {
    MILPackedBits.codes(bytes, bits: bits, count: count, signed: signed)
}
