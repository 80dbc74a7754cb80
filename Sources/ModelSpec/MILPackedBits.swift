/// MIL's sub-byte storage (`int4`, `uint1` to `uint6` blobs and tensors, and
/// the iOS 16 `constexpr_lut_to_dense` indices and `constexpr_sparse_to_dense`
/// masks): values of `bits` bits written one after another from the least
/// significant bit of each byte up. One reader for every place that unpacks
/// them (the program text, the tensor engine's constants and decompression).
package enum MILPackedBits {
    /// The raw code of element `index`: its `bits` bits, the first one lowest.
    ///
    /// - Precondition: `bytes` holds at least `(index + 1) × bits` bits.
    @inline(__always)
    package static func code<Bytes: RandomAccessCollection>(_ bytes: Bytes, bits: Int, at index: Int) -> UInt64
        where Bytes.Element == UInt8, Bytes.Index == Int {
        var raw: UInt64 = 0
        for bit in 0..<bits {
            let position = index * bits + bit
            raw |= UInt64(bytes[bytes.startIndex + position / 8] >> UInt8(position % 8) & 1) << UInt64(bit)
        }
        return raw
    }

    /// The first `count` elements, each `bits` wide; `signed` reads them as two's complement.
    ///
    /// - Precondition: `bytes` holds at least `count × bits` bits, and `bits` is 1 to 8.
    package static func codes<Bytes: RandomAccessCollection>(_ bytes: Bytes, bits: Int, count: Int, signed: Bool = false) -> [Int]
        where Bytes.Element == UInt8, Bytes.Index == Int {
        (0..<count).map { index in
            let raw = Int(code(bytes, bits: bits, at: index))
            return signed && raw >= 1 << (bits - 1) ? raw - (1 << bits) : raw
        }
    }
}
