import ModelFeatures

/// What an operation's definition sees while it is planned: its arguments
/// (with types, concrete shapes, and values when known), its declared
/// outputs, and the means to add outputs and its kernel.
final class OperationContext {
    let op: GraphOperation
    private let planner: Planner
    private(set) var outputIDs: [Int] = []

    init(op: GraphOperation, planner: Planner) {
        self.op = op
        self.planner = planner
    }

    // MARK: Errors

    /// The operation cannot run as given (exit 94 at load): names the operation and what.
    func unsupported(_ reason: String) -> RuntimeError {
        .unsupportedLayer(layer: op.reportedName, kind: op.reportedType, reason: reason)
    }

    /// The operation's parameters contradict each other or its inputs.
    func invalid(_ detail: String) -> RuntimeError {
        .invalidParameters(model: "operation \"\(op.reportedName)\" (\(op.reportedType))", detail: detail)
    }

    // MARK: Arguments

    /// An argument as operations compute it: a value held narrower (an fp16
    /// state, or a view of one) widened first by a step of its own.
    private func resolve(_ argument: GraphArgument) throws(RuntimeError) -> PlanValue {
        widened(try stored(argument))
    }

    /// An argument as it lies, in whatever storage.
    private func stored(_ argument: GraphArgument) throws(RuntimeError) -> PlanValue {
        switch argument {
        case .constant(let tensor): return planner.constantValue(tensor)
        case .value(let name): return planner.values[try id(of: name)]
        }
    }

    /// The id of the value `name` stands for; an error naming it where nothing computed it.
    private func id(of name: String) throws(RuntimeError) -> Int {
        guard let id = planner.id(named: name) else { throw invalid("reads \"\(name)\", which nothing computes before it") }
        return id
    }

    /// Threads a kernel may use within one prediction.
    var threads: Int { planner.threads }

    /// Whether the parameter is given.
    func has(_ key: String) -> Bool { !(op.arguments[key] ?? []).isEmpty }

    /// A tensor argument, if given.
    func optional(_ key: String) throws(RuntimeError) -> PlanValue? {
        guard let argument = op.arguments[key]?.first else { return nil }
        return try resolve(argument)
    }

    /// A tensor argument the operation requires, as operations compute it
    /// (`ElementType.computedStorage`): what a kernel reading `Float` or `Int32` is given.
    func input(_ key: String = "x") throws(RuntimeError) -> PlanValue {
        guard let value = try optional(key) else { throw invalid("input \(key) is missing") }
        return value
    }

    /// A tensor argument the operation requires, as it lies: for operations
    /// whose kernels read narrower storage in place (`PlanValue.storage`) —
    /// views, copies that widen, states, attention over an fp16 cache.
    func storedInput(_ key: String = "x") throws(RuntimeError) -> PlanValue {
        guard let argument = op.arguments[key]?.first else { throw invalid("input \(key) is missing") }
        return try stored(argument)
    }

    /// `value` as operations compute it: itself, or for a value held
    /// narrower, a copy widened by a step of its own (read at that step: a
    /// state written in place later is widened again by its later readers).
    func widened(_ value: PlanValue) -> PlanValue {
        guard value.isNarrow, value.constant == nil else { return value }
        let id = planner.add(type: value.type, shape: value.shape, constant: nil)
        let from = value.id, count = value.count, storage = value.storage
        planner.addStep(PlanStep(operation: op.name, kind: "widen", reads: [from], writes: [id]) { buffers in
            ElementConversion.widen(buffers.raw(from), storage: storage, count: count, into: buffers.raw(id))
        })
        return planner.values[id]
    }

    /// A variadic argument (`concat`'s values).
    func list(_ key: String) throws(RuntimeError) -> [PlanValue] {
        var result: [PlanValue] = []
        for argument in op.arguments[key] ?? [] { result.append(try resolve(argument)) }
        return result
    }

    /// A parameter that must be known when the plan is made (a constant, or
    /// computed from constants and shapes).
    func constant(_ key: String) throws(RuntimeError) -> Tensor? {
        guard let argument = op.arguments[key]?.first else { return nil }
        // A constant given in place is itself: no plan value is made for it; a value's constant is read where the
        // value lies, not copied and widened (a slice reads six parameters, at every decoder step's plan).
        switch argument {
        case .constant(let tensor):
            return tensor
        case .value(let name):
            guard let constant = planner.values[try id(of: name)].constant else { throw runTimeValueNeeded(key) }
            return constant
        }
    }

