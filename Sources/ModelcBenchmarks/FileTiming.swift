import Dispatch
import SystemIO

/// Times work over a list of image files, as the image benchmarks run it.
enum FileTiming {
    /// Wall seconds to run `work` on every file, `threads` at a time.
    static func timed(_ files: [String], threads: Int, _ work: @escaping @Sendable (String) throws -> Void) throws -> Double {
        let next = Locked(0)
        let failure = Locked<(any Error)?>(nil)
        let start = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            while true {
                let index = next.withLock { next in
                    defer { next += 1 }
                    return next
                }
                guard index < files.count else { return }
                do { try work(files[index]) } catch { failure.withLock { $0 = $0 ?? error } }
            }
        }
        let seconds = (ContinuousClock.now - start).inSeconds
        if let error = failure.withLock({ $0 }) { throw error }
        return seconds
    }
}
