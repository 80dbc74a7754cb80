/// A dense, row-major multi-dimensional array of numbers: the multi-array
/// feature value of Core ML (`MLMultiArray`).
///
/// A value type: copies share storage until one is changed. The elements are
/// always stored contiguously in row-major order; arrays given with other
/// strides are gathered into that order when made (`init(copying:…)`).
public struct MultiArray: Sendable {
    /// The element types a multi-array can hold.
    public enum DataType: String, Sendable, CaseIterable, CustomStringConvertible {
        case float32, float16, float64, int32

        /// Bytes per element.
        public var size: Int {
            switch self {
            case .float32, .int32: 4
            case .float16: 2
            case .float64: 8
            }
        }

        /// The schema's name (`FLOAT32`, `FLOAT16`, `DOUBLE`, `INT32`).
        public var schemaName: String {
            switch self {
            case .float32: "FLOAT32"
            case .float16: "FLOAT16"
            case .float64: "DOUBLE"
            case .int32: "INT32"
            }
        }

        /// The data type a schema name (`FLOAT32`, `DOUBLE`, …) stands for.
        public init?(schemaName: String) {
            guard let type = Self.allCases.first(where: { $0.schemaName == schemaName }) else { return nil }
            self = type
        }

        public var description: String { rawValue }
    }

    public let dataType: DataType
    public let shape: [Int]
    private var storage: Storage

    /// The number of elements (the product of the shape; 1 for rank 0).
    public var count: Int { storage.count }

    /// Row-major strides, in elements.
    public var strides: [Int] { Self.rowMajorStrides(shape) }

    /// A zero-filled array.
    ///
    /// - Precondition: every dimension is ≥ 0.
    public init(shape: [Int], dataType: DataType) {
        precondition(shape.allSatisfy { $0 >= 0 }, "negative dimension in \(shape)")
        self.shape = shape
        self.dataType = dataType
        storage = Storage(count: shape.reduce(1, *), dataType: dataType)
    }

    /// An array holding `values` converted to `dataType`, in row-major order.
    ///
    /// - Precondition: `values.count` is the product of `shape`.
    public init(_ values: [Double], shape: [Int], dataType: DataType = .float64) {
        self.init(shape: shape, dataType: dataType)
        precondition(values.count == count, "\(values.count) values for shape \(shape)")
        for (index, value) in values.enumerated() { storage.set(index, value) }
    }

    /// An array of float32 `values`.
    public init(_ values: [Float], shape: [Int]) {
        self.init(shape: shape, dataType: .float32)
        precondition(values.count == count, "\(values.count) values for shape \(shape)")
        values.withUnsafeBytes { storage.bytes.copyMemory(from: $0) }
    }

