import Dispatch
import Foundation
import ModelFeatures
import ModelRuntime
import SystemIO
import Testing
@testable import ModelServing

/// The queue: batching of concurrent requests, 503 when full, timeouts, and
/// nothing lost at shutdown. The executor is a stand-in that echoes its input.
@Suite struct InferenceSchedulerTests {
    static let model: Model = {
        // Any model will do: the stand-in executor never runs it.
        try! Model(contentsOf: FixturePath.glm)
    }()

    static func echo(delay: Double, batches: Locked<[Int]>) -> BatchExecutor {
        { _, batch, _ in
            batches.withLock { $0.append(batch.count) }
            Thread.sleep(forTimeInterval: delay)
            return .success((model, batch.map { .success($0) }))
        }
    }

    /// Runs `body`, which blocks (it waits for threads and for the
    /// scheduler), on a thread of its own rather than one of Swift's
    /// cooperative threads, which the rest of the suite needs.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    static func submitConcurrently(_ scheduler: InferenceScheduler, count: Int, timeoutMilliseconds: Int = 10_000) -> [JobOutcome] {
        let outcomes = Locked<[Int: JobOutcome]>([:])
        // A thread per request, as the HTTP server has one per connection.
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread {
                let deadline = DispatchTime.now() + .milliseconds(timeoutMilliseconds)
                let outcome = scheduler.submit(path: "m", inputs: ["i": .int64(Int64(index))], deadline: deadline,
                                               timeoutMilliseconds: timeoutMilliseconds)
                outcomes.withLock { $0[index] = outcome }
                group.leave()
            }.start()
        }
        group.wait()
        return outcomes.withLock { $0 }.sorted { $0.key < $1.key }.map(\.value)
    }

    @Test(.timeLimit(.minutes(1)), arguments: [2, 4, 8])
    func concurrentRequestsAreBatchedUpToMaxBatch(maxBatch: Int) async throws {
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 1, maxBatch: maxBatch, batchDelayNanoseconds: 50_000_000, capacity: 64,
                                           execute: Self.echo(delay: 0.01, batches: batches))
        let outcomes = await Self.offPool {
            defer { scheduler.shutdown() }
            return Self.submitConcurrently(scheduler, count: 16)
        }
        for (index, outcome) in outcomes.enumerated() {
            #expect(try outcome.result.get()["i"] == .int64(Int64(index)), "each request gets its own answer")
        }
        let sizes = batches.withLock { $0 }
        #expect(sizes.reduce(0, +) == 16 && sizes.allSatisfy { $0 <= maxBatch })
        #expect(sizes.count < 16, "some requests were computed together: \(sizes)")
    }

    @Test(.timeLimit(.minutes(1))) func aFullQueueAnswers503AtOnce() async {
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 2,
                                           execute: Self.echo(delay: 0.2, batches: batches))
        let outcomes = await Self.offPool {
            defer { scheduler.shutdown() }
            return Self.submitConcurrently(scheduler, count: 8)
        }
        let refused = outcomes.filter { if case .failure(.overloaded) = $0.result { true } else { false } }
        let served = outcomes.filter { (try? $0.result.get()) != nil }
        #expect(refused.count >= 1 && served.count >= 2 && refused.count + served.count == 8)
        #expect(RequestError.overloaded(queued: 2).status == 503)
    }

    @Test(.timeLimit(.minutes(1))) func aRequestPastItsDeadlineTimesOut() async {
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 8,
                                           execute: Self.echo(delay: 0.3, batches: batches))
        let outcomes = await Self.offPool {
            defer { scheduler.shutdown() }
            return Self.submitConcurrently(scheduler, count: 3, timeoutMilliseconds: 100)
        }
        #expect(outcomes.allSatisfy { $0.result == .failure(.timedOut(milliseconds: 100)) || (try? $0.result.get()) != nil })
        #expect(outcomes.contains { $0.result == .failure(.timedOut(milliseconds: 100)) })
    }

    @Test(.timeLimit(.minutes(1))) func shutdownFinishesWhatIsQueued() async {
        let batches = Locked<[Int]>([])
        let scheduler = InferenceScheduler(workers: 2, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 64,
                                           execute: Self.echo(delay: 0.02, batches: batches))
        let done = Locked(0)
        await Self.offPool {
            // A thread per request, as the HTTP server has one per connection (not Dispatch's shared pool).
            let group = DispatchGroup()
            for index in 0..<12 {
                group.enter()
                Thread {
                    let outcome = scheduler.submit(path: "m", inputs: ["i": .int64(Int64(index))], deadline: .distantFuture, timeoutMilliseconds: 0)
                    if (try? outcome.result.get()) != nil { done.withLock { $0 += 1 } }
                    group.leave()
                }.start()
            }
            Thread.sleep(forTimeInterval: 0.05)
            scheduler.shutdown()
            group.wait()
        }
        let submittedBeforeShutdown = batches.withLock { $0.count }
        #expect(done.withLock { $0 } == submittedBeforeShutdown)
    }

    /// A request past its deadline stops its computation: the executor's cancellation is
    /// cancelled once every request of the batch stopped waiting, so the worker is free again
    /// long before the computation would have ended (here 10 s of 10 ms steps).
    @Test(.timeLimit(.minutes(1))) func aTimedOutRequestStopsItsComputation() async {
        let steps = Locked(0)
        let scheduler = InferenceScheduler(workers: 1, maxBatch: 1, batchDelayNanoseconds: 0, capacity: 8) { _, batch, cancellation in
            for _ in 0..<1000 {
                if cancellation.isCancelled { return .success((Self.model, batch.map { _ in .failure(.inferenceFailed(model: "m", reason: "cancelled")) })) }
                steps.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return .success((Self.model, batch.map { .success($0) }))
        }
        let (first, seconds) = await Self.offPool {
            // Timed on the requests' own thread (the suite's other tests may keep Swift's pool busy).
            let started = DispatchTime.now().uptimeNanoseconds
            let first = Self.submitConcurrently(scheduler, count: 1, timeoutMilliseconds: 150)[0]
            scheduler.shutdown()  // returns once the worker is idle
            return (first, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        }
        #expect(first.result == .failure(.timedOut(milliseconds: 150)))
        #expect(scheduler.canceledComputations == 1)
        #expect(steps.withLock { $0 } < 100, "the computation stopped soon after the deadline")
        #expect(seconds < 5, "the worker was free long before the 10 s computation would have ended")
    }
}

