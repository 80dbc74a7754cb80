import Foundation
import ModelFeatures
import SystemIO

/// The element type of an `MLMultiArray`, with Apple's raw values.
public enum MLMultiArrayDataType: Int, Sendable {
    case double = 65600
    case float32 = 65568
    case float16 = 65552
    case int32 = 131104

    public static let float64 = MLMultiArrayDataType.double
    public static let float = MLMultiArrayDataType.float32

    var native: MultiArray.DataType {
        switch self {
        case .double: .float64
        case .float32: .float32
        case .float16: .float16
        case .int32: .int32
        }
    }

    init(_ native: MultiArray.DataType) {
        self = switch native {
        case .float64: .double
        case .float32: .float32
        case .float16: .float16
        case .int32: .int32
        }
    }
}

/// A multi-dimensional array of numbers (Core ML's `MLMultiArray`): a
/// reference to row-major elements, read and written through subscripts
/// under a lock, so it may be shared between threads.
public final class MLMultiArray: Sendable, CustomStringConvertible {
    private let storage: Locked<MultiArray>

    /// A zero-filled array.
    ///
    /// - Throws: `MLModelError` (`.generic`) for a negative dimension.
    public init(shape: [NSNumber], dataType: MLMultiArrayDataType) throws {
        let dimensions = shape.map(\.intValue)
        guard dimensions.allSatisfy({ $0 >= 0 }) else {
            throw MLModelError(.generic, "MLMultiArray shape \(dimensions) has a negative dimension")
        }
        storage = Locked(MultiArray(shape: dimensions, dataType: dataType.native))
    }

    /// Wraps a native multi-array (modelc's `MultiArray`).
    public init(_ array: MultiArray) {
        storage = Locked(array)
    }

    /// The elements as modelc's value type.
    public var multiArray: MultiArray { storage.withLock { $0 } }

    public var shape: [NSNumber] { storage.withLock { $0.shape.map { NSNumber(value: $0) } } }
    /// Row-major strides, in elements.
    public var strides: [NSNumber] { storage.withLock { $0.strides.map { NSNumber(value: $0) } } }
    public var dataType: MLMultiArrayDataType { storage.withLock { MLMultiArrayDataType($0.dataType) } }
    public var count: Int { storage.withLock { $0.count } }

    /// Element `index` in row-major order.
    public subscript(index: Int) -> NSNumber {
        get { storage.withLock { NSNumber(value: $0[index]) } }
        set { storage.withLock { $0[index] = newValue.doubleValue } }
    }

    /// The element at a full index (one number per dimension).
    public subscript(key: [NSNumber]) -> NSNumber {
        get { self[linearIndex(key)] }
        set { self[linearIndex(key)] = newValue }
    }

    private func linearIndex(_ key: [NSNumber]) -> Int {
        let strides = storage.withLock { $0.strides }
        precondition(key.count == strides.count, "index \(key) for an array of rank \(strides.count)")
        return zip(key, strides).reduce(0) { $0 + $1.0.intValue * $1.1 }
    }

    /// Calls `body` with the elements' bytes (row-major, `dataType`).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withLock { try $0.withUnsafeBytes(body) }
    }

    /// Calls `body` with the elements' bytes for writing, and the strides.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer, [Int]) throws -> R) rethrows -> R {
        try storage.withLock { array in
            let strides = array.strides
            return try array.withUnsafeMutableBytes { try body($0, strides) }
        }
    }

    public var description: String {
        let array = multiArray
        return "MLMultiArray(\(MLMultiArrayDataType(array.dataType)) \(array.shape))"
    }
}
