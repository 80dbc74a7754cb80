#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Synchronization
import SystemIO

/// The threads a prediction splits its operations between: the caller and
/// helper threads that stay for the life of the process.
///
/// `DispatchQueue.concurrentPerform` wakes a sleeping worker for every
/// operation and puts it back to sleep after; on this kind of virtual
/// machine each sleep and wake costs tens of microseconds of CPU time on
/// both threads, so a MobileNetV2 split over 2 threads took 8.4 ms of CPU
/// time for 4.7 ms at 1 thread and ran no faster. Helpers here keep waiting
/// for the next operation for a short while (`spin`) before they sleep, as
/// OpenMP's threads do with a bounded spin count; the caller takes parts
/// too, so a helper that lost its core only means the caller does more
/// (nothing waits for a helper that has not started).
///
/// One operation at a time uses the team: a second caller (another
/// prediction, or a part that splits again) runs on Dispatch's threads.
final class ThreadTeam: @unchecked Sendable {
    /// The process's team.
    static let shared = ThreadTeam()

    /// How long a helper keeps looking for the next operation before it sleeps, in nanoseconds.
    static let spin: UInt64 = 100_000

    /// The machine's cores, and how many of them work in the background is
    /// using now (`reserving`).
    static let cores = ProcessInfo.processInfo.activeProcessorCount
    private static let reserved = Atomic<Int>(0)

    /// Runs `body`, background work of the engine (a decoder's next step,
    /// planned while this one runs), with a core set aside for it: while it
    /// runs, an operation uses at most the cores left, so that it and the
    /// operations' threads do not take turns on the same cores (each turn a
    /// thread loses stalls the others at the operation's end). Where a
    /// prediction's threads leave a core free, nothing changes.
    static func reserving<Result>(_ body: () throws -> Result) rethrows -> Result {
        reserved.wrappingAdd(1, ordering: .relaxed)
        defer { reserved.wrappingSubtract(1, ordering: .relaxed) }
        return try body()
    }

    /// Threads an operation asking for `threads` runs on now.
    static func available(_ threads: Int) -> Int {
        min(threads, max(1, cores - reserved.load(ordering: .relaxed)))
    }

    /// An operation being run: its parts, the next part to take, how many are
    /// done, and how many helpers may still join (the caller asked for at most
    /// `threads`, whatever the size of the team an earlier caller hired).
    private final class Job: @unchecked Sendable {
        let body: @Sendable (Int) -> Void
        let count: Int
        let next = Atomic<Int>(0)
        let done = Atomic<Int>(0)
        let seats: Atomic<Int>

        init(count: Int, helpers: Int, body: @escaping @Sendable (Int) -> Void) {
            self.count = count
            self.body = body
            seats = Atomic(helpers)
        }

        /// Takes a helper's seat, if one is left.
        func join() -> Bool {
            seats.wrappingSubtract(1, ordering: .relaxed).oldValue > 0
        }

        /// Runs parts until none is left.
        func work() {
            while true {
                let part = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard part < count else { return }
                body(part)
                done.wrappingAdd(1, ordering: .releasing)
            }
        }
    }

    private let busy = Atomic<Bool>(false)
    /// Bumped for every job; helpers wait for it to change.
    private let generation = Atomic<Int>(0)
    private let sleepers = Atomic<Int>(0)
    private let current = Locked<Job?>(nil)
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let helpers = Locked(0)

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
    }

    /// Runs `body(0)`, …, `body(count − 1)` at once on at most `threads`
    /// threads (the caller's included) and returns when all are done.
    func perform(_ count: Int, threads requested: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let threads = Self.available(requested)
        guard count > 1, threads > 1 else {
            for part in 0..<count { body(part) }
            return
        }
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            // Busy: Dispatch's threads, still no more than `threads` at once.
            let lanes = min(threads, count)
            DispatchQueue.concurrentPerform(iterations: lanes) { lane in
                for part in stride(from: lane, to: count, by: lanes) { body(part) }
            }
            return
        }
        defer { busy.store(false, ordering: .releasing) }
        let helpers = min(threads, count) - 1
        hire(helpers)
        let job = Job(count: count, helpers: helpers, body: body)
        current.withLock { $0 = job }
        generation.wrappingAdd(1, ordering: .sequentiallyConsistent)
        if sleepers.load(ordering: .sequentiallyConsistent) > 0 {
            pthread_mutex_lock(mutex)
            pthread_cond_broadcast(wake)
            pthread_mutex_unlock(mutex)
        }
        job.work()
        // Parts a helper took are finished by it; wait for them, spinning first (they are short), then yielding.
        var spins = 0
        while job.done.load(ordering: .acquiring) < count {
            spins += 1
            if spins > 1 << 14 { sched_yield() }
        }
        current.withLock { $0 = nil }
    }

    /// Starts helpers until there are `count`.
    private func hire(_ count: Int) {
        let missing = helpers.withLock { hired -> Int in
            let missing = max(0, count - hired)
            hired += missing
            return missing
        }
        for _ in 0..<missing {
            let thread = Thread { [self] in serve() }
            thread.name = "modelc-helper"
            thread.start()
        }
    }

    /// A helper's life: wait for a job (spinning, then asleep), take its parts, repeat.
    private func serve() {
        var seen = generation.load(ordering: .sequentiallyConsistent)
        while true {
            var deadline: UInt64 = 0, checks = 0
            while generation.load(ordering: .acquiring) == seen {
                checks += 1
                guard checks & 63 == 0 else { continue }
                let now = DispatchTime.now().uptimeNanoseconds
                if deadline == 0 {
                    deadline = now + Self.spin
                } else if now >= deadline {
                    pthread_mutex_lock(mutex)
                    sleepers.wrappingAdd(1, ordering: .sequentiallyConsistent)
                    while generation.load(ordering: .sequentiallyConsistent) == seen { pthread_cond_wait(wake, mutex) }
                    sleepers.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                    pthread_mutex_unlock(mutex)
                }
            }
            seen = generation.load(ordering: .acquiring)
            if let job = current.withLock({ $0 }), job.join() { job.work() }
        }
    }
}

/// An operation's input and output buffers, shared by the threads running its
/// blocks (a layout change, a pooling, a standalone GELU): each thread writes
/// only its own part of `target`.
struct SourceAndTarget: @unchecked Sendable {
    let source: UnsafeMutablePointer<Float>
    let target: UnsafeMutablePointer<Float>
}
