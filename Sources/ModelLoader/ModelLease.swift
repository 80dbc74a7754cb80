import SystemIO

/// A loaded model handed out by a `ModelCache`. While any lease on a model is
/// alive, the cache does not evict it. Release a lease when done (or let it
/// go out of scope); the model may then be evicted and reloaded later.
public final class ModelLease: Sendable {
    /// The leased model.
    public let model: ModelBundle
    private let onRelease: Locked<(@Sendable () -> Void)?>

    init(model: ModelBundle, onRelease: @escaping @Sendable () -> Void) {
        self.model = model
        self.onRelease = Locked(onRelease)
    }

    /// Gives the model back to the cache; later calls do nothing.
    public func release() {
        let action = onRelease.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { release() }
}
