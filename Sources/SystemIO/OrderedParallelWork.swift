import Dispatch
import Foundation

/// Work on many items by several threads, with the results handed back in
/// item order as soon as each one and those before it are done — a stream,
/// not batches that wait for their slowest item.
public enum OrderedParallelWork {
    /// Runs `work` on the indices `0..<count` on `threads` threads and calls
    /// `deliver` on the calling thread with each result, in index order. At
    /// most `window` items are taken ahead of the last one delivered, so
    /// results never pile up faster than they are used. Returns once every
    /// result is delivered and every worker has stopped.
    public static func run<Value: Sendable>(count: Int, threads: Int, window: Int,
                                            work: @escaping @Sendable (Int) -> Value,
                                            deliver: (Int, Value) -> Void) {
        guard count > 0 else { return }
        let queue = Queue<Value>(count: count, window: max(1, window))
        let workers = DispatchGroup()
        for _ in 0..<max(1, min(threads, count)) {
            DispatchQueue.global().async(group: workers) {
                while let index = queue.take() { queue.put(index, work(index)) }
            }
        }
        for index in 0..<count { deliver(index, queue.result(index)) }
        workers.wait()
    }

    /// The indices handed out and the results waiting to be delivered.
    private final class Queue<Value: Sendable>: @unchecked Sendable {
        private let condition = NSCondition()
        private let count: Int
        private let window: Int
        // Guarded by `condition`.
        private var results: [Int: Value] = [:]
        private var nextToTake = 0
        private var delivered = 0

        init(count: Int, window: Int) {
            self.count = count
            self.window = window
        }

        /// The next index to work on, waiting while the window is full; `nil` when all are taken.
        func take() -> Int? {
            condition.lock()
            defer { condition.unlock() }
            while nextToTake < count, nextToTake >= delivered + window { condition.wait() }
            guard nextToTake < count else { return nil }
            defer { nextToTake += 1 }
            return nextToTake
        }

        func put(_ index: Int, _ value: Value) {
            condition.lock()
            results[index] = value
            condition.broadcast()
            condition.unlock()
        }

        /// Waits for the result of `index` (the next one in order) and takes it.
        func result(_ index: Int) -> Value {
            condition.lock()
            defer { condition.unlock() }
            while true {
                if let value = results.removeValue(forKey: index) {
                    delivered = index + 1
                    condition.broadcast()
                    return value
                }
                condition.wait()
            }
        }
    }
}
