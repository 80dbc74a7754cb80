import CoreMLSchema

/// Decodes the elements of a MIL tensor stored as raw bytes
/// (`TensorValue.bytes`), as MIL text writes them.
///
/// Multi-byte elements are little-endian. Sub-byte types (`int4`, `uint1` to
/// `uint6`) are packed from the least significant bit of each byte up.
enum TensorBytes {
    /// One text item per element; trailing bytes too short for an element are
    /// ignored. `declaredCount` (0 when unknown) trims the padding bits of a
    /// packed sub-byte tensor.
    static func elements(_ bytes: UnsafeBufferPointer<UInt8>, dataType: MILDataType, declaredCount: Int) -> [String] {
        switch dataType {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16:
            fixed(bytes, width: 2) { Float16(bitPattern: UInt16(truncatingIfNeeded: $0)).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16:
            fixed(bytes, width: 2) { Float(bitPattern: UInt32(truncatingIfNeeded: $0) << 16).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32:
            fixed(bytes, width: 4) { Float(bitPattern: UInt32(truncatingIfNeeded: $0)).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT64:
            fixed(bytes, width: 8) { Double(bitPattern: $0).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E5M2:
            // The top byte of an IEEE half.
            fixed(bytes, width: 1) { Float16(bitPattern: UInt16(truncatingIfNeeded: $0) << 8).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E4M3FN:
            fixed(bytes, width: 1) { float8E4M3FN(UInt8(truncatingIfNeeded: $0)).description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL:
            fixed(bytes, width: 1) { $0 != 0 ? "true" : "false" }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8:
            fixed(bytes, width: 1) { signed($0, bits: 8) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16:
            fixed(bytes, width: 2) { signed($0, bits: 16) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32:
            fixed(bytes, width: 4) { signed($0, bits: 32) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT64:
            fixed(bytes, width: 8) { signed($0, bits: 64) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16:
            fixed(bytes, width: 2) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32:
            fixed(bytes, width: 4) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT64:
            fixed(bytes, width: 8) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4:
            packed(bytes, bits: 4, declaredCount: declaredCount) { signed($0, bits: 4) }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1:
            packed(bytes, bits: 1, declaredCount: declaredCount) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2:
            packed(bytes, bits: 2, declaredCount: declaredCount) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3:
            packed(bytes, bits: 3, declaredCount: declaredCount) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4:
            packed(bytes, bits: 4, declaredCount: declaredCount) { $0.description }
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6:
            packed(bytes, bits: 6, declaredCount: declaredCount) { $0.description }
        default:
            // uint8, and bytes under a type that has no byte form: one item per byte.
            fixed(bytes, width: 1) { $0.description }
        }
    }

    /// Whole-byte elements of `width` bytes, little-endian.
    private static func fixed(_ bytes: UnsafeBufferPointer<UInt8>, width: Int, _ format: (UInt64) -> String) -> [String] {
        (0..<bytes.count / width).map { index in
            var raw: UInt64 = 0
            for byte in (0..<width).reversed() {
                raw = raw << 8 | UInt64(bytes[index * width + byte])
            }
            return format(raw)
        }
    }

    /// Elements of `bits` bits packed from the least significant bit up.
    private static func packed(_ bytes: UnsafeBufferPointer<UInt8>, bits: Int, declaredCount: Int,
                               _ format: (UInt64) -> String) -> [String] {
        let capacity = bytes.count * 8 / bits
        let count = declaredCount > 0 ? min(declaredCount, capacity) : capacity
        return (0..<count).map { format(MILPackedBits.code(bytes, bits: bits, at: $0)) }
    }

    /// The low `bits` bits of `raw` as a two's complement number.
    private static func signed(_ raw: UInt64, bits: Int) -> String {
        let shift = UInt64(64 - bits)
        return (Int64(bitPattern: raw << shift) >> Int64(shift)).description
    }

    /// An 8-bit float with 4 exponent bits (bias 7), 3 mantissa bits, no
    /// infinities, and NaN only at all ones.
    static func float8E4M3FN(_ byte: UInt8) -> Float {
        let exponent = Int(byte >> 3 & 0x0F)
        let mantissa = Float(byte & 0x07)
        let magnitude: Float
        if exponent == 0x0F && byte & 0x07 == 0x07 {
            magnitude = .nan
        } else if exponent == 0 {
            magnitude = mantissa / 8 * Float(sign: .plus, exponent: -6, significand: 1)
        } else {
            magnitude = (1 + mantissa / 8) * Float(sign: .plus, exponent: exponent - 7, significand: 1)
        }
        return byte & 0x80 != 0 ? -magnitude : magnitude
    }
}
