import Foundation

/// Long computations of tests (reading, planning and running whole
/// programs), run on threads of their own instead of the few that Swift
/// concurrency and Dispatch's global queues share (as many as there are
/// processors). A synchronous test holds a shared thread for as long as it
/// runs: the parameterized attention cases held all of them under load, and
/// tests with time limits, waiting for a thread, nearly ran out of time.
/// Awaiting `run` suspends the test instead. At most as many computations run
/// at once as there are processors, as many as the shared threads ran before.
public enum HeavyWork {
    private static let lanes = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// The result of `work`, computed on a thread of its own. Expectations
    /// (`#expect`, `#require`) and task locals stay in the test, outside
    /// `work`: on another thread they would not know their test.
    public static func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                lanes.wait()
                defer { lanes.signal() }
                continuation.resume(with: Swift.Result { try work() })
            }
            thread.start()
        }
    }
}
