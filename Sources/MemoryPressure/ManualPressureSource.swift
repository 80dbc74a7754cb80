/// A source whose levels are whatever its owner sends: for tests, and for
/// callers that learn of pressure elsewhere (a management API, a signal).
///
/// Thread-safe; `send(_:)` may be called from any thread.
public final class ManualPressureSource: MemoryPressureSource {
    private let channel = LevelChannel()

    public init() {}

    /// "manual".
    public var name: String { "manual" }

    /// The levels sent, in order, until `stop()`.
    public var levels: AsyncStream<MemoryPressureLevel> { channel.claim() }

    /// Delivers `level` to the stream; ignored after `stop()`.
    public func send(_ level: MemoryPressureLevel) {
        channel.continuation.yield(level)
    }

    /// Ends the stream; later `send`s are dropped.
    public func stop() {
        channel.continuation.finish()
    }
}
