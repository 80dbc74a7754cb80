import SystemIO
import ModelSpec
import ModelFeatures

/// The addresses of a plan's values for one run: constants in the plan's
/// memory, the rest in a state's arena. What a kernel reads and writes.
struct Buffers {
    let base: UnsafeMutablePointer<UnsafeMutableRawPointer>

    func raw(_ id: Int) -> UnsafeMutableRawPointer { base[id] }
    func floats(_ id: Int) -> UnsafeMutablePointer<Float> { base[id].assumingMemoryBound(to: Float.self) }
    func ints(_ id: Int) -> UnsafeMutablePointer<Int32> { base[id].assumingMemoryBound(to: Int32.self) }
}

/// Computes one operation's outputs from its inputs, by value id.
typealias Kernel = @Sendable (Buffers) throws(RuntimeError) -> Void

/// One step of a plan: the kernel and the values it reads and writes.
/// Immutable, and shared by reference: a decoder's every step plan takes
/// most of its steps from the last one (`PlanMemo`), one reference each.
final class PlanStep: Sendable {
    let operation: String
    let kind: String
    let reads: [Int]
    /// Every value the step writes: its outputs, and for control flow the
    /// values its nested blocks compute (alive for the step only).
    let writes: [Int]
    let kernel: Kernel
    /// The operation's outputs (a subset of `writes`).
    let outputs: [Int]
    /// How the kernel divides its work where that was chosen at plan time
    /// (`"2 column blocks"`), for step profiles and tests.
    let split: String?
    /// Whether the step only copies elements, so that it is left out of the
    /// plan when nothing reads what it writes (`MatrixStack`).
    let unreadRemovable: Bool

    init(operation: String, kind: String, reads: [Int], writes: [Int], outputs: [Int]? = nil, split: String? = nil,
         unreadRemovable: Bool = false, kernel: @escaping Kernel) {
        self.operation = operation
        self.kind = kind
        self.reads = reads
        self.writes = writes
        self.outputs = outputs ?? writes
        self.split = split
        self.unreadRemovable = unreadRemovable
        self.kernel = kernel
    }
}

/// What the plan knows of a value: its type and shape, how its elements
/// lie, and where it lives.
struct PlanValue: Sendable {
    let id: Int
    let type: ElementType
    let shape: [Int]
    /// The value when known at plan time (a constant or a folded result).
    let constant: Tensor?
    /// How its elements lie at run time (a constant: as computed).
    let storage: ElementStorage

    init(id: Int, type: ElementType, shape: [Int], constant: Tensor?, storage: ElementStorage? = nil) {
        self.id = id
        self.type = type
        self.shape = shape
        self.constant = constant
        self.storage = storage ?? type.computedStorage
    }

    var count: Int { shape.reduce(1, *) }
    var rank: Int { shape.count }
    var isFloat: Bool { type.isFloat }
    /// Bytes its elements take at run time.
    var bytes: Int { storage.bytes(count) }
    /// Whether its elements lie otherwise than operations compute them (an fp16 state's two bytes).
    var isNarrow: Bool { storage != type.computedStorage }
}

/// Memory the plan owns: constants, in 4-byte elements (float32 weights of
/// the weight file are not copied: their mapped bytes are read in place).
/// Immutable once the plan is made.
final class ConstantMemory: @unchecked Sendable {
    private var blocks: [UnsafeMutableRawPointer] = []
    /// Mapped weights kernels read in place: kept mapped while the plan lives.
    private var mapped: [MappedValues] = []
    /// Small packed constants whose kept floats kernels read in place (`PackedWeights.keptFloats`).
    private var packed: [PackedWeights] = []
    /// Where a value with no bytes (a string, an empty tensor) points.
    let empty: UnsafeMutableRawPointer = .allocate(byteCount: 64, alignment: 64)
    private(set) var bytes = 0

    func store(_ tensor: Tensor) -> UnsafeMutableRawPointer {
        let count = tensor.count
        guard count > 0, tensor.type != .string else { return empty }
        // Float32 weights are read where the file is mapped (read-only: kernels never write constants).
        if case .mapped(let values) = tensor.storage, let direct = values.direct?.baseAddress {
            mapped.append(values)
            return UnsafeMutableRawPointer(mutating: direct)
        }
        // A small packed float constant is read where its floats are kept (a rotary table, read at every step's plan).
        if case .packed(let values) = tensor.storage, tensor.type.isFloat, let kept = values.keptFloats()?.baseAddress {
            packed.append(values)
            return UnsafeMutableRawPointer(mutating: kept)
        }
        let pointer = UnsafeMutableRawPointer.allocate(byteCount: count * 4, alignment: 64)
        switch tensor.storage {
        case .floats(let values): values.withUnsafeBytes { if let base = $0.baseAddress { pointer.copyMemory(from: base, byteCount: count * 4) } }
        case .ints(let values): values.withUnsafeBytes { if let base = $0.baseAddress { pointer.copyMemory(from: base, byteCount: count * 4) } }
        case .mapped(let values): values.copy(to: pointer.assumingMemoryBound(to: Float.self))
        case .packed(let values) where tensor.type.isFloat: values.decodeRows(0, count: values.rows, into: pointer.assumingMemoryBound(to: Float.self))
        case .packed: tensor.ints.map(Int32.init).withUnsafeBytes { if let base = $0.baseAddress { pointer.copyMemory(from: base, byteCount: count * 4) } }
        case .strings: break
        }
        blocks.append(pointer)
        bytes += count * 4
        return pointer
    }

