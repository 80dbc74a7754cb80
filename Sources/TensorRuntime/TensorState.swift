import Foundation
import ModelFeatures
import SystemIO

extension TensorState {
    static let profiling: Bool = {
        guard ProcessInfo.processInfo.environment["MODELC_PROFILE"] != nil else { return false }
        atexit { TensorState.dumpProfile() }
        return true
    }()
    /// `MODELC_PROFILE=steps`: every step's wall-clock and process CPU time, in plan order.
    static let profilingSteps = ProcessInfo.processInfo.environment["MODELC_PROFILE"] == "steps"
    static let totals = Locked<[String: UInt64]>([:])
    static let stepTotals = Locked<[String: (order: Int, wall: UInt64, cpu: UInt64, runs: Int)]>([:])
    static func record(_ kind: String, _ nanoseconds: UInt64) { totals.withLock { $0[kind, default: 0] += nanoseconds } }
    /// Plans made, and the CPU time of the threads that made them (`MODELC_PROFILE`).
    static let planTimes = Locked<[(nanoseconds: UInt64, reused: Int)]>([])
    /// The types of the operations the last plan made with a last plan to take from planned anew.
    static let lastPlannedAnew = Locked<[String]>([])
    /// A plan made in `nanoseconds` of its thread's CPU, `reused` of its operations taken from the last (`PlanMemo`),
    /// those of types `anew` planned again.
    static func recordPlan(_ nanoseconds: UInt64, reused: Int, anew: [String]) {
        planTimes.withLock { $0.append((nanoseconds, reused)) }
        if !anew.isEmpty { lastPlannedAnew.withLock { $0 = anew } }
    }
    static func dumpProfile() {
        let made = planTimes.withLock { $0 }
        if !made.isEmpty {
            // The median as well as the mean: a shared machine's plans vary, and the prompt's plan is one of them.
            let plans = made.map(\.nanoseconds).sorted(), total = plans.reduce(0, +)
            print(String(format: "plans %d cpu_ms %.1f per_plan_ms %.3f median_plan_ms %.3f reused_operations %d", plans.count, Double(total) / 1e6,
                         Double(total) / Double(plans.count) / 1e6, Double(plans[plans.count / 2]) / 1e6, made.map(\.reused).reduce(0, +)))
        }
        // What a decoder's step plans anew (what follows the mask's length), by type.
        let anew = lastPlannedAnew.withLock { $0 }
        if !anew.isEmpty {
            let counts = Dictionary(anew.map { ($0, 1) }, uniquingKeysWith: +).sorted { ($1.value, $0.key) < ($0.value, $1.key) }
            print("planned_anew", anew.count, counts.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        for (kind, total) in totals.withLock({ $0 }).sorted(by: { $0.value > $1.value }) { print(kind, Double(total) / 1e6) }
        for (step, total) in stepTotals.withLock({ $0 }).sorted(by: { $0.value.order < $1.value.order }) {
            let runs = Double(max(total.runs, 1))
            print(String(format: "step %@ wall_us %.1f cpu_us %.1f", step, Double(total.wall) / runs / 1e3, Double(total.cpu) / runs / 1e3))
        }
    }

    /// CPU time of the calling thread, in nanoseconds.
    static func threadNanoseconds() -> UInt64 { nanoseconds(of: CLOCK_THREAD_CPUTIME_ID) }

    /// CPU time of every thread of the process, in nanoseconds.
    static func processorNanoseconds() -> UInt64 { nanoseconds(of: CLOCK_PROCESS_CPUTIME_ID) }

    private static func nanoseconds(of clock: clockid_t) -> UInt64 {
        var time = timespec()
        clock_gettime(clock, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// Arenas of states whose plans were dropped, for the states of plans made
/// after them: a decoder plans every step anew (its mask grows by a
/// position), and a fresh arena each step faulted in and zeroed new pages, a
/// tenth of a step. Each arena is allocated an eighth larger than asked, so
/// that the next step's, a little larger, fits. Keeps at most `limit`.
final class ArenaPool: Sendable {
    struct Arena: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        let bytes: Int
    }

    private let kept = Locked<[Arena]>([])
    let limit: Int

    init(limit: Int = 2) { self.limit = limit }

    /// Bytes of the arenas kept for later states.
    var keptBytes: Int { kept.withLock { $0.reduce(0) { $0 + $1.bytes } } }

    /// An arena of at least `bytes`: the largest kept one that fits, or a new one with room to grow.
    ///
    /// Of a kept arena, the pages past the first `used` bytes are released
    /// (read again, they are zero): what a larger plan wrote there, a prompt's
    /// activations under a decoder step's few, is not held while the new state
    /// reads only its first bytes. `nil`: all of it is kept as it is. The
    /// largest is taken so that a large arena does not wait in the pool with
    /// its pages resident while smaller ones serve.
    func take(atLeast bytes: Int, using used: Int? = nil) -> Arena {
        if let arena = kept.withLock({ kept -> Arena? in
            guard let index = kept.indices.filter({ kept[$0].bytes >= bytes }).max(by: { kept[$0].bytes < kept[$1].bytes }) else { return nil }
            return kept.remove(at: index)
        }) {
            if let used { Self.releasePages(of: arena, after: used) }
            return arena
        }
        let size = (bytes + bytes / 8 + 63) / 64 * 64
        return Arena(pointer: .allocate(byteCount: size, alignment: 64), bytes: size)
    }

    /// Drops the whole pages of `arena` past its first `used` bytes from the
    /// process (`MADV_DONTNEED`: private anonymous pages read as zero again).
    static func releasePages(of arena: Arena, after used: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: arena.pointer) + max(used, 0) + page - 1) / page * page
        let end = (Int(bitPattern: arena.pointer) + arena.bytes) / page * page
        guard end > start, let address = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = Syscalls.current.madvise(address, end - start, MADV_DONTNEED)
    }

    /// Keeps `arena` for a later state, or frees it (the smallest goes when more than `limit` are kept).
    func give(_ arena: Arena) {
        let dropped = kept.withLock { kept -> Arena? in
            kept.append(arena)
            guard kept.count > limit, let smallest = kept.indices.min(by: { kept[$0].bytes < kept[$1].bytes }) else { return nil }
            return kept.remove(at: smallest)
        }
        dropped?.pointer.deallocate()
    }

    deinit {
        for arena in kept.withLock({ $0 }) { arena.pointer.deallocate() }
    }
}

/// One prediction's memory for a plan: the arena every computed value lives
/// in, and the table of every value's address that kernels read. Taken from
/// a pool, so a steady stream of predictions allocates no arena.
final class TensorState {
    let plan: TensorPlan
    private let arena: UnsafeMutableRawPointer
    /// Where the arena came from and goes back to (nil: allocated for this state alone).
    private let pool: ArenaPool?
    private let arenaBytes: Int
    let table: UnsafeMutablePointer<UnsafeMutableRawPointer>
    /// The steps' kernels in order, read by `run` (a step copied per run
    /// retained and released its strings and id lists: a tenth of a small
    /// network's time).
    private let kernels: ContiguousArray<Kernel>

    init(plan: TensorPlan, pool: ArenaPool? = nil) {
        self.plan = plan
        self.pool = pool
        kernels = ContiguousArray(plan.steps.map(\.kernel))
        if let pool {
            // The state slots at the arena's end stay untouched unless a state is copied in.
            let taken = pool.take(atLeast: plan.arenaBytes, using: plan.zeroedBytes)
            (arena, arenaBytes) = (taken.pointer, taken.bytes)
        } else {
            (arena, arenaBytes) = (.allocate(byteCount: plan.arenaBytes, alignment: 64), plan.arenaBytes)
        }
        arena.initializeMemory(as: UInt8.self, repeating: 0, count: min(plan.zeroedBytes, plan.arenaBytes))
        table = .allocate(capacity: max(plan.values.count, 1))
        table.initialize(repeating: plan.memory.empty, count: max(plan.values.count, 1))
        for id in plan.values.indices {
            if let offset = plan.offsets[id] {
                table[id] = arena + offset
            } else if let constant = plan.constantAddresses[id] {
                table[id] = constant.pointer
            }
        }
    }

    /// Whether the first run has zeroed the state slots (at the arena's end) that nothing else prepared.
    private var stateSlotsReady = false
    /// The states whose slots were zeroed (and then filled) before the first run.
    private var preparedStates: Set<Int> = []

    /// Zeroes, before the first run, the slots of the states neither bound elsewhere nor
    /// prepared (a plan run without an engine); bound states' pages stay untouched.
    private func zeroUnboundStateSlots() {
        for id in plan.states.values where !preparedStates.contains(id) && table[id] == plan.offsets[id].map({ arena + $0 }) {
            zeroSlot(id)
        }
        stateSlotsReady = true
    }

    private func zeroSlot(_ id: Int) {
        guard let offset = plan.offsets[id] else { return }
        (arena + offset).initializeMemory(as: UInt8.self, repeating: 0, count: plan.values[id].bytes)
    }

    /// Points state `id` (and its views) at its zeroed slot in the arena, for a state the engine copies in
    /// rather than binds; the first run leaves it as it is then.
    func useOwnSlot(forState id: Int, views: [Int]) {
        rebind(id)
        for view in views { rebind(view) }
        zeroSlot(id)
        preparedStates.insert(id)
    }

    /// Points value `id` back at its own bytes (the arena, or its constant).
    func rebind(_ id: Int) {
        if let offset = plan.offsets[id] {
            table[id] = arena + offset
        } else if let constant = plan.constantAddresses[id] {
            table[id] = constant.pointer
        }
    }

    deinit {
        if let pool { pool.give(ArenaPool.Arena(pointer: arena, bytes: arenaBytes)) } else { arena.deallocate() }
        table.deallocate()
    }

    var buffers: Buffers { Buffers(base: table) }

    /// Runs every step in order.
    func run(cancellation: PredictionCancellation? = nil) throws(RuntimeError) {
        if !stateSlotsReady { zeroUnboundStateSlots() }
        let buffers = self.buffers
        if TensorState.profiling {
            for (index, step) in plan.steps.enumerated() {
                try cancellation?.check()
                let start = DispatchTime.now().uptimeNanoseconds, cpu = TensorState.processorNanoseconds()
                try step.kernel(buffers)
                let wall = DispatchTime.now().uptimeNanoseconds - start
                TensorState.record(step.kind, wall)
                if TensorState.profilingSteps {
                    let used = TensorState.processorNanoseconds() - cpu
                    let shape = step.outputs.first.map { plan.values[$0].shape.map(String.init).joined(separator: "x") } ?? ""
                    TensorState.stepTotals.withLock {
                        let key = "\(step.kind) \(step.operation) \(shape)" + (step.split.map { " (\($0))" } ?? "")
                        let old = $0[key] ?? (index, 0, 0, 0)
                        $0[key] = (old.order, old.wall + wall, old.cpu + used, old.runs + 1)
                    }
                }
            }
            return
        }
        try kernels.withUnsafeBufferPointer { kernels throws(RuntimeError) in
            guard let cancellation else {
                for kernel in kernels { try kernel(buffers) }
                return
            }
            // Between operations: one relaxed atomic load each.
            for kernel in kernels {
                try cancellation.check()
                try kernel(buffers)
            }
        }
    }

    var bytes: Int { plan.arenaBytes + plan.values.count * 8 }

    /// Value `id` as computed by the last run (or a constant's value).
    func tensor(_ id: Int) -> Tensor {
        let value = plan.values[id]
        if let constant = value.constant { return constant }
        let pointer = table[id]
        if value.isNarrow {
            var floats = [Float](repeating: 0, count: value.count)
            floats.withUnsafeMutableBytes { if let base = $0.baseAddress { ElementConversion.widen(pointer, storage: value.storage, count: value.count, into: base) } }
            return Tensor(floats: floats, shape: value.shape, type: value.type)
        }
        return value.type.isFloat
            ? Tensor(floats: Array(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: Float.self), count: value.count)), shape: value.shape, type: value.type)
            : Tensor(ints: Array(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: Int32.self), count: value.count)), shape: value.shape, type: value.type)
    }

    /// Writes `tensor`'s elements as value `id` (its type: floats or 4-byte integers).
    func write(_ tensor: Tensor, to id: Int) {
        let value = plan.values[id]
        let converted = tensor.converted(to: value.type)
        let count = min(value.count, converted.count)
        switch converted.storage {
        case .floats(let floats): for index in 0..<count { buffers.floats(id)[index] = floats[index] }
        case .ints(let ints): for index in 0..<count { buffers.ints(id)[index] = ints[index] }
        case .mapped(let values): for (index, value) in values.floats.prefix(count).enumerated() { buffers.floats(id)[index] = value }
        case .packed where value.type.isFloat: for (index, value) in converted.floats.prefix(count).enumerated() { buffers.floats(id)[index] = value }
        case .packed: for (index, value) in converted.ints.prefix(count).enumerated() { buffers.ints(id)[index] = Int32(truncatingIfNeeded: value) }
        case .strings: break
        }
    }
}

/// A state handed between threads through a pool's lock: one prediction uses it at a time.
final class TensorStateBox: @unchecked Sendable {
    let state: TensorState
    init(_ state: TensorState) { self.state = state }
}
