import SystemIO

/// A loaded model handed out by a `ResourceCache` (a `ModelCache`, a
/// `RunnableModelCache`). While any lease on a model is alive, the cache does
/// not evict it. Release a lease when done (or let it go out of scope); the
/// model may then be evicted and loaded again later.
public final class ResourceLease<Resource: CachedResource>: Sendable {
    /// The leased model.
    public let model: Resource
    private let onRelease: Locked<(@Sendable () -> Void)?>

    init(model: Resource, onRelease: @escaping @Sendable () -> Void) {
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
