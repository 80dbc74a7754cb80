import Foundation

/// Why a live sequence stopped being live.
public enum SequenceEnding: String, Sendable, CaseIterable {
    /// A request with `sequence_end` was answered.
    case sequenceEnd = "sequence_end"
    /// A request with `sequence_start` came for the id while it was live: the old state was dropped.
    case restarted
    /// Idle longer than `--sequence-idle-timeout` (counted as evicted).
    case idle
    /// A request gave up (deadline, client gone, drain) after its computation had begun on the
    /// state: the state moved on without its client knowing, so it is dropped.
    case interrupted
    /// A computation failed part-way: the state is unknown, so it is dropped.
    case failed
    /// The model was unloaded or left the repository.
    case unloaded
    /// The server stopped.
    case shutdown

    /// The end of "sequence 7 of model 'M' is not live: …".
    func reason(idleTimeoutSeconds: Double) -> String {
        switch self {
        case .sequenceEnd: "it ended (sequence_end)"
        case .restarted: "it was restarted"
        case .idle: "it was evicted after \(JSONValue.text(idleTimeoutSeconds)) s idle (--sequence-idle-timeout)"
        case .interrupted: "a request of it gave up while computing, so its state is unknown"
        case .failed: "a computation of it failed, so its state is unknown"
        case .unloaded: "its model was unloaded"
        case .shutdown: "the server is stopping"
        }
    }
}

/// The live sequences of Triton's sequence extension: one state per (model, sequence id), kept
/// between the sequence's requests, which are served one at a time in the order they arrived.
///
/// A request takes its sequence's **turn** (`acquire`): it waits while an earlier request of the
/// same sequence holds it, then gets the sequence's state (a new one with `sequence_start`), and
/// gives the turn back with `release` (answered) or `abandon` (failed, gave up). Between the two,
/// the computation reports `beginComputing` / `finishComputing`, so a request that gives up while
/// its state is being computed on ends the sequence instead of leaving a state its client cannot
/// know. Limits: at most `maxSequences` live, and each new state's bytes reserved through
/// `reserve` (the server's memory budget); a sequence idle longer than `idleTimeoutNanoseconds`
/// is evicted by `evictIdle`.
///
/// Generic over the state (a `ModelState` in the server; anything in tests). Thread-safe; a state's
/// `release` and the memory calls run outside the store's lock.
public final class SequenceStore<State: Sendable>: @unchecked Sendable {
    public struct Key: Hashable, Sendable {
        public let model: String
        public let id: SequenceID

        public init(model: String, id: SequenceID) {
            self.model = model
            self.id = id
        }
    }

    /// A new sequence's state, made by `acquire`'s `create`.
    public struct Created: Sendable {
        public let state: State
        /// Counted against the budget and in the metrics.
        public let bytes: Int
        /// Frees it (the server: gives the model's lease back).
        public let release: @Sendable () -> Void

        public init(state: State, bytes: Int, release: @escaping @Sendable () -> Void) {
            self.state = state
            self.bytes = bytes
            self.release = release
        }
    }

    /// One request's hold on its sequence, from `acquire` to `release` or `abandon`.
    public final class Turn: @unchecked Sendable {
        public let key: Key
        /// The sequence's state: this request's alone until the turn is given back.
        public let state: State
        /// Whether `acquire` made the state (`sequence_start`).
        public let started: Bool
        /// Under the store's lock.
        fileprivate var phase = Phase.held

        fileprivate init(key: Key, state: State, started: Bool) {
            self.key = key
            self.state = state
            self.started = started
        }
    }

    fileprivate enum Phase {
        /// The turn is held; the state is as the last request left it.
        case held
        case computing
        /// Computed on: the state moved on, the answer not sent yet.
        case computed
        /// Given up while computing: the computation's end gives the turn back.
        case abandonedWhileComputing(SequenceEnding)
        /// The turn is given back.
        case done
    }

    private struct Live {
        let created: Created
        var lastUse: UInt64
    }

