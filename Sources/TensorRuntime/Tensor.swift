import CWeightKernels
import ModelSpec

/// A tensor value known when a plan is made: a constant of the program, or
/// what folding made of constants. Row-major.
struct Tensor: Sendable, Equatable {
    enum Storage: Sendable, Equatable {
        case floats([Float])
        case ints([Int32])
        case strings([String])
        /// Float values read where the weight file is mapped (see `MappedValues`).
        case mapped(MappedValues)
        /// A matrix kept as the weight file stores it: codes with scales or a
        /// table, or half floats (see `PackedWeights`).
        case packed(PackedWeights)
    }

    var type: ElementType
    var shape: [Int]
    var storage: Storage

    init(type: ElementType, shape: [Int], storage: Storage) {
        self.type = type
        self.shape = shape
        self.storage = storage
    }

    init(floats: [Float], shape: [Int], type: ElementType = .float32) {
        self.init(type: type, shape: shape, storage: .floats(floats))
    }

    init(ints: [Int32], shape: [Int], type: ElementType = .int32) {
        self.init(type: type, shape: shape, storage: .ints(ints))
    }

    var count: Int {
        switch storage {
        case .floats(let values): values.count
        case .ints(let values): values.count
        case .strings(let values): values.count
        case .mapped(let values): values.count
        case .packed(let values): values.count
        }
    }

    /// The elements as doubles (strings give none).
    var doubles: [Double] {
        switch storage {
        case .floats(let values): values.map(Double.init)
        case .ints(let values): values.map(Double.init)
        case .strings: []
        case .mapped(let values): values.floats.map(Double.init)
        case .packed(let values): values.decodedFloats.map(Double.init)
        }
    }

    /// The elements as integers (floats truncated toward zero).
    var ints: [Int] {
        switch storage {
        case .floats(let values): values.map { $0.isFinite ? Int($0) : 0 }
        case .ints(let values): values.map(Int.init)
        case .strings: []
        case .mapped(let values): values.floats.map { $0.isFinite ? Int($0) : 0 }
        case .packed(let values): values.decodedFloats.map { $0.isFinite ? Int($0) : 0 }
        }
    }

    /// The elements as floats (a mapped tensor's decoded into a new array).
    var floats: [Float] {
        switch storage {
        case .floats(let values): values
        case .ints(let values): values.map(Float.init)
        case .strings: []
        case .mapped(let values): values.floats
        case .packed(let values): values.decodedFloats
        }
    }

    /// Calls `body` with the elements as floats: a mapped float32 tensor's
    /// where the file is mapped (nothing copied), others from `floats`.
    func withUnsafeFloats<Result, Failure: Error>(_ body: (UnsafeBufferPointer<Float>) throws(Failure) -> Result) throws(Failure) -> Result {
        if case .mapped(let values) = storage, let direct = values.direct { return try body(direct) }
        return try floats.withUnsafeBufferPointer { buffer throws(Failure) in try body(buffer) }
    }

    /// Where the elements stay for as long as this tensor's storage lives —
    /// an array's own buffer, or the weight file's mapped bytes — naming the
    /// weights in caches of what is made from them (packed copies); `nil` for
    /// integers, whose floats are a temporary conversion.
    var stableFloatAddress: UInt? {
        switch storage {
        case .floats(let values): values.withUnsafeBufferPointer { $0.baseAddress.map { UInt(bitPattern: $0) } }
        case .mapped(let values): values.address
        case .ints, .strings, .packed: nil
        }
    }

    /// Drops a mapped tensor's pages from the process's resident memory
    /// (the file keeps them; a later read maps them back in). Nothing for others.
    func releasePages() {
        if case .mapped(let values) = storage { values.releasePages() }
    }

    var strings: [String] {
        if case .strings(let values) = storage { return values }
        return []
    }

    /// The single element as a double, for scalars and one-element tensors.
    var scalar: Double? { count == 1 ? doubles.first : nil }

