import Dispatch
import Foundation
import SystemIO
import Testing
@testable import TensorRuntime

/// The team that splits an operation between the caller and persistent
/// helper threads: every part runs exactly once, the caller returns only
/// when all are done, and callers that find the team busy (another
/// prediction, a part that splits again) still get every part run.
@Suite("Thread team")
struct ThreadTeamTests {
    @Test("every part runs once, the caller waits for all", arguments: [1, 2, 3, 7, 64], [1, 2, 3, 4])
    func everyPartOnce(count: Int, threads: Int) {
        for _ in 0..<50 {
            let runs = Locked([Int](repeating: 0, count: count))
            ThreadTeam.shared.perform(count, threads: threads) { part in
                runs.withLock { $0[part] += 1 }
            }
            #expect(runs.withLock { $0 } == [Int](repeating: 1, count: count))
        }
    }

    @Test("callers at once and parts that split again each run every part", .timeLimit(.minutes(1)))
    func concurrentAndNested() {
        let total = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<25 {
                ThreadTeam.shared.perform(3, threads: 2) { _ in
                    ThreadTeam.shared.perform(2, threads: 2) { _ in total.withLock { $0 += 1 } }
                }
            }
        }
        #expect(total.withLock { $0 } == 4 * 25 * 3 * 2)
    }

    @Test("while work in the background sets a core aside, an operation runs on the cores left, every part once")
    func reservedCore() {
        let threads = max(2, ThreadTeam.cores)
        ThreadTeam.reserving {
            // Other suites may set cores aside too meanwhile: at most what this one leaves.
            let left = max(1, ThreadTeam.cores - 1)
            #expect(ThreadTeam.available(threads) <= left)
            #expect(ThreadTeam.available(1) == 1)
            for _ in 0..<10 {
                let workers = Locked(Set<UInt64>()), runs = Locked([Int](repeating: 0, count: 16))
                ThreadTeam.shared.perform(16, threads: threads) { part in
                    let thread = UInt64(pthread_self())
                    workers.withLock { _ = $0.insert(thread) }
                    runs.withLock { $0[part] += 1 }
                    usleep(200)
                }
                #expect(workers.withLock { $0.count } <= left)
                #expect(runs.withLock { $0 } == [Int](repeating: 1, count: 16))
            }
        }
    }

    @Test("a caller asking for 2 threads gets at most 2, after a wider caller hired more helpers")
    func threadsAskedForAreTheLimit() {
        ThreadTeam.shared.perform(8, threads: 4) { _ in usleep(2_000) }
        for _ in 0..<20 {
            let workers = Locked(Set<UInt64>())
            ThreadTeam.shared.perform(16, threads: 2) { _ in
                let thread = UInt64(pthread_self())
                workers.withLock { _ = $0.insert(thread) }
                usleep(500)
            }
            #expect(workers.withLock { $0.count } <= 2)
        }
    }
}
