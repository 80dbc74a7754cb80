import ModelSpec

/// One weight tensor of an open bundle, in place in the mapped weight file:
/// no bytes are copied.
///
/// The view keeps its bundle (and so the mapping) alive, so it stays valid
/// however long it is kept, even when the cache has evicted the model. The
/// data starts on a 64-byte boundary (checked when the bundle was opened),
/// so it can be used as an array of its type directly.
///
/// `@unchecked Sendable`: `base` points into read-only mapped memory that
/// `bundle` keeps mapped; nothing can change it.
public struct WeightView: @unchecked Sendable {
    /// The bundle the data belongs to, kept alive by the view.
    public let bundle: ModelBundle
    /// The first byte of the data (read-only mapped memory).
    public let base: UnsafeRawPointer
    /// The number of values.
    public let count: Int
    /// The size of the data in bytes.
    public let byteCount: Int
    /// The type of each value.
    public let dataType: MILBlobFile.DataType
    /// The declared shape, or `[count]` when the bundle records none.
    public let shape: [Int]

    /// The data as float32 values, when that is its type.
    public var float32Values: UnsafeBufferPointer<Float>? {
        guard dataType == .float32 else { return nil }
        return UnsafeBufferPointer(start: base.assumingMemoryBound(to: Float.self), count: byteCount / 4)
    }

    /// The data as raw bytes.
    public var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base, count: byteCount)
    }
}