    deinit {
        for block in blocks { block.deallocate() }
        empty.deallocate()
    }
}

/// A function of a program planned for concrete input shapes: every value's
/// type and shape, constants folded, the steps in order, and where each
/// value lives in the arena (values whose lives do not overlap share bytes).
/// Immutable and shared by every prediction with these input shapes.
struct TensorPlan: Sendable {
    /// Every value: type, shape.
    let values: [PlanValue]
    let steps: [PlanStep]
    /// For each value: its byte offset in the arena, or `nil` for a constant (see `constantAddresses`).
    let offsets: [Int?]
    let constantAddresses: [Int: UnsafeMutableRawPointerBox]
    let arenaBytes: Int
    /// The arena's bytes zeroed when a state is made: all but the states' slots at its end.
    let zeroedBytes: Int
    let memory: ConstantMemory
    /// The function's inputs and outputs by name.
    let inputs: [String: Int]
    let outputs: [String: Int]
    /// A `classify` ending the program: the probabilities' value and the labels.
    let classification: Classification?
    /// State inputs by name: written before the run, read back after it.
    let states: [String: Int]
    /// For each state: the values that are its bytes (`read_state_view`s), pointed at
    /// the state's storage with it when the engine binds the state in place.
    var stateViews: [String: [Int]] = [:]
    /// Views that start inside their root's bytes (slices read in place): how many bytes in.
    var viewOffsets: [Int: Int] = [:]
    /// What follows when planning stopped at an operation whose outputs'
    /// shapes depend on values computed at run time; `nil` for a whole plan.
    /// `outputs` then names the values the continuation reads.
    var continuation: PlanContinuation?
    /// How many operations were taken as the function's last plan planned them (`PlanMemo`).
    var reusedOperations = 0
    /// The types of the top-level operations planned anew where a last plan was there to take them from, in
    /// order: a decoder's step, what follows the mask's length (`MODELC_PROFILE` prints them).
    var plannedAnew: [String] = []

    struct Classification: Sendable {
        var probabilities: Int
        var labels: ClassLabels
        var labelOutput: String
        var probabilitiesOutput: String
    }
}

/// A raw pointer into memory a plan owns, immutable after planning.
struct UnsafeMutableRawPointerBox: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// The rest of a function after a plan that stopped at an operation whose
/// outputs' shapes depend on values computed at run time (`non_zero`, a
/// slice whose bounds are computed, a `cond` whose branches differ in shape,
/// a loop whose variables change shape).
///
/// After the plan before it has run, that operation is evaluated with every
/// value it reads known (planned as constants, so its shapes follow from
/// them), and the operations after it are planned for the shapes of what
/// they read, cached by those shapes (at most `cacheLimit` plans): a stream
/// of predictions whose run-time values give the same shapes plans once.
final class PlanContinuation: Sendable {
    /// The operation that waits for run-time values.
    let operation: GraphOperation
    /// The values it reads that are computed before it, by name: value ids of the plan before.
    let reads: [String: Int]
    /// The values it reads that were known when planning stopped.
    let constants: [String: Tensor]
    /// The operations after it, as a function whose inputs are what they read.
    let rest: GraphFunction
    /// The rest's inputs computed before the operation: value ids of the plan before.
    let carried: [String: Int]
    let threads: Int
    private let plans = Locked<[[Int]: TensorEngine.PlanEntry]>([:])
    /// Plans of the rest kept at once; the cache is emptied when full.
    static let cacheLimit = 16

    init(operation: GraphOperation, reads: [String: Int], constants: [String: Tensor], rest: GraphFunction,
         carried: [String: Int], threads: Int) {
        self.operation = operation
        self.reads = reads
        self.constants = constants
        self.rest = rest
        self.carried = carried
        self.threads = threads
    }

    /// The operation's outputs for the values `previous` computed.
    func evaluate(after previous: TensorState) throws(RuntimeError) -> [String: Tensor] {
        var known = constants
        for (name, id) in reads { known[name] = previous.tensor(id) }
        let function = GraphFunction(name: operation.name, inputs: [],
                                     block: GraphBlock(operations: [operation], outputs: operation.outputs.map(\.name), constants: known))
        let plan = try Planner.plan(function, shapes: [:], threads: threads, staging: false)
        let state = TensorState(plan: plan)
        try state.run()
        var outputs: [String: Tensor] = [:]
        for (name, id) in plan.outputs { outputs[name] = state.tensor(id) }
        return outputs
    }

    /// The plan of the rest for the shapes of what it reads (made now, or cached).
    func entry(after previous: TensorState, operationOutputs: [String: Tensor]) throws(RuntimeError) -> TensorEngine.PlanEntry {
        var shapes: [String: [Int]] = [:]
        var key: [Int] = []
        for input in rest.inputs where !input.type.isState {
            let shape = carried[input.name].map { previous.plan.values[$0].shape } ?? operationOutputs[input.name]?.shape ?? []
            shapes[input.name] = shape
            key += shape + [-1]
        }
        if let existing = plans.withLock({ $0[key] }) { return existing }
        let plan = try Planner.plan(rest, shapes: shapes, threads: threads)
        return plans.withLock { plans in
            if let existing = plans[key] { return existing }
            if plans.count >= Self.cacheLimit { plans.removeAll() }
            let entry = TensorEngine.PlanEntry(plan: plan)
            plans[key] = entry
            return entry
        }
    }

    /// Plans of the rest made so far (their count, for tests).
    var cachedPlans: Int { plans.withLock { $0.count } }
}
