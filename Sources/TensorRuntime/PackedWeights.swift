import CWeightKernels
import ModelSpec
import SystemIO

/// A constant matrix kept in the form the weight file stores it: integer
/// codes of 1–8 bits (MIL's sub-byte packing) with per-block scales and
/// offsets or a lookup table, or half floats. Products and gathers read it
/// through `CWeightKernels`, widening a block at a time in registers; every
/// other reader gets its floats decoded (`decodedFloats`; a small matrix's
/// decoded once and kept, `keptFloats`).
///
/// The codes are either where the weight file is mapped (`file` keeps the
/// mapping alive) or in an array this object owns.
///
/// `@unchecked Sendable`: immutable after `init` (but for the floats a small
/// matrix keeps, made once under a lock); the mapping is read-only.
final class PackedWeights: @unchecked Sendable, Equatable {
    enum Decoding: Equatable {
        /// Each value is its code (the data of a decompression, not yet scaled).
        case codes
        /// `(code − offset[block]) · scale[block]`; no offsets: 0.
        case shiftScale(scale: BlockScales, offset: [Float]?)
        /// `table[block][code]`, `entries` values per block.
        case lookup(table: [Float], entries: Int)
        /// The bytes are IEEE half floats.
        case half
    }

    /// The scales of `shiftScale`, one per block: floats of our own, or
    /// values where the weight file is mapped (an fp16 program's are halves,
    /// read as stored: a 7B int4 decoder's 203 M scales take 406 MB there, not
    /// 812 MB as floats).
    enum BlockScales: Equatable {
        case floats([Float])
        case mapped(MappedValues)

        /// The scales of a constant: where it is mapped, else its floats.
        init(_ tensor: Tensor) {
            if case .mapped(let values) = tensor.storage { self = .mapped(values) } else { self = .floats(tensor.floats) }
        }

        var count: Int {
            switch self {
            case .floats(let values): values.count
            case .mapped(let values): values.count
            }
        }
    }

    /// What the bytes belong to: a mapped weight file, or memory of our own.
    private enum Owner {
        case file(MILBlobFile)
        case owned(OwnedBytes)
        case mapped(MappedValues)
    }

    /// Bytes copied from an array, freed with the last matrix reading them.
    private final class OwnedBytes {
        let bytes: UnsafeMutableRawBufferPointer

        init(_ values: [UInt8]) {
            bytes = .allocate(byteCount: max(values.count, 1), alignment: 64)
            bytes.copyBytes(from: values)
        }

        deinit { bytes.deallocate() }
    }

    private let owner: Owner
    private let bytes: UnsafeRawBufferPointer
    let rows: Int
    let columns: Int
    let bits: Int
    let isSigned: Bool
    let decoding: Decoding
    /// Rows and columns of one block of `decoding`'s scales or tables.
    let blockRows: Int
    let blockColumns: Int
    /// Whether every value is rounded to fp16 (the decompressed tensor is fp16).
    let roundsToHalf: Bool

    var count: Int { rows * columns }

    /// Whether vector products take their input as integers of about 15 bits
    /// per block of 32 (`modelc_packed_matrix.quantize_inputs`), multiplied
    /// with the codes by integer dot products: 4- or 8-bit codes with scales
    /// decompressed to fp16, that is an fp16 program's weights, whose every
    /// operation already rounds its inputs to fp16 (30 times more coarsely).
    /// A program computing in fp32 keeps float products. docs/runtime.md has
    /// the measurements.
    var productsQuantizeInputs: Bool {
        guard roundsToHalf, bits == 4 || bits == 8, case .shiftScale = decoding else { return false }
        return true
    }

    /// Bytes of codes or halves (what the weights cost in memory).
    var storedBytes: Int { (count * bits + 7) / 8 }

    private init(owner: Owner, bytes: UnsafeRawBufferPointer, rows: Int, columns: Int, bits: Int, isSigned: Bool, decoding: Decoding,
                 blockRows: Int, blockColumns: Int, roundsToHalf: Bool) {
        self.owner = owner
        self.bytes = bytes
        self.rows = rows
        self.columns = columns
        self.bits = bits
        self.isSigned = isSigned
        self.decoding = decoding
        self.blockRows = blockRows
        self.blockColumns = blockColumns
        self.roundsToHalf = roundsToHalf
    }

