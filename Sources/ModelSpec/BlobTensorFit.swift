import CoreMLSchema

extension MILBlobFile.DataType {
    /// The blob storage type that holds tensors of a MIL data type; `nil`
    /// for types a weight file cannot store (bool, string, int64, fp64, …).
    package init?(mil type: CoreML__Specification__MILSpec__DataType) {
        switch type {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16: self = .float16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32: self = .float32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16: self = .bfloat16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: self = .uint8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: self = .int8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16: self = .int16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16: self = .uint16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32: self = .int32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32: self = .uint32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: self = .int4
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: self = .uint1
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: self = .uint2
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: self = .uint3
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: self = .uint4
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: self = .uint6
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E4M3FN: self = .float8E4M3FN
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E5M2: self = .float8E5M2
        default: return nil
        }
    }

    /// The bytes `count` elements take packed, `ceil(count × bits / 8)`, and
    /// the unused bits at the end; `nil` on overflow.
    public func packedSize(count: Int) -> (bytes: UInt64, paddingBits: UInt64)? {
        guard count >= 0 else { return nil }
        let (bits, overflow) = UInt64(count).multipliedReportingOverflow(by: UInt64(bitWidth))
        guard !overflow else { return nil }
        let padding = (8 - bits % 8) % 8
        return (bits / 8 + (padding == 0 ? 0 : 1), padding)
    }
}

/// Why a blob record cannot hold the values of the tensor type that refers
/// to it. The description reads after the name of the reference:
/// `dense1.data: …`.
package enum BlobTensorMismatch: Equatable, Sendable, CustomStringConvertible {
    /// The tensor's data type has no blob storage form.
    case unstorable(declared: String)
    /// The blob holds another data type than the tensor declares.
    case dataType(declared: String, stored: String, offset: UInt64)
    /// The blob's size (less its padding bits) is not the packed size of the tensor's values.
    case size(offset: UInt64, stored: UInt64, paddingBits: UInt64, expected: UInt64, count: Int, declared: String, bits: Int)

    package var description: String {
        switch self {
        case .unstorable(let declared):
            "a \(declared) tensor, which a weight file cannot store"
        case .dataType(let declared, let stored, let offset):
            "a \(declared) tensor but its blob at offset \(offset) holds \(stored) data"
        case .size(let offset, let stored, let paddingBits, let expected, let count, let declared, let bits):
            "blob at offset \(offset) holds \(stored) bytes\(paddingBits == 0 ? "" : " less \(paddingBits) padding bits"), "
                + "expected \(expected) = \(count) \(declared) values × \(bits) bits"
        }
    }

    /// The mismatch between `record` and the tensor type `tensor` that names
    /// it, or `nil` when the record holds exactly the tensor's values: the
    /// same data type, `ceil(count × bits / 8)` bytes, and padding bits that
    /// account for the unused end of sub-byte data (0, or exactly the unused
    /// bits). A tensor whose shape is not fully known is checked for its data
    /// type only.
    package static func check(
        _ record: MILBlobFile.BlobMetadata, offset: UInt64, tensor: CoreML__Specification__MILSpec__TensorType
    ) -> BlobTensorMismatch? {
        let declared = milDataTypeName(tensor.datatype)
        guard let expected = MILBlobFile.DataType(mil: tensor.datatype) else { return .unstorable(declared: declared) }
        guard let stored = record.dataType else { return .dataType(declared: declared, stored: "code \(record.dataTypeCode)", offset: offset) }
        guard stored == expected else { return .dataType(declared: declared, stored: stored.name, offset: offset) }
        guard fullyKnown(tensor) else { return nil }
        let count = elementCount(tensor)
        guard let (bytes, padding) = expected.packedSize(count: count) else { return nil }
        if record.sizeInBytes != bytes || (record.paddingBits != 0 && record.paddingBits != padding) {
            return .size(offset: offset, stored: record.sizeInBytes, paddingBits: record.paddingBits, expected: bytes,
                         count: count, declared: declared, bits: expected.bitWidth)
        }
        return nil
    }

    private static func fullyKnown(_ tensor: CoreML__Specification__MILSpec__TensorType) -> Bool {
        elements(tensor.dimensions, tensor.n_dimensions).allSatisfy {
            $0.pointee.dimension_case == CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT
        }
    }
}
