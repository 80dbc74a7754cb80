#if canImport(Glibc)
import Glibc
#endif

/// The waits between attempts: exponential with jitter, capped, unless the
/// server said how long to wait.
enum Backoff {
    static let cap: Duration = .seconds(30)

    /// The wait before retry number `retry` (1 for the first retry): half to
    /// all of `initial · 2^(retry-1)`, at most 30 s; `retryAfterSeconds`
    /// from the server wins when given (also capped).
    static func delay(retry: Int, initial: Duration, retryAfterSeconds: Int?) -> Duration {
        if let retryAfterSeconds, retryAfterSeconds >= 0 {
            return min(.seconds(retryAfterSeconds), cap)
        }
        var full = initial
        for _ in 1..<max(1, retry) {
            full *= 2
            if full >= cap { break }
        }
        full = min(full, cap)
        let fraction = Double.random(in: 0.5...1.0)
        return full * fraction
    }

    /// Blocks the calling thread for `duration`.
    static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(clamping: seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0, errno == EINTR {
            request = remaining
        }
    }
}