    /// Codes of `bits` bits where a weight file is mapped: `count` of them
    /// as a `rows × columns` matrix (rank-1 data is one row). `nil` when the
    /// bytes are too few.
    static func codes(file: MILBlobFile, bytes: UnsafeRawBufferPointer, shape: [Int], bits: Int, isSigned: Bool) -> PackedWeights? {
        guard let (rows, columns) = matrix(shape), rows * columns > 0, bytes.count * 8 >= rows * columns * bits else { return nil }
        return PackedWeights(owner: .file(file), bytes: bytes, rows: rows, columns: columns, bits: bits, isSigned: isSigned, decoding: .codes,
                             blockRows: rows, blockColumns: columns, roundsToHalf: false)
    }

    /// Codes of `bits` bits packed in `packed` (owned): an immediate value's
    /// bytes, or iOS 16 lookup indices.
    static func codes(packed: [UInt8], shape: [Int], bits: Int, isSigned: Bool) -> PackedWeights? {
        guard let (rows, columns) = matrix(shape), rows * columns > 0, packed.count * 8 >= rows * columns * bits else { return nil }
        let owned = OwnedBytes(packed)
        return PackedWeights(owner: .owned(owned), bytes: UnsafeRawBufferPointer(owned.bytes), rows: rows, columns: columns, bits: bits, isSigned: isSigned, decoding: .codes,
                             blockRows: rows, blockColumns: columns, roundsToHalf: false)
    }

    /// Mapped half floats of a rank-2 (or rank-1) tensor, read as stored.
    static func halves(_ values: MappedValues, shape: [Int]) -> PackedWeights? {
        guard values.half, let (rows, columns) = matrix(shape), rows * columns == values.count else { return nil }
        return PackedWeights(owner: .mapped(values), bytes: values.bytes, rows: rows, columns: columns, bits: 16, isSigned: false,
                             decoding: .half, blockRows: rows, blockColumns: columns, roundsToHalf: false)
    }

    /// These codes decoded by `decoding` in blocks of `blockRows × blockColumns`
    /// (which must divide the matrix, with as many scales, offsets or tables
    /// as there are blocks). `nil` where they do not fit.
    func decoded(by decoding: Decoding, blockRows: Int, blockColumns: Int, roundsToHalf: Bool) -> PackedWeights? {
        guard self.decoding == .codes, blockRows > 0, blockColumns > 0, rows % blockRows == 0, columns % blockColumns == 0 else { return nil }
        let blocks = (rows / blockRows) * (columns / blockColumns)
        switch decoding {
        case .codes, .half: return nil
        case .shiftScale(let scale, let offset):
            guard scale.count == blocks, offset.map({ $0.count == blocks }) ?? true else { return nil }
        case .lookup(let table, let entries):
            guard entries >= 1 << bits, table.count == blocks * entries else { return nil }
        }
        return PackedWeights(owner: owner, bytes: bytes, rows: rows, columns: columns, bits: bits, isSigned: isSigned, decoding: decoding,
                             blockRows: blockRows, blockColumns: blockColumns, roundsToHalf: roundsToHalf)
    }

    /// The same codes read with `bits` bits each (iOS 16 lookup indices are
    /// given as bytes); `nil` when the bytes are too few.
    func reinterpreted(bits: Int, shape: [Int]) -> PackedWeights? {
        guard decoding == .codes, let (rows, columns) = Self.matrix(shape), bytes.count * 8 >= rows * columns * bits else { return nil }
        return PackedWeights(owner: owner, bytes: bytes, rows: rows, columns: columns, bits: bits, isSigned: false, decoding: .codes,
                             blockRows: rows, blockColumns: columns, roundsToHalf: false)
    }

    /// The same matrix with every value rounded to fp16 (a decompression
    /// whose output is fp16); `nil` for codes too wide for fp16 to hold exactly.
    var roundedToHalf: PackedWeights? {
        switch decoding {
        case .half: return self
        case .codes: return bits <= 11 ? self : nil
        case .shiftScale, .lookup:
            return PackedWeights(owner: owner, bytes: bytes, rows: rows, columns: columns, bits: bits, isSigned: isSigned, decoding: decoding,
                                 blockRows: blockRows, blockColumns: blockColumns, roundsToHalf: true)
        }
    }

    private static func matrix(_ shape: [Int]) -> (Int, Int)? {
        switch shape.count {
        case 1: (1, shape[0])
        case 2: (shape[0], shape[1])
        default: nil
        }
    }

    // MARK: Reading

