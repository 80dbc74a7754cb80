/// A tensor value known when a plan is made: a constant of the program, or
/// what folding made of constants. Row-major.
struct Tensor: Sendable, Equatable {
    enum Storage: Sendable, Equatable {
        case floats([Float])
        case ints([Int32])
        case strings([String])
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
        }
    }

    /// The elements as doubles (strings give none).
    var doubles: [Double] {
        switch storage {
        case .floats(let values): values.map(Double.init)
        case .ints(let values): values.map(Double.init)
        case .strings: []
        }
    }

    /// The elements as integers (floats truncated toward zero).
    var ints: [Int] {
        switch storage {
        case .floats(let values): values.map { $0.isFinite ? Int($0) : 0 }
        case .ints(let values): values.map(Int.init)
        case .strings: []
        }
    }

    var floats: [Float] {
        switch storage {
        case .floats(let values): values
        case .ints(let values): values.map(Float.init)
        case .strings: []
        }
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
            return Tensor(floats: floats.map { Float(Float16($0)) }, shape: shape, type: .float16)
        case .float32, .float64:
            return Tensor(floats: floats, shape: shape, type: target)
        default:
            if case .ints(let values) = storage { return Tensor(ints: values, shape: shape, type: target) }
            return Tensor(ints: floats.map { Int32(clamping: $0.isFinite ? Int($0) : 0) }, shape: shape, type: target)
        }
    }
}
