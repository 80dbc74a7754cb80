#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex.
///
/// Used instead of `Synchronization.Mutex` where code must be checked with
/// ThreadSanitizer: on Linux, `Mutex` waits on futexes directly, which the
/// sanitizer does not see, so every access under it is reported as a race and
/// real races would hide among the false ones. pthread mutexes it understands.
public final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