    /// Calls `body` with the C description of this matrix (valid inside `body` only).
    func withMatrix<Result>(_ body: (UnsafePointer<modelc_packed_matrix>) throws -> Result) rethrows -> Result {
        func call(scale: UnsafePointer<Float>? = nil, halves: UnsafePointer<UInt16>? = nil, offset: UnsafePointer<Float>? = nil,
                  table: UnsafePointer<Float>? = nil, entries: Int = 0) throws -> Result {
            var matrix = modelc_packed_matrix(codes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), rows: rows, columns: columns,
                                              bits: Int32(bits), is_signed: isSigned ? 1 : 0, scale: scale, scale_halves: halves, offset: offset,
                                              table: table, entries: entries, block_rows: blockRows, block_columns: blockColumns,
                                              round_to_half: roundsToHalf ? 1 : 0, quantize_inputs: productsQuantizeInputs ? 1 : 0)
            return try body(&matrix)
        }
        switch decoding {
        case .codes, .half:
            return try call()
        case .shiftScale(let scale, let offset):
            func withScales(offset: UnsafePointer<Float>?) throws -> Result {
                switch scale {
                case .floats(let values): try values.withUnsafeBufferPointer { try call(scale: $0.baseAddress, offset: offset) }
                case .mapped(let values) where values.half: try call(halves: values.bytes.baseAddress?.assumingMemoryBound(to: UInt16.self), offset: offset)
                case .mapped(let values): try call(scale: values.bytes.baseAddress?.assumingMemoryBound(to: Float.self), offset: offset)
                }
            }
            guard let offset else { return try withScales(offset: nil) }
            return try offset.withUnsafeBufferPointer { try withScales(offset: $0.baseAddress) }
        case .lookup(let table, let entries):
            return try table.withUnsafeBufferPointer { try call(table: $0.baseAddress, entries: entries) }
        }
    }

    /// Whether this matrix reads `values` where they are mapped (its scales),
    /// so that their pages stay.
    func reads(_ values: MappedValues) -> Bool {
        guard case .shiftScale(.mapped(let scales), _) = decoding else { return false }
        return scales === values
    }

    /// Rows `first ..< first + count` as floats at `target` (`count × columns`).
    func decodeRows(_ first: Int, count: Int, into target: UnsafeMutablePointer<Float>) {
        withMatrix { modelc_packed_decode_block($0, first, count, 0, columns, target, columns) }
    }

    /// Every value as a float, row-major: a copy for readers that need one.
    var decodedFloats: [Float] {
        if let kept = keptFloats() { return Array(kept) }
        return [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let base = buffer.baseAddress { decodeRows(0, count: rows, into: base) }
            initialized = count
        }
    }

    /// Matrices of at most this many values (256 KB as floats) keep their
    /// floats once decoded (`keptFloats`): a decoder's rotary tables, sliced
    /// anew at every step's plan, were decoded whole at every step (a seventh
    /// of planning a 200M decoder's step). Weights are larger and never kept.
    static let keptFloatsMaximum = 1 << 16

    /// Floats decoded once, freed with the matrix.
    private final class KeptFloats: @unchecked Sendable {
        let buffer: UnsafeMutableBufferPointer<Float>

        init(_ matrix: PackedWeights) {
            buffer = .allocate(capacity: matrix.count)
            matrix.decodeRows(0, count: matrix.rows, into: buffer.baseAddress!)
        }

        deinit { buffer.deallocate() }
    }

    private let kept = Locked<KeptFloats?>(nil)

    /// Every value as a float, decoded at the first call and kept while this
    /// matrix lives (read-only), for a matrix of at most `keptFloatsMaximum`
    /// values; `nil` for a larger one.
    func keptFloats() -> UnsafeBufferPointer<Float>? {
        guard count <= Self.keptFloatsMaximum else { return nil }
        return kept.withLock { kept in
            let floats = kept ?? KeptFloats(self)
            kept = floats
            return UnsafeBufferPointer(floats.buffer)
        }
    }

    static func == (left: PackedWeights, right: PackedWeights) -> Bool {
        left === right || (left.rows == right.rows && left.columns == right.columns && left.bits == right.bits
                           && left.isSigned == right.isSigned && left.decoding == right.decoding && left.blockRows == right.blockRows
                           && left.blockColumns == right.blockColumns && left.roundsToHalf == right.roundsToHalf
                           && left.bytes.prefix(left.storedBytes).elementsEqual(right.bytes.prefix(right.storedBytes)))
    }
}
