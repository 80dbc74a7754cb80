import Foundation

/// Reads NumPy `.npy` files (format versions 1–3) into multi-arrays.
///
/// Little-endian and byte-sized element types are read: float16/32/64,
/// int8/16/32/64, uint8/16/32, bool; C order or Fortran order. Float32,
/// float16 and float64 keep their type; integers become int32 when they fit
/// and float64 otherwise.
public enum NumPyArray {
    /// The array in `data`.
    ///
    /// - Throws: `RuntimeError.invalidValue` naming `feature` and what is wrong
    ///   with the file (`source`).
    public static func read(_ data: Data, source: String, feature: String) throws(RuntimeError) -> MultiArray {
        func bad(_ detail: String) -> RuntimeError { .invalidValue(feature: feature, detail: "\(source): \(detail)") }
        let bytes = [UInt8](data)
        guard bytes.count >= 10, bytes[0] == 0x93, bytes[1...5].elementsEqual(Array("NUMPY".utf8)) else {
            throw bad("not a NumPy .npy file")
        }
        let major = bytes[6]
        let headerLength: Int
        let headerStart: Int
        switch major {
        case 1:
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            headerStart = 10
        case 2, 3:
            guard bytes.count >= 12 else { throw bad("truncated header") }
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
            headerStart = 12
        default:
            throw bad("format version \(major) is not one this reader knows (1–3)")
        }
        guard headerStart + headerLength <= bytes.count,
              let header = String(bytes: bytes[headerStart..<(headerStart + headerLength)], encoding: .utf8)
        else { throw bad("truncated header") }
        guard let descr = field("descr", in: header).map(unquoted),
              let fortran = field("fortran_order", in: header),
              let shapeText = field("shape", in: header)
        else { throw bad("header without descr, fortran_order and shape") }
        let shape = shapeText.trimmingCharacters(in: CharacterSet(charactersIn: "() "))
            .split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard shape.allSatisfy({ $0 >= 0 }) else { throw bad("negative dimension") }
        let count = shape.reduce(1, *)
        guard let type = ElementType(descr) else { throw bad("element type \(descr) is not supported (little-endian numbers and bool)") }
        let payload = headerStart + headerLength
        guard bytes.count - payload >= count * type.size else {
            throw bad("holds \(bytes.count - payload) bytes of data, shape \(shape) needs \(count * type.size)")
        }
        var values = [Double](repeating: 0, count: count)
        bytes.withUnsafeBytes { raw in
            for index in 0..<count { values[index] = type.load(raw, payload + index * type.size) }
        }
        if fortran.hasPrefix("True"), shape.count > 1 {
            values = fortranToC(values, shape: shape)
        }
        let dataType: MultiArray.DataType = switch type {
        case .float16: .float16
        case .float32: .float32
        case .float64: .float64
        case .integer(_, _, let bits) where bits <= 32 && type.fitsInt32: .int32
        default: .float64
        }
        return MultiArray(values, shape: shape, dataType: dataType)
    }

    private enum ElementType {
        case float16, float32, float64
        case integer(signed: Bool, size: Int, bits: Int)
        case bool

        init?(_ descr: String) {
            let order = descr.first
            guard order == "<" || order == "|" || order == "=" else { return nil }
            switch descr.dropFirst() {
            case "f2": self = .float16
            case "f4": self = .float32
            case "f8": self = .float64
            case "i1": self = .integer(signed: true, size: 1, bits: 8)
            case "i2": self = .integer(signed: true, size: 2, bits: 16)
            case "i4": self = .integer(signed: true, size: 4, bits: 32)
            case "i8": self = .integer(signed: true, size: 8, bits: 64)
            case "u1": self = .integer(signed: false, size: 1, bits: 8)
            case "u2": self = .integer(signed: false, size: 2, bits: 16)
            case "u4": self = .integer(signed: false, size: 4, bits: 32)
            case "b1": self = .bool
            default: return nil
            }
        }

        var size: Int {
            switch self {
            case .float16: 2
            case .float32: 4
            case .float64: 8
            case .integer(_, let size, _): size
            case .bool: 1
            }
        }

        var fitsInt32: Bool {
            if case .integer(let signed, _, let bits) = self { return signed ? bits <= 32 : bits < 32 }
            return false
        }

        func load(_ raw: UnsafeRawBufferPointer, _ offset: Int) -> Double {
            switch self {
            case .float16: Double(Float16(bitPattern: raw.loadUnaligned(fromByteOffset: offset, as: UInt16.self).littleEndian))
            case .float32: Double(Float(bitPattern: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian))
            case .float64: Double(bitPattern: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian)
            case .bool: raw[offset] == 0 ? 0 : 1
            case .integer(let signed, let size, _):
                switch (signed, size) {
                case (true, 1): Double(Int8(bitPattern: raw[offset]))
                case (true, 2): Double(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
                case (true, 4): Double(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
                case (true, _): Double(Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self)))
                case (false, 1): Double(raw[offset])
                case (false, 2): Double(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
                default: Double(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                }
            }
        }
    }

    /// The text of `'key': value` in the header's Python dictionary literal.
    private static func field(_ key: String, in header: String) -> String? {
        guard let keyRange = header.range(of: "'\(key)'") else { return nil }
        var rest = header[keyRange.upperBound...].drop { $0 == " " || $0 == ":" }
        if rest.first == "(" {
            guard let close = rest.firstIndex(of: ")") else { return nil }
            return String(rest[...close])
        }
        rest = rest.prefix { $0 != "," && $0 != "}" }
        return rest.trimmingCharacters(in: .whitespaces)
    }

    private static func unquoted(_ text: String) -> String {
        text.trimmingCharacters(in: CharacterSet(charactersIn: "'\" "))
    }

    private static func fortranToC(_ values: [Double], shape: [Int]) -> [Double] {
        var result = values
        let cStrides = MultiArray.rowMajorStrides(shape)
        var fortranStrides = [Int](repeating: 1, count: shape.count)
        for axis in 1..<shape.count { fortranStrides[axis] = fortranStrides[axis - 1] * shape[axis - 1] }
        for index in values.indices {
            var remainder = index, offset = 0
            for axis in shape.indices {
                let coordinate = remainder / cStrides[axis]
                remainder %= cStrides[axis]
                offset += coordinate * fortranStrides[axis]
            }
            result[index] = values[offset]
        }
        return result
    }
}
