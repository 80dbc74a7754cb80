import Dispatch
import Foundation
import SystemIO
import Testing
@testable import ModelServing

/// The live sequences: turns in order, limits, restart, end, idle eviction on a manual clock.
@Suite struct SequenceStoreTests {
    /// A state of a test: a counter, and which sequence made it.
    final class Counter: @unchecked Sendable {
        let owner: String
        var value = 0
        init(owner: String) { self.owner = owner }
    }

    typealias Store = SequenceStore<Counter>

    /// A store whose states take `bytes` each out of a budget of `budget` bytes; `freed` counts the states freed.
    static func store(max: Int = 8, idle: Double = 60, clock: ManualClock = ManualClock(), budget: Int = .max,
                      freed: Locked<Int> = Locked(0)) -> Store {
        let reserved = Locked(0)
        return Store(maxSequences: max, idleTimeoutNanoseconds: UInt64(idle * 1e9), clock: clock,
                     reserve: { bytes in
                         reserved.withLock { total in
                             guard total + bytes <= budget else { return false }
                             total += bytes
                             return true
                         }
                     }, unreserve: { bytes in
                         reserved.withLock { $0 -= bytes }
                         freed.withLock { $0 += 1 }
                     })
    }

    /// A minute from now (computed at each use: a suite run in parallel with others may start its tests minutes apart).
    static var far: UInt64 { DispatchTime.now().uptimeNanoseconds + 60_000_000_000 }

    static func key(_ id: UInt64, model: String = "m") -> Store.Key { .init(model: model, id: .number(id)) }

    /// One request: takes the turn, adds `add` to the counter, releases (ending with `end`); the counter after it.
    @discardableResult
    static func step(_ store: Store, _ key: Store.Key, start: Bool = false, end: Bool = false, add: Int = 1,
                     bytes: Int = 100) throws(RequestError) -> Int {
        let turn = try store.acquire(key, start: start, deadline: far, timeoutMilliseconds: 1000) { () throws(RequestError) in
            .init(state: Counter(owner: key.id.description), bytes: bytes, release: {})
        }
        #expect(store.beginComputing(turn))
        #expect(turn.state.owner == key.id.description, "a sequence is only ever given its own state")
        turn.state.value += add
        let value = turn.state.value
        store.finishComputing(turn, touched: true)
        store.release(turn, end: end)
        return value
    }

    @Test func aSequenceAccumulatesAndTwoInterleavedNeverMix() throws {
        let store = Self.store()
        #expect(try Self.step(store, Self.key(1), start: true) == 1)
        #expect(try Self.step(store, Self.key(2), start: true, add: 10) == 10)
        #expect(try Self.step(store, Self.key(1)) == 2)
        #expect(try Self.step(store, Self.key(2), add: 10) == 20)
        #expect(try Self.step(store, Self.key(1)) == 3)
        // The same id of another model is another sequence.
        #expect(throws: RequestError.self) { try Self.step(store, Self.key(1, model: "other")) }
        #expect(store.live == 2)
        #expect(store.countsByModel["m"]?.started == 2 && store.countsByModel["m"]?.bytes == 200)
    }

