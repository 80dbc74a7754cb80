import Dispatch
import Foundation
import ModelFeatures
import SystemIO
import Testing
@testable import ModelServing

/// A request whose client leaves: out of the queue at once, its computation stopped at the next
/// operation unless another request of its batch still waits.
extension InferenceSchedulerTests {
    /// An executor of `steps` 10 ms steps that looks at its cancellation before each, counting them.
    static func slow(steps: Int, counted: Locked<Int>, batches: Locked<[Int]> = Locked([])) -> BatchExecutor {
        { _, batch, cancellation in
            batches.withLock { $0.append(batch.count) }
            for _ in 0..<steps {
                if cancellation.isCancelled { return .success((model, batch.map { _ in .failure(.inferenceFailed(model: "m", reason: "cancelled")) })) }
                counted.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return .success((model, batch.map { .success($0) }))
        }
    }

    /// A client that is there for `seconds` after the call, then gone.
    static func leaving(after seconds: Double) -> @Sendable () -> Bool {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        return { DispatchTime.now().uptimeNanoseconds >= end }
    }

    /// Submits one request per entry, each on a thread of its own `after` seconds, its `index` as
    /// input; waits for every outcome, then shuts the scheduler down.
    static func submit(to scheduler: InferenceScheduler,
                       _ requests: [(after: Double, clientGone: (@Sendable () -> Bool)?)]) -> [Int: JobOutcome] {
        let group = DispatchGroup()
        let outcomes = Locked<[Int: JobOutcome]>([:])
        for (index, request) in requests.enumerated() {
            group.enter()
            Thread {
                Thread.sleep(forTimeInterval: request.after)
                let outcome = scheduler.submit(path: "m", inputs: ["i": .int64(Int64(index))], deadline: .now() + .seconds(30),
                                               timeoutMilliseconds: 30_000, clientGone: request.clientGone)
                outcomes.withLock { $0[index] = outcome }
                group.leave()
            }.start()
        }
        group.wait()
        scheduler.shutdown()
        return outcomes.withLock { $0 }
    }

    @Test(.timeLimit(.minutes(1))) func aClientLeavingMidComputationFreesTheWorker() async {
        let steps = Locked(0)
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 8,
                                           execute: Self.slow(steps: 1000, counted: steps))
        let (outcome, seconds) = await Self.offPool {
            let started = DispatchTime.now().uptimeNanoseconds
            let outcome = scheduler.submit(path: "m", inputs: [:], deadline: .now() + .seconds(30), timeoutMilliseconds: 30_000,
                                           clientGone: Self.leaving(after: 0.15))
            scheduler.shutdown()  // returns once the worker is idle
            return (outcome, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        }
        #expect(outcome.result == .failure(.clientGone))
        #expect(scheduler.canceledComputations == 1)
        #expect(steps.withLock { $0 } < 100, "the computation stopped soon after the client left")
        #expect(seconds < 5, "the worker was free long before the 10 s computation would have ended")
    }

    @Test(.timeLimit(.minutes(1))) func aClientLeavingWhileQueuedIsNeverComputed() async {
        let steps = Locked(0)
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 8,
                                           execute: Self.slow(steps: 40, counted: steps, batches: batches))
        // The second is queued behind the first, and its client leaves while it waits.
        let outcomes = await Self.offPool {
            Self.submit(to: scheduler, [(after: 0, clientGone: { false }), (after: 0.05, clientGone: Self.leaving(after: 0.1))])
        }
        #expect(outcomes[0]?.result == .success(["i": .int64(0)]))
        #expect(outcomes[1]?.result == .failure(.clientGone))
        #expect(batches.withLock { $0 } == [1], "the departed request never reached the model")
        #expect(scheduler.canceledComputations == 0)
    }

    @Test(.timeLimit(.minutes(1))) func aBatchKeepsComputingWhileOneOfItsClientsWaits() async {
        let steps = Locked(0)
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 2, batchDelayNanoseconds: 100_000_000, capacity: 8,
                                           execute: Self.slow(steps: 30, counted: steps, batches: batches))
        let outcomes = await Self.offPool {
            Self.submit(to: scheduler, [(after: 0, clientGone: nil), (after: 0, clientGone: Self.leaving(after: 0.15))])
        }
        #expect(batches.withLock { $0 } == [2])
        #expect(outcomes[0]?.result == .success(["i": .int64(0)]))
        #expect(outcomes[1]?.result == .failure(.clientGone))
        #expect(scheduler.canceledComputations == 0 && steps.withLock { $0 } == 30)
    }
}