    /// The error for a parameter (`key`) that decides shapes but is computed
    /// from the inputs' values: the planner stops before this operation and
    /// plans it, and what follows, when the value is known.
    func runTimeValueNeeded(_ key: String) -> RuntimeError {
        planner.waitingForRunTimeValue(unsupported("parameter \"\(key)\" computed from the inputs' values at run time is not supported here"))
    }

    func int(_ key: String, _ fallback: Int) throws(RuntimeError) -> Int {
        guard let value = try constant(key) else { return fallback }
        guard let scalar = value.scalar else { throw invalid("\(key) must be a scalar, got \(value.count) values") }
        return Int(scalar)
    }

    func ints(_ key: String) throws(RuntimeError) -> [Int]? { try constant(key)?.ints }

    /// A parameter given as one tensor or as several scalar arguments (a
    /// tuple), every element as an integer.
    func integerList(_ key: String) throws(RuntimeError) -> [Int]? {
        let values = try list(key)
        guard !values.isEmpty else { return nil }
        var result: [Int] = []
        for value in values {
            guard let constant = value.constant else { throw runTimeValueNeeded(key) }
            result += constant.ints
        }
        return result
    }

    func bool(_ key: String, _ fallback: Bool) throws(RuntimeError) -> Bool {
        guard let value = try constant(key)?.scalar else { return fallback }
        return value != 0
    }

    func bools(_ key: String) throws(RuntimeError) -> [Bool]? { try constant(key)?.ints.map { $0 != 0 } }

    func float(_ key: String, _ fallback: Float) throws(RuntimeError) -> Float {
        guard let value = try constant(key) else { return fallback }
        guard let scalar = value.scalar else { throw invalid("\(key) must be a scalar, got \(value.count) values") }
        return Float(scalar)
    }

    func string(_ key: String, _ fallback: String) throws(RuntimeError) -> String {
        guard let value = try constant(key) else { return fallback }
        return value.strings.first ?? fallback
    }

    /// An axis in `0..<rank` from a possibly negative one.
    func axis(_ axis: Int, rank: Int, key: String = "axis") throws(RuntimeError) -> Int {
        let resolved = axis < 0 ? axis + rank : axis
        guard resolved >= 0, resolved < max(rank, 1) else { throw invalid("\(key) \(axis) is outside a rank-\(rank) tensor") }
        return resolved
    }

    // MARK: Outputs

    /// The declared element type of output `index`.
    func outputType(_ index: Int = 0) -> ElementType {
        index < op.outputs.count ? op.outputs[index].type.element : .float32
    }

    /// Adds the next output with `shape` (and the declared type unless given); its value id.
    @discardableResult
    func output(_ shape: [Int], type: ElementType? = nil) throws(RuntimeError) -> Int {
        let index = outputIDs.count
        guard shape.allSatisfy({ $0 >= 0 }) else { throw invalid("computed a negative dimension in \(shape)") }
        if index < op.outputs.count, let declared = op.outputs[index].type.shape {
            let consistent = declared.count == shape.count && zip(declared, shape).allSatisfy { $0 == nil || $0 == $1 }
            guard consistent else {
                throw invalid("output \"\(op.outputs[index].name)\" computes shape \(shape), the program declares \(declared.map { $0.map(String.init) ?? "?" })")
            }
        }
        let id = planner.add(type: type ?? outputType(index), shape: shape, constant: nil)
        outputIDs.append(id)
        return id
    }

    /// Adds the next output as a value known now (shape arithmetic, decompressed weights).
    func output(constant tensor: Tensor) {
        let type = outputType(outputIDs.count)
        let value = type == .string || tensor.type == .string ? tensor : tensor.converted(to: type)
        outputIDs.append(planner.add(type: value.type, shape: value.shape, constant: value))
    }