    /// Copies elements laid out with any `strides` (in elements, as Core ML's
    /// `MLMultiArray` gives them) into a new row-major array.
    ///
    /// - Precondition: `bytes` holds every element the shape and strides reach.
    public init(copying bytes: UnsafeRawBufferPointer, shape: [Int], strides: [Int], dataType: DataType) {
        precondition(shape.count == strides.count, "shape \(shape) and strides \(strides) differ in rank")
        self.init(shape: shape, dataType: dataType)
        let size = dataType.size
        if strides == Self.rowMajorStrides(shape) {
            storage.bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(count * size)))
            return
        }
        guard let source = bytes.baseAddress, let target = storage.bytes.baseAddress else { return }
        var index = [Int](repeating: 0, count: shape.count)
        for element in 0..<count {
            var offset = 0
            for axis in 0..<shape.count { offset += index[axis] * strides[axis] }
            precondition((offset + 1) * size <= bytes.count, "strides \(strides) reach past the buffer")
            (target + element * size).copyMemory(from: source + offset * size, byteCount: size)
            var axis = shape.count - 1
            while axis >= 0 {
                index[axis] += 1
                if index[axis] < shape[axis] { break }
                index[axis] = 0
                axis -= 1
            }
        }
    }

    /// Element `index` (row-major) as a double.
    public subscript(index: Int) -> Double {
        get { storage.get(index) }
        set {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            storage.set(index, newValue)
        }
    }

    /// Every element as a double, in row-major order.
    public var doubles: [Double] {
        switch dataType {
        case .float64:
            return Array(storage.bytes.bindMemory(to: Double.self))
        default:
            return (0..<count).map { storage.get($0) }
        }
    }

    /// Every element as a float, in row-major order.
    public var floats: [Float] {
        if dataType == .float32 { return Array(storage.bytes.bindMemory(to: Float.self)) }
        return (0..<count).map { Float(storage.get($0)) }
    }

    /// The elements at row-major positions `range`, as floats (a decoder's
    /// last row of logits, without converting the rows before it).
    public func floats(_ range: Range<Int>) -> [Float] {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "elements \(range) of \(count)")
        if dataType == .float32 { return Array(storage.bytes.bindMemory(to: Float.self)[range]) }
        return range.map { Float(storage.get($0)) }
    }

    /// Calls `body` with the elements' bytes (row-major, `dataType`).
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(storage.bytes))
    }

    /// Calls `body` with the elements' bytes for writing; copies first when shared.
    public mutating func withUnsafeMutableBytes<Result>(_ body: (UnsafeMutableRawBufferPointer) throws -> Result) rethrows -> Result {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return try body(storage.bytes)
    }

    /// The same elements converted to `type`.
    public func converted(to type: DataType) -> MultiArray {
        if type == dataType { return self }
        let result = MultiArray(shape: shape, dataType: type)
        for index in 0..<count { result.storage.set(index, storage.get(index)) }
        return result
    }

    /// The same elements with another shape of the same element count.
    public func reshaped(_ newShape: [Int]) -> MultiArray? {
        guard newShape.allSatisfy({ $0 >= 0 }), newShape.reduce(1, *) == count else { return nil }
        return MultiArray(shape: newShape, dataType: dataType, storage: storage)
    }

    private init(shape: [Int], dataType: DataType, storage: Storage) {
        self.shape = shape
        self.dataType = dataType
        self.storage = storage
    }

    /// Row-major strides of `shape`, in elements.
    package static func rowMajorStrides(_ shape: [Int]) -> [Int] {
        var strides = [Int](repeating: 1, count: shape.count)
        var stride = 1
        for axis in shape.indices.reversed() {
            strides[axis] = stride
            stride *= shape[axis]
        }
        return strides
    }

    /// The elements' memory, 64-byte aligned, owned by the array values that share it.
    private final class Storage: @unchecked Sendable {
        let bytes: UnsafeMutableRawBufferPointer
        let count: Int
        let dataType: DataType

        init(count: Int, dataType: DataType) {
            self.count = count
            self.dataType = dataType
            bytes = .allocate(byteCount: max(count * dataType.size, 1), alignment: 64)
            bytes.initializeMemory(as: UInt8.self, repeating: 0)
        }

        deinit { bytes.deallocate() }

        func copy() -> Storage {
            let copy = Storage(count: count, dataType: dataType)
            copy.bytes.copyMemory(from: UnsafeRawBufferPointer(bytes))
            return copy
        }

        func get(_ index: Int) -> Double {
            switch dataType {
            case .float32: Double(bytes.load(fromByteOffset: index * 4, as: Float.self))
            case .float16: Double(bytes.load(fromByteOffset: index * 2, as: Float16.self))
            case .float64: bytes.load(fromByteOffset: index * 8, as: Double.self)
            case .int32: Double(bytes.load(fromByteOffset: index * 4, as: Int32.self))
            }
        }

        func set(_ index: Int, _ value: Double) {
            switch dataType {
            case .float32: bytes.storeBytes(of: Float(value), toByteOffset: index * 4, as: Float.self)
            case .float16: bytes.storeBytes(of: Float16(value), toByteOffset: index * 2, as: Float16.self)
            case .float64: bytes.storeBytes(of: value, toByteOffset: index * 8, as: Double.self)
            case .int32:
                let clamped = value.isNaN ? 0 : Int32(max(Double(Int32.min), min(Double(Int32.max), value.rounded(.towardZero))))
                bytes.storeBytes(of: clamped, toByteOffset: index * 4, as: Int32.self)
            }
        }
    }
}

extension MultiArray: Equatable {
    /// Equal when type, shape and every element's bytes are equal.
    public static func == (lhs: MultiArray, rhs: MultiArray) -> Bool {
        lhs.dataType == rhs.dataType && lhs.shape == rhs.shape
            && lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in left.elementsEqual(right) } }
    }
}