    /// Converted to another element type: floats to integers truncate toward
    /// zero (as NumPy's `astype`), anything to bool is `!= 0`, fp16 rounds.
    func converted(to target: ElementType) -> Tensor {
        if target == type { return self }
        switch target {
        case .string:
            return Tensor(type: .string, shape: shape, storage: .strings(doubles.map { String($0) }))
        case .bool:
            return Tensor(ints: doubles.map { $0 != 0 ? 1 : 0 }, shape: shape, type: .bool)
        case .float16:
            if case .packed(let values) = storage, let rounded = values.roundedToHalf { return Tensor(type: .float16, shape: shape, storage: .packed(rounded)) }
            return Tensor(floats: floats.map { Float(Float16($0)) }, shape: shape, type: .float16)
        case .float32, .float64:
            // Float storage holds the values already: only the type changes (a mapped or packed tensor stays so).
            switch storage {
            case .mapped, .packed: return Tensor(type: target, shape: shape, storage: storage)
            default: break
            }
            return Tensor(floats: floats, shape: shape, type: target)
        default:
            if case .ints(let values) = storage { return Tensor(ints: values, shape: shape, type: target) }
            return Tensor(ints: floats.map { Int32(clamping: $0.isFinite ? Int($0) : 0) }, shape: shape, type: target)
        }
    }
}

/// Float values a program's weight file holds, read where the file is
/// mapped instead of decoded into an array: a float32 blob's elements are
/// the values (read in place), a float16 blob's are decoded when asked.
/// Costs no resident memory until read, and reading pages back in after
/// `releasePages()` gives the same values, so the graph can keep its weights
/// beside the packed copies plans make without holding them twice.
///
/// `@unchecked Sendable`: the mapping is read-only and lives as long as `file`.
final class MappedValues: @unchecked Sendable, Equatable {
    /// Keeps the mapping alive.
    private let file: MILBlobFile
    /// The values' bytes, where the file is mapped.
    let bytes: UnsafeRawBufferPointer
    let count: Int
    /// Whether the elements are float16 (otherwise float32).
    let half: Bool

    /// The `count` values at the start of `bytes` (a blob of `file`); `nil`
    /// when there are too few bytes, or float32 values are not 4-byte aligned.
    init?(file: MILBlobFile, bytes: UnsafeRawBufferPointer, count: Int, half: Bool) {
        guard count > 0, bytes.count >= count * (half ? 2 : 4), let base = bytes.baseAddress,
              UInt(bitPattern: base) % (half ? 2 : 4) == 0 else { return nil }
        self.file = file
        self.bytes = UnsafeRawBufferPointer(rebasing: bytes[0..<(count * (half ? 2 : 4))])
        self.count = count
        self.half = half
    }

    /// Where the values are mapped: the same for as long as this object lives.
    var address: UInt { UInt(bitPattern: bytes.baseAddress) }

    /// Float32 values where they are mapped; `nil` for float16 ones.
    var direct: UnsafeBufferPointer<Float>? {
        half ? nil : UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: Float.self), count: count)
    }

    /// The values decoded into an array.
    var floats: [Float] {
        if let direct { return Array(direct) }
        return [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let base = buffer.baseAddress { copy(to: base) }
            initialized = count
        }
    }

    /// Writes the values as floats at `target` (room for `count`).
    func copy(to target: UnsafeMutablePointer<Float>) {
        if let direct, let base = direct.baseAddress {
            target.update(from: base, count: count)
            return
        }
        modelc_decode_halves(bytes.baseAddress, count, target)
    }

    /// Drops the pages wholly inside these values from resident memory.
    func releasePages() { file.releasePages(of: bytes) }

    static func == (left: MappedValues, right: MappedValues) -> Bool {
        left === right || (left.count == right.count && left.half == right.half
                           && left.bytes.elementsEqual(right.bytes))
    }
}