    /// Adds the next output as `source`'s bytes under `shape` (no copy).
    func alias(_ source: PlanValue, shape: [Int]) throws(RuntimeError) {
        guard shape.reduce(1, *) == source.count else { throw invalid("cannot view \(source.count) elements as shape \(shape)") }
        let type = outputType(outputIDs.count)
        // Halves are floats of any float type; an integer output of them is converted from the widened values.
        let source = type.isFloat ? source : widened(source)
        guard type.isFloat == source.type.isFloat else {
            let to = try output(shape)
            let from = source.id, count = source.count
            let toFloat = type.isFloat
            run(reads: [source], writes: [to]) { buffers in
                if toFloat { for i in 0..<count { buffers.floats(to)[i] = Float(buffers.ints(from)[i]) } }
                else { for i in 0..<count { buffers.ints(to)[i] = truncatedInt32(buffers.floats(from)[i]) } }
            }
            return
        }
        let id = planner.alias(source, shape: shape, type: type)
        outputIDs.append(id)
        planner.record(planner.recordedStack(of: source)?.reshaped(from: source.shape, to: shape), for: id)
    }

    /// Adds the next output as `count(shape)` elements of `source` from
    /// element `offset` on, read in place (a slice that is one contiguous run);
    /// `false` (and nothing added) where it cannot be: a constant `source`
    /// (folded instead), an output type stored otherwise than `source`'s, or
    /// inside a nested block. The view is held as `source` is.
    func view(_ source: PlanValue, offset: Int, shape: [Int]) -> Bool {
        let type = outputType(outputIDs.count)
        guard planner.viewsAllowed, source.constant == nil, type.isFloat == source.type.isFloat, offset >= 0, offset + shape.reduce(1, *) <= source.count else { return false }
        let id = planner.view(source, offset: offset, shape: shape, type: type)
        outputIDs.append(id)
        planner.record(planner.recordedStack(of: source)?.copied(from: source.shape, offset: offset, strides: Shapes.strides(shape), to: shape), for: id)
        return true
    }

    /// Adds the kernel computing the outputs; `split` says how it divides its work between threads.
    func run(reads: [PlanValue], writes: [Int], split: String? = nil, _ kernel: @escaping Kernel) {
        planner.addStep(PlanStep(operation: op.name, kind: op.type, reads: reads.map(\.id), writes: writes, split: split, kernel: kernel))
    }

    /// Adds a kernel that only copies `x`'s elements into `out`, which may
    /// be read as `stack` (the elements where they lie in `x`'s source): the
    /// step is left out when every reader reads the stack instead.
    func runCopy(of x: PlanValue, into out: Int, stack: MatrixStack?, _ kernel: @escaping Kernel) {
        planner.record(stack, for: out)
        planner.addStep(PlanStep(operation: op.name, kind: op.type, reads: [x.id], writes: [out], unreadRemovable: stack != nil, kernel: kernel))
    }

    /// The planned value `id`.
    func value(_ id: Int) -> PlanValue { planner.values[id] }

    /// How `value` may be read as a stack of matrices (`MatrixStack`): where
    /// a copy recorded its elements lie, or as it is.
    func stack(of value: PlanValue) -> MatrixStack? { planner.readableStack(of: value) }

    /// Adds a control-flow kernel that runs nested blocks: it reads `reads`
    /// (ids) and writes `outputs`, with `scratch` (the blocks' values) alive for the step.
    func run(reads: [Int], outputs: [Int], scratch: [Int], split: String? = nil, _ kernel: @escaping Kernel) {
        planner.addStep(PlanStep(operation: op.name, kind: op.type, reads: reads, writes: outputs + scratch, outputs: outputs, split: split,
                                 kernel: kernel))
    }

    /// Plans a nested block with its inputs bound to `inputs`.
    func nested(_ block: GraphBlock, inputs: [PlanValue] = []) throws(RuntimeError) -> Planner.NestedPlan {
        try planner.nested(block, inputs: inputs)
    }

    /// A new value of the plan (a loop variable's slot), computed by this operation's kernel.
    func scratch(_ type: ElementType, shape: [Int]) -> PlanValue {
        let id = planner.add(type: type, shape: shape, constant: nil)
        return planner.values[id]
    }
}

/// A float as an int32, truncated toward zero and clamped (NaN gives 0).
@inline(__always)
func truncatedInt32(_ value: Float) -> Int32 {
    guard value.isFinite else { return value.isNaN ? 0 : (value > 0 ? .max : .min) }
    if value >= 2_147_483_648 { return .max }
    if value <= -2_147_483_648 { return .min }
    return Int32(value)
}