    /// One sequence id's requests and state.
    private final class Slot {
        /// Tickets in arrival order; `serving` may take the turn.
        var nextTicket = 0
        var serving = 0
        var held = false
        /// Tickets whose request stopped waiting.
        var skipped: Set<Int> = []
        var live: Live?
        /// Set while held: the state goes when the turn is given back (unload, shutdown).
        var doomed: SequenceEnding?

        var isIdle: Bool { !held && nextTicket == serving }
    }

    /// Counts for one model (`/metrics`).
    public struct Counts: Sendable, Equatable {
        public var live = 0
        public var bytes = 0
        public var started = 0
        /// By why they ended; `.idle` are the evictions.
        public var ended: [SequenceEnding: Int] = [:]
    }

    public let maxSequences: Int
    public let idleTimeoutNanoseconds: UInt64
    private let clock: any SequenceClock
    private let reserve: @Sendable (Int) -> Bool
    private let unreserve: @Sendable (Int) -> Void
    private let condition = NSCondition()
    private var slots: [Key: Slot] = [:]
    private var liveCount = 0
    /// States being made now (counted against `maxSequences`).
    private var creating = 0
    private var counts: [String: Counts] = [:]
    /// Why recently ended sequences ended, for a later request's error (the last 4096).
    private var gone: [Key: SequenceEnding] = [:]
    private var goneOrder: [Key] = []
    private var stopping = false
    static var rememberedEndings: Int { 4096 }
    /// How often a request waiting for its turn looks at its deadline and client.
    static var pollNanoseconds: UInt64 { 20_000_000 }

    /// - Parameters:
    ///   - reserve: reserves a new state's bytes in the memory budget; false when they do not fit.
    ///   - unreserve: gives them back when the state goes.
    public init(maxSequences: Int, idleTimeoutNanoseconds: UInt64, clock: any SequenceClock = UptimeClock(),
                reserve: @escaping @Sendable (Int) -> Bool = { _ in true }, unreserve: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.maxSequences = max(1, maxSequences)
        self.idleTimeoutNanoseconds = idleTimeoutNanoseconds
        self.clock = clock
        self.reserve = reserve
        self.unreserve = unreserve
    }

    private var idleTimeoutSeconds: Double { Double(idleTimeoutNanoseconds) / 1e9 }

