/// The tensor datatypes the Open Inference Protocol names.
public enum TensorDataType: String, Sendable, CaseIterable {
    case bool = "BOOL"
    case uint8 = "UINT8", uint16 = "UINT16", uint32 = "UINT32", uint64 = "UINT64"
    case int8 = "INT8", int16 = "INT16", int32 = "INT32", int64 = "INT64"
    case fp16 = "FP16", fp32 = "FP32", fp64 = "FP64"
    case bytes = "BYTES"

    /// Bytes per element in the binary tensor extension; nil for BYTES
    /// (each element is a 4-byte little-endian length and that many bytes).
    public var elementSize: Int? {
        switch self {
        case .bool, .uint8, .int8: 1
        case .uint16, .int16, .fp16: 2
        case .uint32, .int32, .fp32: 4
        case .uint64, .int64, .fp64: 8
        case .bytes: nil
        }
    }
}

/// A tensor's elements as they came or go on the wire.
public enum TensorData: Sendable, Equatable {
    /// Little-endian elements of a fixed-size datatype, row-major.
    case raw([UInt8])
    /// BYTES elements.
    case bytes([[UInt8]])
}

/// One named tensor of a request or response.
public struct InferTensor: Sendable, Equatable {
    public var name: String
    public var datatype: TensorDataType
    public var shape: [Int]
    public var data: TensorData

    public init(name: String, datatype: TensorDataType, shape: [Int], data: TensorData) {
        self.name = name
        self.datatype = datatype
        self.shape = shape
        self.data = data
    }

    /// The number of elements the shape holds.
    public var elementCount: Int { shape.reduce(1, *) }

    /// Element `index` as a double (fixed-size datatypes only).
    public func double(at index: Int) -> Double {
        guard case .raw(let bytes) = data, let size = datatype.elementSize else { return 0 }
        return bytes.withUnsafeBytes { raw in
            let offset = index * size
            switch datatype {
            case .bool, .uint8: return Double(raw[offset])
            case .int8: return Double(Int8(bitPattern: raw[offset]))
            case .uint16: return Double(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
            case .int16: return Double(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
            case .uint32: return Double(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            case .int32: return Double(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
            case .uint64: return Double(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            case .int64: return Double(Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self)))
            case .fp16: return Double(Float16(bitPattern: UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt16.self))))
            case .fp32: return Double(Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self))))
            case .fp64: return Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            case .bytes: return 0
            }
        }
    }

    /// Element `index` as an integer (integer and bool datatypes).
    public func int64(at index: Int) -> Int64 {
        guard case .raw(let bytes) = data else { return 0 }
        if datatype == .int64 || datatype == .uint64 {
            return bytes.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: index * 8, as: Int64.self)) }
        }
        return Int64(double(at: index))
    }
}

/// Writes numbers as little-endian elements of a datatype.
struct RawTensorWriter {
    private(set) var bytes: [UInt8] = []
    let datatype: TensorDataType

    init(datatype: TensorDataType, capacity: Int) {
        self.datatype = datatype
        bytes.reserveCapacity(capacity * (datatype.elementSize ?? 0))
    }

    /// Appends one JSON number (or bool, for BOOL), refusing what the datatype cannot hold.
    mutating func append(json value: JSONValue) -> Bool {
        switch value {
        case .bool(let flag) where datatype == .bool:
            bytes.append(flag ? 1 : 0)
            return true
        case .number(let number):
            return append(number)
        default:
            return false
        }
    }

    mutating func append(_ number: Double) -> Bool {
        switch datatype {
        case .fp32: appendInteger(Float(number).bitPattern)
        case .fp64: appendInteger(number.bitPattern)
        case .fp16: appendInteger(Float16(number).bitPattern)
        case .bool: bytes.append(number != 0 ? 1 : 0)
        default:
            guard number.isFinite, number == number.rounded() else { return false }
            switch datatype {
            case .uint8: guard let v = UInt8(exactly: number) else { return false }; bytes.append(v)
            case .int8: guard let v = Int8(exactly: number) else { return false }; bytes.append(UInt8(bitPattern: v))
            case .uint16: guard let v = UInt16(exactly: number) else { return false }; appendInteger(v)
            case .int16: guard let v = Int16(exactly: number) else { return false }; appendInteger(v)
            case .uint32: guard let v = UInt32(exactly: number) else { return false }; appendInteger(v)
            case .int32: guard let v = Int32(exactly: number) else { return false }; appendInteger(v)
            case .uint64: guard let v = UInt64(exactly: number) else { return false }; appendInteger(v)
            case .int64: guard let v = Int64(exactly: number) else { return false }; appendInteger(v)
            default: return false
            }
        }
        return true
    }

    mutating func appendInteger<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}
