import Synchronization

/// Something that tells when memory runs short.
///
/// Implementations are thread-safe. Each hands out one stream of levels;
/// `stop()` ends it and releases whatever the source holds (files, a thread).
public protocol MemoryPressureSource: Sendable {
    /// One line naming the source for logs, e.g.
    /// "kernel PSI /proc/pressure/memory (some 150ms/1s, full 100ms/1s)".
    var name: String { get }

    /// The levels as they happen, until `stop()`.
    ///
    /// One stream per source: the first access returns it, every later access
    /// returns a stream that is already finished. Levels are buffered up to a
    /// small limit while nobody reads; the oldest are dropped first.
    var levels: AsyncStream<MemoryPressureLevel> { get }

    /// Stops watching and ends the stream. Idempotent; when it returns, any
    /// thread the source started has ended (unless called from that thread).
    func stop()
}

/// The one stream a source hands out, and the continuation that feeds it.
final class LevelChannel: Sendable {
    let continuation: AsyncStream<MemoryPressureLevel>.Continuation
    private let unclaimed: Mutex<AsyncStream<MemoryPressureLevel>?>

    /// How many levels wait for a slow reader before the oldest are dropped.
    static let bufferLimit = 64

    init() {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MemoryPressureLevel.self, bufferingPolicy: .bufferingNewest(Self.bufferLimit))
        self.continuation = continuation
        unclaimed = Mutex(stream)
    }

    deinit {
        continuation.finish()
    }

    /// The stream on the first call; a finished stream on every later one.
    func claim() -> AsyncStream<MemoryPressureLevel> {
        let stream = unclaimed.withLock { stream in
            defer { stream = nil }
            return stream
        }
        return stream ?? AsyncStream { $0.finish() }
    }
}