    /// Takes the sequence's turn, waiting (in arrival order) while another request of it holds
    /// the turn; makes its state with `create` when `start` is set (dropping a live one first, as
    /// Triton restarts a sequence whose id starts again).
    ///
    /// - Parameters:
    ///   - deadline: uptime nanoseconds after which a request still waiting gives up (`.timedOut`).
    ///   - clientGone: asked every 20 ms while waiting; true gives up (`.clientGone`).
    /// - Throws: `.unknownSequence` without `start` for an id that is not live (naming why),
    ///   `.tooManySequences` past `maxSequences`, `.sequenceMemory` when the state's bytes do not
    ///   fit the budget, `create`'s error, or `timedOut` / `clientGone` / `shuttingDown`.
    public func acquire(_ key: Key, start: Bool, deadline: UInt64, timeoutMilliseconds: Int,
                        clientGone: (@Sendable () -> Bool)? = nil,
                        create: () throws(RequestError) -> Created) throws(RequestError) -> Turn {
        var freed: [Created] = []
        defer { free(freed) }
        condition.lock()
        if stopping {
            condition.unlock()
            throw .shuttingDown
        }
        let slot = slots[key] ?? Slot()
        slots[key] = slot
        let ticket = slot.nextTicket
        slot.nextTicket += 1
        while slot.serving != ticket {
            let now = DispatchTime.now().uptimeNanoseconds
            var failure: RequestError?
            if stopping {
                failure = .shuttingDown
            } else if now >= deadline {
                failure = .timedOut(milliseconds: timeoutMilliseconds)
            } else if let clientGone, clientGone() {
                failure = .clientGone
            }
            if let failure {
                slot.skipped.insert(ticket)
                advance(slot, key)
                condition.unlock()
                throw failure
            }
            let wake = min(deadline, now + Self.pollNanoseconds)
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(wake - min(wake, now)) / 1e9))
        }
        slot.held = true
        if start, let live = slot.live {
            freed.append(drop(slot, key, live, .restarted))
        }
        if let live = slot.live {
            let turn = Turn(key: key, state: live.created.state, started: false)
            condition.unlock()
            return turn
        }
        guard start else {
            let why = gone[key].map { $0.reason(idleTimeoutSeconds: idleTimeoutSeconds) }
                ?? "it was never started (the first request of a sequence sets sequence_start)"
            giveBack(slot, key)
            condition.unlock()
            throw .unknownSequence(model: key.model, id: key.id.description, why: why)
        }
        if liveCount + creating >= maxSequences {
            freed += evictIdleLocked(now: clock.nanoseconds).map(\.1)
        }
        guard liveCount + creating < maxSequences else {
            giveBack(slot, key)
            condition.unlock()
            throw .tooManySequences(limit: maxSequences)
        }
        creating += 1
        condition.unlock()
        free(freed)
        freed = []
        let created: Created
        do {
            created = try create()
        } catch {
            condition.lock()
            creating -= 1
            giveBack(slot, key)
            condition.unlock()
            throw error
        }
        guard reserve(created.bytes) else {
            created.release()
            condition.lock()
            creating -= 1
            giveBack(slot, key)
            condition.unlock()
            throw .sequenceMemory(bytes: created.bytes)
        }
        condition.lock()
        creating -= 1
        slot.live = Live(created: created, lastUse: clock.nanoseconds)
        liveCount += 1
        counts[key.model, default: Counts()].live += 1
        counts[key.model, default: Counts()].bytes += created.bytes
        counts[key.model, default: Counts()].started += 1
        gone[key] = nil
        let turn = Turn(key: key, state: created.state, started: true)
        condition.unlock()
        return turn
    }

    /// Before computing on the turn's state: false when its request gave up meanwhile (then
    /// nothing may compute on it).
    public func beginComputing(_ turn: Turn) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard case .held = turn.phase else { return false }
        turn.phase = .computing
        return true
    }

    /// After computing: `touched` says whether the state may have moved on (false: the
    /// computation refused its inputs before running). When the request gave up meanwhile, the
    /// turn is given back here, and a touched sequence ended.
    public func finishComputing(_ turn: Turn, touched: Bool) {
        var freed: [Created] = []
        defer { free(freed) }
        condition.lock()
        defer { condition.unlock() }
        switch turn.phase {
        case .computing:
            turn.phase = touched ? .computed : .held
        case .abandonedWhileComputing(let ending):
            turn.phase = .done
            guard let slot = slots[turn.key] else { return }
            if touched, let live = slot.live { freed.append(drop(slot, turn.key, live, ending)) }
            freed += giveBackUsed(slot, turn.key)
        default:
            break
        }
    }

    /// The request was answered: the turn goes to the next request of the sequence, and with
    /// `end` the state is freed.
    public func release(_ turn: Turn, end: Bool) {
        var freed: [Created] = []
        defer { free(freed) }
        condition.lock()
        defer { condition.unlock() }
        guard let slot = slots[turn.key], !isDone(turn) else { return }
        turn.phase = .done
        if end, let live = slot.live { freed.append(drop(slot, turn.key, live, .sequenceEnd)) }
        freed += giveBackUsed(slot, turn.key)
    }

    /// The request failed with `error` after taking the turn. A state nothing computed on stays as
    /// it was (the sequence goes on, `sequence_end` not applied); one computed on (its answer lost)
    /// or part-computed is dropped; one being computed on is dropped when the computation ends.
    public func abandon(_ turn: Turn, because error: RequestError) {
        var freed: [Created] = []
        defer { free(freed) }
        let ending: SequenceEnding = switch error {
        case .timedOut, .clientGone, .shuttingDown: .interrupted
        default: .failed
        }
        condition.lock()
        defer { condition.unlock() }
        guard let slot = slots[turn.key] else { return }
        switch turn.phase {
        case .held:
            turn.phase = .done
            freed += giveBackUsed(slot, turn.key)
        case .computing:
            turn.phase = .abandonedWhileComputing(ending)
        case .computed:
            turn.phase = .done
            if let live = slot.live { freed.append(drop(slot, turn.key, live, ending)) }
            freed += giveBackUsed(slot, turn.key)
        case .abandonedWhileComputing, .done:
            break
        }
    }

    /// Evicts the sequences idle (no request holding or waiting for them) longer than the idle
    /// timeout, freeing their states. Returns their keys.
    @discardableResult
    public func evictIdle() -> [Key] {
        condition.lock()
        let evicted = evictIdleLocked(now: clock.nanoseconds)
        condition.unlock()
        free(evicted.map(\.1))
        return evicted.map(\.0)
    }

    /// Ends every sequence of `model` (every one when nil): now when no request holds it,
    /// otherwise when its turn is given back. With `.shutdown`, new requests are refused.
    public func endAll(model: String? = nil, _ ending: SequenceEnding) {
        var freed: [Created] = []
        condition.lock()
        if ending == .shutdown { stopping = true }
        for (key, slot) in slots where model == nil || key.model == model {
            if slot.held || !slot.isIdle {
                slot.doomed = ending
            } else if let live = slot.live {
                freed.append(drop(slot, key, live, ending))
                slots[key] = nil
            }
        }
        condition.broadcast()
        condition.unlock()
        free(freed)
    }

    /// Live sequences now.
    public var live: Int {
        condition.lock()
        defer { condition.unlock() }
        return liveCount
    }

    /// Each model's counts (models that had a sequence since the start).
    public var countsByModel: [String: Counts] {
        condition.lock()
        defer { condition.unlock() }
        return counts
    }

    // MARK: Under the lock

    private func isDone(_ turn: Turn) -> Bool {
        if case .done = turn.phase { return true }
        return false
    }

    /// Takes the live state out of `slot`, counting its end; the caller frees it outside the lock.
    private func drop(_ slot: Slot, _ key: Key, _ live: Live, _ ending: SequenceEnding) -> Created {
        slot.live = nil
        liveCount -= 1
        counts[key.model, default: Counts()].live -= 1
        counts[key.model, default: Counts()].bytes -= live.created.bytes
        counts[key.model, default: Counts()].ended[ending, default: 0] += 1
        if gone[key] == nil {
            goneOrder.append(key)
            if goneOrder.count > Self.rememberedEndings * 2 {
                goneOrder = goneOrder.filter { gone[$0] != nil }
            }
        }
        gone[key] = ending
        while gone.count > Self.rememberedEndings, !goneOrder.isEmpty {
            gone[goneOrder.removeFirst()] = nil
        }
        return live.created
    }

    /// Gives the turn back after a request used it: the state's idle time starts now, and a doomed
    /// state goes.
    private func giveBackUsed(_ slot: Slot, _ key: Key) -> [Created] {
        var freed: [Created] = []
        if let ending = slot.doomed, let live = slot.live {
            freed.append(drop(slot, key, live, ending))
        }
        slot.live?.lastUse = clock.nanoseconds
        giveBack(slot, key)
        return freed
    }

    /// The next waiting request may take the turn; a slot with nothing left goes.
    private func giveBack(_ slot: Slot, _ key: Key) {
        slot.held = false
        slot.serving += 1
        advance(slot, key)
    }

    /// Skips the tickets of requests that stopped waiting; drops the slot when nobody holds or
    /// waits for it and it has no state.
    private func advance(_ slot: Slot, _ key: Key) {
        if !slot.held {
            while slot.skipped.remove(slot.serving) != nil { slot.serving += 1 }
        }
        if slot.isIdle {
            slot.doomed = nil
            if slot.live == nil, slots[key] === slot { slots[key] = nil }
        }
        condition.broadcast()
    }

    private func evictIdleLocked(now: UInt64) -> [(Key, Created)] {
        var evicted: [(Key, Created)] = []
        for (key, slot) in slots where slot.isIdle {
            guard let live = slot.live, now >= live.lastUse, now - live.lastUse > idleTimeoutNanoseconds else { continue }
            evicted.append((key, drop(slot, key, live, .idle)))
            slots[key] = nil
        }
        return evicted
    }

    private func free(_ created: [Created]) {
        for state in created {
            state.release()
            unreserve(state.bytes)
        }
    }
}
