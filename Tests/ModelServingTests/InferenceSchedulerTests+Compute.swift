import Dispatch
import Foundation
import ModelFeatures
import SystemIO
import Testing
@testable import ModelServing

/// Requests that bring their own computation (a sequence's, on its state): computed alone, never
/// batched, while the others of the model still batch together.
extension InferenceSchedulerTests {
    @Test(.timeLimit(.minutes(1)), arguments: [2, 4])
    func aRequestWithItsOwnComputationIsNeverBatched(workers: Int) async throws {
        let batches = Locked<[Int]>([])
        let alone = Locked(0)
        let scheduler = InferenceScheduler(workers: workers, maxBatch: 8, batchDelayNanoseconds: 50_000_000, capacity: 64,
                                           execute: Self.echo(delay: 0.01, batches: batches))
        let outcomes: [Int: JobOutcome] = await Self.offPool {
            let group = DispatchGroup()
            let outcomes = Locked<[Int: JobOutcome]>([:])
            for index in 0..<12 {
                group.enter()
                Thread {
                    let own: JobComputation = { _ in
                        alone.withLock { $0 += 1 }
                        return .success((Self.model, .success(["alone": .int64(Int64(index))])))
                    }
                    let compute: JobComputation? = index % 3 == 0 ? own : nil
                    let outcome = scheduler.submit(path: "m", inputs: ["i": .int64(Int64(index))], deadline: .now() + .seconds(10),
                                                   timeoutMilliseconds: 10_000, compute: compute)
                    outcomes.withLock { $0[index] = outcome }
                    group.leave()
                }.start()
            }
            group.wait()
            scheduler.shutdown()
            return outcomes.withLock { $0 }
        }
        for (index, outcome) in outcomes {
            let expected: [String: FeatureValue] = [index % 3 == 0 ? "alone" : "i": .int64(Int64(index))]
            let values: [String: FeatureValue]? = try? outcome.result.get()
            #expect(values == expected)
            if index % 3 == 0 { #expect(outcome.batchSize == 1) }
        }
        #expect(alone.withLock { $0 } == 4, "each computed once, by itself")
        #expect(batches.withLock { $0 }.reduce(0, +) == 8, "the executor saw only the other requests")
    }
}
