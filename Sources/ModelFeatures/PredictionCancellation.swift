import Synchronization

/// A flag another thread sets to stop a prediction: the tensor engine looks at
/// it before each operation and stops with `RuntimeError.cancelled`, so a
/// prediction nobody waits for any more (its client gone, its deadline past)
/// frees its thread at the next operation boundary. Engines that compute in one
/// step (classic models) look at it once, before they start.
///
/// Thread-safe; cancelling is final.
public final class PredictionCancellation: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    /// Asks the prediction to stop.
    public func cancel() { flag.store(true, ordering: .relaxed) }

    /// Whether `cancel()` was called.
    public var isCancelled: Bool { flag.load(ordering: .relaxed) }

    /// Throws `RuntimeError.cancelled` once cancelled.
    @inlinable
    public func check() throws(RuntimeError) {
        if isCancelled { throw .cancelled }
    }
}