    @Test func endFreesTheStateAndALaterRequestNamesTheId() throws {
        let freed = Locked(0)
        let store = Self.store(freed: freed)
        try Self.step(store, Self.key(7), start: true)
        try Self.step(store, Self.key(7), end: true)
        #expect(store.live == 0 && freed.withLock { $0 } == 1)
        #expect(store.countsByModel["m"]?.ended[.sequenceEnd] == 1 && store.countsByModel["m"]?.bytes == 0)
        #expect(throws: RequestError.unknownSequence(model: "m", id: "7", why: "it ended (sequence_end)")) { try Self.step(store, Self.key(7)) }
        #expect(throws: RequestError.unknownSequence(model: "m", id: "8",
                                                     why: "it was never started (the first request of a sequence sets sequence_start)")) {
            try Self.step(store, Self.key(8))
        }
        // A start and an end in one request: a sequence of one request.
        #expect(try Self.step(store, Self.key(9), start: true, end: true) == 1)
        #expect(store.live == 0)
    }

    @Test func startOnALiveIdRestartsIt() throws {
        let store = Self.store()
        try Self.step(store, Self.key(3), start: true)
        try Self.step(store, Self.key(3))
        #expect(try Self.step(store, Self.key(3), start: true) == 1, "a new state, from zero")
        #expect(store.live == 1 && store.countsByModel["m"]?.ended[.restarted] == 1 && store.countsByModel["m"]?.started == 2)
    }

    @Test(arguments: [1, 2, 5])
    func idleSequencesAreEvictedOnTheClock(sequences: Int) throws {
        let clock = ManualClock()
        let freed = Locked(0)
        let store = Self.store(idle: 10, clock: clock, freed: freed)
        for id in 0..<sequences { try Self.step(store, Self.key(UInt64(id)), start: true) }
        clock.advance(seconds: 9)
        try Self.step(store, Self.key(0))  // used again: its idle time starts over
        clock.advance(seconds: 2)
        let evicted = store.evictIdle()
        #expect(Set(evicted) == Set((1..<sequences).map { Self.key(UInt64($0)) }))
        #expect(store.live == 1 && freed.withLock { $0 } == sequences - 1)
        if sequences > 1 {
            #expect(throws: RequestError.unknownSequence(model: "m", id: "1", why: "it was evicted after 10 s idle (--sequence-idle-timeout)")) {
                try Self.step(store, Self.key(1))
            }
        }
        clock.advance(seconds: 11)
        #expect(store.evictIdle() == [Self.key(0)])
        #expect(store.countsByModel["m"]?.ended[.idle] == sequences)
    }

    @Test(arguments: [1, 3])
    func theSequenceLimitRefusesANewOneUntilOneEndsOrIsEvicted(limit: Int) throws {
        let clock = ManualClock()
        let store = Self.store(max: limit, idle: 5, clock: clock)
        for id in 0..<limit { try Self.step(store, Self.key(UInt64(id)), start: true) }
        #expect(throws: RequestError.tooManySequences(limit: limit)) { try Self.step(store, Self.key(100), start: true) }
        // Going on with a live one, or restarting it, is not a new sequence.
        try Self.step(store, Self.key(0))
        try Self.step(store, Self.key(0), start: true)
        try Self.step(store, Self.key(0), end: true)
        try Self.step(store, Self.key(100), start: true)
        #expect(throws: RequestError.tooManySequences(limit: limit)) { try Self.step(store, Self.key(101), start: true) }
        clock.advance(seconds: 6)
        try Self.step(store, Self.key(101), start: true)  // the idle ones made room
        #expect(store.live <= limit)
    }

    @Test func aStateOverTheBudgetIsRefusedAndFreed() throws {
        let freed = Locked(0)
        let store = Self.store(budget: 250, freed: freed)
        try Self.step(store, Self.key(1), start: true, bytes: 100)
        try Self.step(store, Self.key(2), start: true, bytes: 100)
        #expect(throws: RequestError.sequenceMemory(bytes: 100)) { try Self.step(store, Self.key(3), start: true, bytes: 100) }
        #expect(store.live == 2)
        try Self.step(store, Self.key(1), end: true)
        try Self.step(store, Self.key(3), start: true, bytes: 100)
        #expect(store.live == 2)
    }

    /// Concurrent requests of one sequence run one at a time, each seeing the one before; none is lost.
    @Test(.timeLimit(.minutes(1)), arguments: [2, 8, 32])
    func concurrentRequestsOfOneSequenceTakeTurns(requests: Int) async throws {
        let store = Self.store()
        try Self.step(store, Self.key(1), start: true, add: 0)
        let inside = Locked(0)
        let most = Locked(0)
        let values = await withCheckedContinuation { (continuation: CheckedContinuation<[Int], Never>) in
            let group = DispatchGroup()
            let seen = Locked<[Int]>([])
            for _ in 0..<requests {
                group.enter()
                Thread {
                    defer { group.leave() }
                    guard let turn = try? store.acquire(Self.key(1), start: false, deadline: Self.far, timeoutMilliseconds: 1000,
                                                        create: { () throws(RequestError) in throw .badRequest("not here") }) else { return }
                    inside.withLock { count in
                        count += 1
                        most.withLock { $0 = max($0, count) }
                    }
                    _ = store.beginComputing(turn)
                    let before = turn.state.value
                    Thread.sleep(forTimeInterval: 0.002)
                    turn.state.value = before + 1
                    seen.withLock { $0.append(turn.state.value) }
                    inside.withLock { $0 -= 1 }
                    store.finishComputing(turn, touched: true)
                    store.release(turn, end: false)
                }.start()
            }
            group.notify(queue: .global()) { continuation.resume(returning: seen.withLock { $0 }) }
        }
        #expect(most.withLock { $0 } == 1, "never two requests of a sequence at once")
        #expect(values.sorted() == Array(1...requests), "each saw the one before it")
        #expect(try Self.step(store, Self.key(1)) == requests + 1)
    }

    @Test(.timeLimit(.minutes(1))) func aRequestWaitingForItsTurnGivesUpAtItsDeadlineOrWhenItsClientLeaves() async throws {
        let store = Self.store()
        try Self.step(store, Self.key(1), start: true)
        let holder = try store.acquire(Self.key(1), start: false, deadline: Self.far, timeoutMilliseconds: 1000) { () throws(RequestError) in
            throw .badRequest("not here")
        }
        let soon = DispatchTime.now().uptimeNanoseconds + 100_000_000
        let outcomes: [RequestError?] = await withCheckedContinuation { continuation in
            Thread {
                var errors: [RequestError?] = []
                let gone: @Sendable () -> Bool = { true }
                for (deadline, clientGone) in [(soon, nil), (Self.far, gone)] as [(UInt64, (@Sendable () -> Bool)?)] {
                    do throws(RequestError) {
                        _ = try store.acquire(Self.key(1), start: false, deadline: deadline, timeoutMilliseconds: 100, clientGone: clientGone) {
                            () throws(RequestError) in throw .badRequest("not here")
                        }
                        errors.append(nil)
                    } catch {
                        errors.append(error)
                    }
                }
                continuation.resume(returning: errors)
            }.start()
        }
        #expect(outcomes == [.timedOut(milliseconds: 100), .clientGone])
        store.release(holder, end: false)
        #expect(try Self.step(store, Self.key(1)) == 2, "the requests that gave up left the turn order intact")
    }

    @Test func aRequestGivenUpBeforeComputingLeavesTheStateAndOneGivenUpAfterEndsIt() throws {
        let store = Self.store()
        try Self.step(store, Self.key(1), start: true)
        let make: () throws(RequestError) -> Store.Created = { () throws(RequestError) in throw .badRequest("not here") }
        // Given up while queued: nothing may compute on it afterwards, and the state is kept.
        let queued = try store.acquire(Self.key(1), start: false, deadline: Self.far, timeoutMilliseconds: 1000, create: make)
        store.abandon(queued, because: .timedOut(milliseconds: 5))
        #expect(!store.beginComputing(queued))
        #expect(try Self.step(store, Self.key(1)) == 2)
        // Inputs refused before anything ran: the sequence goes on.
        let refused = try store.acquire(Self.key(1), start: false, deadline: Self.far, timeoutMilliseconds: 1000, create: make)
        #expect(store.beginComputing(refused))
        store.finishComputing(refused, touched: false)
        store.abandon(refused, because: .badRequest("wrong shape"))
        #expect(try Self.step(store, Self.key(1)) == 3)
        // Given up while computing: the turn comes back when the computation ends, and the sequence ends.
        let computing = try store.acquire(Self.key(1), start: false, deadline: Self.far, timeoutMilliseconds: 1000, create: make)
        #expect(store.beginComputing(computing))
        store.abandon(computing, because: .clientGone)
        #expect(store.live == 1)
        store.finishComputing(computing, touched: true)
        #expect(store.live == 0 && store.countsByModel["m"]?.ended[.interrupted] == 1)
        #expect(throws: RequestError.unknownSequence(model: "m", id: "1",
                                                     why: "a request of it gave up while computing, so its state is unknown")) {
            try Self.step(store, Self.key(1))
        }
        // A computation that failed part-way: ended as failed.
        try Self.step(store, Self.key(2), start: true)
        let failing = try store.acquire(Self.key(2), start: false, deadline: Self.far, timeoutMilliseconds: 1000, create: make)
        #expect(store.beginComputing(failing))
        store.finishComputing(failing, touched: true)
        store.abandon(failing, because: .inferenceFailed(model: "m", reason: "boom"))
        #expect(store.countsByModel["m"]?.ended[.failed] == 1 && store.live == 0)
    }

    @Test func endAllFreesIdleStatesNowAndHeldOnesWhenReleasedThenRefusesAtShutdown() throws {
        let freed = Locked(0)
        let store = Self.store(freed: freed)
        try Self.step(store, Self.key(1), start: true)
        try Self.step(store, Self.key(2), start: true)
        try Self.step(store, Self.key(3, model: "other"), start: true)
        let held = try store.acquire(Self.key(2), start: false, deadline: Self.far, timeoutMilliseconds: 1000) { () throws(RequestError) in
            throw .badRequest("not here")
        }
        store.endAll(model: "m", .unloaded)
        #expect(freed.withLock { $0 } == 1 && store.live == 2)
        store.release(held, end: false)
        #expect(freed.withLock { $0 } == 2 && store.live == 1)
        store.endAll(.shutdown)
        #expect(store.live == 0 && freed.withLock { $0 } == 3)
        #expect(throws: RequestError.shuttingDown) { try Self.step(store, Self.key(4), start: true) }
    }

    @Test func aStringIdIsAnotherSequenceThanTheNumber() throws {
        let store = Self.store()
        let text = Store.Key(model: "m", id: .string("5"))
        try Self.step(store, Self.key(5), start: true, add: 1)
        #expect(try Self.step(store, text, start: true, add: 100) == 100)
        #expect(try Self.step(store, Self.key(5)) == 2)
    }
}
