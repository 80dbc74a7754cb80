import CoreMLSchema
import Foundation
import ModelFeatures
import ModelSpec
import SystemIO

/// Runs an ML program on the tensor engine: the program read into a graph
/// once (float weights left where the weight file is mapped, other constants
/// decoded, weight decompression folded), a plan made per distinct set of
/// input shapes and cached, prediction states pooled per plan.
///
/// Immutable after `init` apart from its locked caches: one engine serves
/// concurrent predictions.
public final class TensorEngine: PredictionEngine {
    private let interface: ModelInterface
    private let function: GraphFunction
    private let plans = Locked(PlanCache())
    /// Each operation's part of the last plan, taken again where a new plan's inputs match (a decoder's next step).
    private let memo = PlanMemo()
    /// The function computing one output's last row only, by output (`nil`: the function cannot).
    private let lastRowFunctions = Locked<[String: GraphFunction?]>([:])
    /// Arenas of the states of plans the cache dropped, for new plans' states.
    private let arenas = ArenaPool()
    /// The name of the function this engine runs.
    public let functionName: String
    /// Threads one prediction's matrix products may use.
    private let threads: Int
    /// Whether inputs are read as NeuralNetwork.proto's rank-5 blobs `[Seq, B, C, H, W]` (a lowered network without exact array mapping).
    private let rank5Inputs: Bool

    /// Whether the inputs are a rank-5 network's [Seq, Batch, C, H, W] blobs: an array of rank 5
    /// whose last three dimensions are the declared ones may give any sequence length.
    public var takesSequences: Bool { rank5Inputs }
    /// Bytes of the graph's constants (the weights), kept to plan other input shapes.
    private let graphBytes: Int

    final class PlanEntry: Sendable {
        let plan: TensorPlan
        let idle = Locked<[TensorStateBox]>([])
        init(plan: TensorPlan) { self.plan = plan }
    }

    /// A plan one caller is making, that others asking for the same shapes wait for.
    final class PlanInFlight: @unchecked Sendable {
        private let condition = NSCondition()
        private var outcome: Result<PlanEntry, RuntimeError>?

        /// The plan (or the planner's error) once made.
        func result() -> Result<PlanEntry, RuntimeError> {
            condition.lock()
            defer { condition.unlock() }
            while outcome == nil { condition.wait() }
            return outcome ?? .failure(.cancelled)
        }

        func finish(_ result: Result<PlanEntry, RuntimeError>) {
            condition.lock()
            outcome = result
            condition.broadcast()
            condition.unlock()
        }
    }

    /// The plans made so far by input shapes, the least recently used
    /// dropped past `capacity`: a decoder's every step has a shape of its own
    /// (its mask grows by one position), and a plan with its pooled states
    /// holds its arena, so keeping them all grows memory with every token.
    struct PlanCache {
        /// Plans kept (an evicted plan lives on while a prediction holds it).
        static let capacity = 8
        private(set) var entries: [[Int]: PlanEntry] = [:]
        /// Plans being made, which other callers for the same shapes wait for rather than make again.
        var inFlight: [[Int]: PlanInFlight] = [:]
        private var lastUse: [[Int]: UInt64] = [:]
        private var tick: UInt64 = 0

        mutating func entry(_ key: [Int]) -> PlanEntry? {
            guard let entry = entries[key] else { return nil }
            tick += 1
            lastUse[key] = tick
            return entry
        }

        /// Keeps `entry` for `key` (or returns the one another caller kept first).
        mutating func keep(_ entry: PlanEntry, for key: [Int]) -> PlanEntry {
            if let existing = self.entry(key) { return existing }
            if entries.count >= Self.capacity, let oldest = lastUse.min(by: { $0.value < $1.value })?.key {
                entries[oldest] = nil
                lastUse[oldest] = nil
            }
            tick += 1
            entries[key] = entry
            lastUse[key] = tick
            return entry
        }
    }

    /// Reads the program of `model` and plans the declared input shapes, so
    /// that an operation or parameter modelc cannot run is refused now.
    ///
    /// - Parameters:
    ///   - functionName: the function to run; `nil` for the model's default (or `main`).
    /// - Throws: `RuntimeError.unsupportedLayer` naming the operation, its
    ///   output and the parameter; `.invalidParameters`; `.unsupportedModel`
    ///   when the named function does not exist.
    ///   - threads: threads one prediction's matrix products may use (batches of products, or row blocks of one).
    public convenience init(program model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface, modelDirectory: String?,
                            functionName: String? = nil, threads: Int = 1) throws(RuntimeError) {
        guard let program = model.pointee.mlprogram else { throw .invalidParameters(model: interface.kind, detail: "no program") }
        let declaredDefault = nonEmptyText(model.pointee.description?.pointee.defaultfunctionname)
        let graph = try GraphReader(modelDirectory: modelDirectory).read(program, defaultFunction: declaredDefault)
        let name = functionName ?? graph.defaultFunction
        guard let function = graph.functions[name] else {
            throw .unsupportedModel(kind: "mlProgram", reason: "the program has no function \"\(name)\" (it has \(graph.functions.keys.sorted().joined(separator: ", ")))")
        }
        try self.init(function: function, name: name, interface: interface, threads: threads, rank5Inputs: false)
    }

    /// Lowers a neural network (a NeuralNetwork, classifier or regressor) onto
    /// the engine (docs/runtime.md, "Neural networks on the tensor engine") and
    /// plans the declared input shapes.
    ///
    /// - Parameter weights: decodes the layers' weights (float16, quantized, in a compiled bundle's weight file).
    /// - Throws: `RuntimeError.unsupportedLayer` naming a layer the lowering has no rule for, its kind and why.
    package convenience init(network model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface,
                             weights: NetworkWeightReader, threads: Int = 1) throws(RuntimeError) {
        let lowered = try NetworkLowering.lower(model, interface: interface, weights: weights)
        try self.init(function: lowered.function, name: lowered.function.name, interface: interface, threads: threads,
                      rank5Inputs: lowered.rank5Inputs)
    }

    private init(function: GraphFunction, name: String, interface: ModelInterface, threads: Int, rank5Inputs: Bool) throws(RuntimeError) {
        self.threads = max(1, threads)
        self.rank5Inputs = rank5Inputs
        var function = function
        let laidOut = ChannelsLastLayout.run(FusionPass.run(Planner.foldConstants(function.block)), inputs: function.inputs)
        function.block = ChannelBlocking.run(laidOut, inputs: function.inputs)
        self.function = function
        self.functionName = name
        graphBytes = function.block.constantBytes
        var interface = interface
        if let classify = function.block.operations.last(where: { $0.type == "classify" }), classify.outputs.count == 2 {
            interface.predictedFeatureName = interface.predictedFeatureName ?? classify.outputs[0].name
            interface.predictedProbabilitiesName = interface.predictedProbabilitiesName ?? classify.outputs[1].name
        }
        self.interface = interface
        let declared = declaredShapes()
        do {
            _ = try entry(for: declared)
        } catch {
            // With a flexible input the declared shape is one allowed choice of many (a range's default
            // may not fit the weights): when another allowed shape plans, or is refused for another
            // reason, the refusal depends on the shape, not the model, and each prediction plans its
            // own. A refusal that stays the same is the model's fault.
            guard case .invalidParameters = error, let other = otherAllowedShapes(than: declared) else { throw error }
            do {
                _ = try entry(for: other)
            } catch let second {
                if second.description == error.description { throw error }
            }
        }
    }

    public var residentBytes: Int {
        graphBytes + arenas.keptBytes + plans.withLock { plans in
            plans.entries.values.reduce(0) { total, entry in
                total + entry.plan.memory.bytes + entry.idle.withLock { $0.reduce(0) { $0 + $1.state.bytes } }
            }
        }
    }

    /// The state of a stateful program, kept between predictions (Core ML's `MLState`):
    /// every state the function declares, zero-filled at first.
    public func makeState() -> ProgramState {
        var layouts: [String: ProgramState.Layout] = [:]
        for input in function.inputs where input.type.isState {
            layouts[input.name] = ProgramState.Layout(count: (input.type.shape ?? []).reduce(1) { $0 * ($1 ?? 1) },
                                                      storage: input.type.element.persistentStorage)
        }
        return ProgramState(layouts: layouts)
    }

    public func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        try predict(inputs, cancellation: nil)
    }

    /// The outputs for `inputs`, stopping before the next operation once `cancellation` is cancelled.
    public func predict(_ inputs: [String: FeatureValue], cancellation: PredictionCancellation?) throws(RuntimeError) -> [String: FeatureValue] {
        // A function without states reads and writes none: one empty state serves every prediction.
        try predict(inputs, state: hasStates ? makeState() : Self.noStates, cancellation: cancellation)
    }

    /// The state of a function that declares none.
    private static let noStates = ProgramState(layouts: [:])

    /// Whether the function declares states.
    private var hasStates: Bool { function.inputs.contains { $0.type.isState } }

    /// The outputs for `inputs`, reading and updating `state`.
    public func predict(_ inputs: [String: FeatureValue], state: ProgramState) throws(RuntimeError) -> [String: FeatureValue] {
        try predict(inputs, state: state, cancellation: nil)
    }

    /// The outputs for `inputs` (reading and updating `state`; `nil`: a state of
    /// this prediction's own), output `output` given as its last row only: a
    /// decoder's logits `[1, q, vocabulary]` as `[1, 1, vocabulary]`, the
    /// one row a generator reads. Where a product computes the output row by
    /// row, the plan computes that row alone (`GraphFunction.lastRowOnly(of:)`);
    /// otherwise the other rows are computed but neither copied nor converted
    /// (the 200M decoder's 128: 8 MB of fp16). A value with an axis other than
    /// its last two above 1 is given whole.
    public func predict(_ inputs: [String: FeatureValue], state: ProgramState?, lastRowOf output: String) throws(RuntimeError) -> [String: FeatureValue] {
        try predict(inputs, state: state ?? (hasStates ? makeState() : Self.noStates), cancellation: nil, lastRowOf: output)
    }

    /// `predict(_:state:)`, stopping before the next operation once `cancellation` is cancelled
    /// (a state is then left part-updated: only stateless predictions are cancelled from outside),
    /// giving output `lastRowOf` as `lastRow` does.
    func predict(_ inputs: [String: FeatureValue], state: ProgramState,
                 cancellation: PredictionCancellation?, lastRowOf: String? = nil) throws(RuntimeError) -> [String: FeatureValue] {
        var shapes: [String: [Int]] = [:]
        for input in function.inputs where !input.type.isState {
            guard let value = inputs[input.name] else {
                throw .missingInput(feature: input.name, expected: "a tensor")
            }
            shapes[input.name] = try shape(of: value, input: input)
        }
        let entry = try entry(for: shapes, lastRowOf: lastRowOf)
        let box = entry.idle.withLock { $0.popLast() } ?? TensorStateBox(TensorState(plan: entry.plan, pool: arenas))
        // Every stage's state goes back to its pool at the end (a stage reads the one before).
        var held = [(entry, box)]
        defer { for (entry, box) in held { entry.idle.withLock { $0.append(box) } } }
        var run = box.state
        var plan = entry.plan
        for input in function.inputs {
            guard let id = plan.inputs[input.name] else { continue }
            let target = run.table[id]
            let count = plan.values[id].count
            if input.type.isState {
                Self.bind(input.name, of: state, into: run, plan: plan)
                continue
            }
            guard let value = inputs[input.name] else { continue }
            write(value, type: input.type.element, of: input.name, into: target, count: count)
        }
        try run.run(cancellation: cancellation)
        for (name, id) in plan.states { state.write(name, from: run.table[id], layout: .init(plan.values[id])) }
        // A plan that stopped at an operation waiting for run-time values: that
        // operation evaluated now, the rest planned for the shapes it gives.
        while let continuation = plan.continuation {
            let previous = run
            let produced = try continuation.evaluate(after: previous)
            let next = try continuation.entry(after: previous, operationOutputs: produced)
            let nextBox = next.idle.withLock { $0.popLast() } ?? TensorStateBox(TensorState(plan: next.plan, pool: arenas))
            held.append((next, nextBox))
            run = nextBox.state
            plan = next.plan
            for (name, id) in plan.inputs {
                if plan.states[name] != nil {
                    Self.bind(name, of: state, into: run, plan: plan)
                } else if let source = continuation.carried[name] {
                    let carried = previous.plan.values[source]
                    ElementConversion.widen(previous.table[source], storage: carried.storage, count: carried.count, into: run.table[id])
                } else if let tensor = produced[name] {
                    run.write(tensor, to: id)
                }
            }
            try run.run(cancellation: cancellation)
            for (name, id) in plan.states { state.write(name, from: run.table[id], layout: .init(plan.values[id])) }
        }
        var outputs: [String: FeatureValue] = [:]
        if let classification = plan.classification {
            let probabilities = plan.values[classification.probabilities]
            let values = (0..<probabilities.count).map { Double(run.buffers.floats(probabilities.id)[$0]) }
            guard values.count == classification.labels.count else {
                throw .invalidParameters(model: interface.kind, detail: "\(values.count) probabilities for \(classification.labels.count) class labels")
            }
            outputs = interface.classifierOutputs(labels: classification.labels, probabilities: values)
        }
        for description in interface.outputs where outputs[description.name] == nil {
            guard let id = plan.outputs[description.name] else {
                throw .invalidParameters(model: interface.kind, detail: "the function returns no value \"\(description.name)\"")
            }
            let value = plan.values[id]
            outputs[description.name] = .multiArray(description.name == lastRowOf
                ? Self.lastRow(value, at: run.table[id]) : Self.array(value, at: run.table[id]))
        }
        return outputs
    }

    /// Points state `name`'s value (and its views) in `run` at the state's
    /// storage, so the plan reads and writes it in place; copies it into the
    /// arena when the sizes differ. (`write` afterwards copies nothing for a bound state.)
    private static func bind(_ name: String, of state: ProgramState, into run: TensorState, plan: TensorPlan) {
        guard let id = plan.states[name] else { return }
        let layout = ProgramState.Layout(plan.values[id])
        let views = plan.stateViews[name] ?? []
        if let storage = state.storage(name, layout: layout) {
            run.table[id] = storage
            for view in views { run.table[view] = storage + (plan.viewOffsets[view] ?? 0) }
            return
        }
        run.useOwnSlot(forState: id, views: views)
        state.read(name, into: run.table[id], layout: layout)
    }

    // MARK: Inputs and outputs

    private func shape(of value: FeatureValue, input: (name: String, type: ValueType)) throws(RuntimeError) -> [Int] {
        let shape = try givenShape(of: value, input: input)
        return rank5Inputs ? Self.rank5(shape) : shape
    }

    /// A shape as NeuralNetwork.proto's rank-5 blob: `[C]` is `[1, 1, C, 1, 1]`, `[C, H, W]` is `[1, 1, C, H, W]`.
    static func rank5(_ shape: [Int]) -> [Int] {
        switch shape.count {
        case 1: [1, 1, shape[0], 1, 1]
        case 5...: shape
        default: Array(repeating: 1, count: 5 - shape.count) + shape
        }
    }

    private func givenShape(of value: FeatureValue, input: (name: String, type: ValueType)) throws(RuntimeError) -> [Int] {
        switch value {
        case .multiArray(let array): return array.shape
        case .image(let image):
            let gray: Bool = if case .image(let type)? = interface.inputs.first(where: { $0.name == input.name })?.type {
                type.space.isGrayscale
            } else { false }
            return [1, gray ? 1 : 3, image.height, image.width]
        case .double, .int64:
            if let declared = input.type.shape, declared.allSatisfy({ $0 == 1 }) { return declared.map { _ in 1 } }
            return [1]
        default:
            throw .wrongType(feature: input.name, expected: "a multi-array or an image", got: value.kindText)
        }
    }

    private func write(_ value: FeatureValue, type: ElementType, of name: String, into target: UnsafeMutableRawPointer, count: Int) {
        switch value {
        case .multiArray(let array):
            let doubles = array.dataType == .float32 ? nil : array.doubles
            if type.isFloat {
                let floats = target.assumingMemoryBound(to: Float.self)
                if let doubles {
                    for index in 0..<min(count, doubles.count) { floats[index] = Float(doubles[index]) }
                } else {
                    array.withUnsafeBytes { raw in
                        let source = raw.bindMemory(to: Float.self)
                        for index in 0..<min(count, source.count) { floats[index] = source[index] }
                    }
                }
                if type == .float16 { for index in 0..<count { floats[index] = Float(Float16(floats[index])) } }
            } else {
                let ints = target.assumingMemoryBound(to: Int32.self)
                let values = doubles ?? array.doubles
                for index in 0..<min(count, values.count) {
                    ints[index] = type == .bool ? (values[index] != 0 ? 1 : 0) : truncatedInt32(Float(values[index]))
                    if type != .bool, abs(values[index]) < 2_147_483_648 { ints[index] = Int32(values[index].rounded(.towardZero)) }
                }
            }
        case .image(let image):
            let space: ImageColorSpace = if case .image(let type)? = interface.inputs.first(where: { $0.name == name })?.type {
                type.space
            } else { .rgb }
            let floats = target.assumingMemoryBound(to: Float.self)
            Self.writeImage(image, space: space, into: floats, count: count)
            // An iOS17 grayscale image read as uint8 (`grayscale_use_uint8`): integer slots hold int32.
            if !type.isFloat {
                let ints = target.assumingMemoryBound(to: Int32.self)
                for index in 0..<count { ints[index] = Int32(floats[index]) }
            }
        case .double(let number):
            if type.isFloat { target.assumingMemoryBound(to: Float.self)[0] = Float(number) }
            else { target.assumingMemoryBound(to: Int32.self)[0] = truncatedInt32(Float(number)) }
        case .int64(let number):
            if type.isFloat { target.assumingMemoryBound(to: Float.self)[0] = Float(number) }
            else { target.assumingMemoryBound(to: Int32.self)[0] = Int32(clamping: number) }
        default:
            break
        }
    }

    /// The pixels as [C, H, W] floats 0…255 in the model's color order.
    static func writeImage(_ image: PixelBuffer, space: ImageColorSpace, into values: UnsafeMutablePointer<Float>, count: Int) {
        let width = image.width, height = image.height, plane = width * height
        let format = image.pixelFormat
        let gray = space.isGrayscale
        guard count >= (gray ? 1 : 3) * plane else { return }
        let (r, g, b) = format.rgbOffsets
        let step = format.bytesPerPixel
        let bgr = space == .bgr
        image.bytes.withUnsafeBufferPointer { bytes in
            for y in 0..<height {
                for x in 0..<width {
                    let pixel = y * image.bytesPerRow + x * step
                    let p = y * width + x
                    if gray {
                        values[p] = format == .gray ? Float(bytes[pixel])
                            : (0.299 * Float(bytes[pixel + r]) + 0.587 * Float(bytes[pixel + g]) + 0.114 * Float(bytes[pixel + b])).rounded()
                    } else {
                        let red = Float(bytes[pixel + r]), green = Float(bytes[pixel + g]), blue = Float(bytes[pixel + b])
                        values[p] = bgr ? blue : red
                        values[plane + p] = green
                        values[2 * plane + p] = bgr ? red : blue
                    }
                }
            }
        }
    }

    /// A computed value as a multi-array: fp16 as float16, other floats as
    /// float32, integers and bool as int32.
    /// A rank-0 value is a one-element vector, as Core ML gives it (a multi-array has at least one axis).
    static func array(_ value: PlanValue, at pointer: UnsafeMutableRawPointer) -> MultiArray {
        let count = value.count
        let shape = value.shape.isEmpty ? [1] : value.shape
        if value.storage == .float16 {
            // Halves (a view of an fp16 state): as they lie for fp16, widened for a wider float type.
            if value.type == .float16 {
                return MultiArray(copying: UnsafeRawBufferPointer(start: pointer, count: value.bytes), shape: shape,
                                  strides: MultiArray.rowMajorStrides(shape), dataType: .float16)
            }
            var array = MultiArray(shape: shape, dataType: .float32)
            array.withUnsafeMutableBytes { raw in
                if let base = raw.baseAddress { ElementConversion.widen(pointer, count: count, into: base) }
            }
            return array
        }
        if value.type == .float32 || value.type == .float64 {
            // Copied once into the array's own memory (no intermediate [Float]: a segmentation
            // model's 4 MB output paid a second allocation and its page faults per prediction).
            return MultiArray(copying: UnsafeRawBufferPointer(start: pointer, count: count * 4), shape: shape,
                              strides: MultiArray.rowMajorStrides(shape), dataType: .float32)
        }
        var array = MultiArray(shape: shape, dataType: value.type == .float16 ? .float16 : .int32)
        array.withUnsafeMutableBytes { raw in
            if value.type == .float16 {
                // Rounded as Float16(x) rounds (to nearest, ties to even), eight at a time where the CPU has F16C.
                if let base = raw.baseAddress { ElementConversion.narrow(pointer.assumingMemoryBound(to: Float.self), count: count, into: base) }
            } else {
                raw.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: count * 4))
            }
        }
        return array
    }

    /// The last row of a computed value whose axes before its last two are
    /// all 1 (`[1, q, n]`: `[1, 1, n]`), as `array` gives values; the whole value otherwise.
    static func lastRow(_ value: PlanValue, at pointer: UnsafeMutableRawPointer) -> MultiArray {
        guard value.rank >= 2, value.shape.dropLast(2).allSatisfy({ $0 == 1 }) else { return array(value, at: pointer) }
        var shape = value.shape
        shape[value.rank - 2] = 1
        let row = PlanValue(id: value.id, type: value.type, shape: shape, constant: nil, storage: value.storage)
        return array(row, at: pointer + value.storage.bytes(value.count - row.count))
    }

    // MARK: Plans

    /// The input shapes the description declares (its default for flexible ones).
    private func declaredShapes() -> [String: [Int]] {
        var shapes: [String: [Int]] = [:]
        for input in function.inputs where !input.type.isState {
            let description = interface.inputs.first { $0.name == input.name }
            switch description?.type {
            case .image(let image)?:
                shapes[input.name] = [1, image.space.isGrayscale ? 1 : 3, Int(image.height), Int(image.width)]
            case .multiArray(let array)? where !array.shape.isEmpty:
                shapes[input.name] = array.shape.map(Int.init)
            default:
                if let declared = input.type.shape, declared.allSatisfy({ $0 != nil }) { shapes[input.name] = declared.map { $0 ?? 1 } }
                else { shapes[input.name] = [1] }
            }
            if rank5Inputs, let shape = shapes[input.name] { shapes[input.name] = Self.rank5(shape) }
        }
        return shapes
    }

    /// Input shapes the description allows besides `declared` (another size
    /// in each flexible dimension: the upper bound, or one more than the
    /// lower; another enumerated shape), or `nil` when no input is flexible.
    private func otherAllowedShapes(than declared: [String: [Int]]) -> [String: [Int]]? {
        func other(_ range: SizeRange, than current: Int) -> Int {
            if range.upperBound > 0, Int(range.upperBound) != current { return Int(range.upperBound) }
            return Int(range.lowerBound) != current ? Int(range.lowerBound) : current + 1
        }
        var shapes = declared
        var changed = false
        for input in function.inputs where !input.type.isState {
            guard let description = interface.inputs.first(where: { $0.name == input.name }), var shape = shapes[input.name] else { continue }
            switch description.type {
            case .multiArray(let array) where !array.shape.isEmpty:
                var given = array.shape.map(Int.init)
                switch array.shapeFlexibility {
                case .enumerated(let choices)?:
                    guard let choice = choices.first(where: { $0 != array.shape }) else { continue }
                    given = choice.map(Int.init)
                case .ranges(let ranges)?:
                    for (axis, range) in ranges.enumerated() where axis < given.count && Int64(range.lowerBound) != range.upperBound {
                        given[axis] = other(range, than: given[axis])
                    }
                case nil:
                    // A rank-5 network's sequence axis is not declared: a prediction may give any
                    // length there ([Seq, 1, C, H, W] arrays, as Core ML takes them).
                    guard rank5Inputs else { continue }
                    shape = Self.rank5(given)
                    shape[0] += 1
                    changed = true
                    shapes[input.name] = shape
                    continue
                }
                shape = rank5Inputs ? Self.rank5(given) : given
            case .image(let image):
                switch image.sizeFlexibility {
                case .enumerated(let sizes)?:
                    guard let size = sizes.first(where: { $0.width != image.width || $0.height != image.height }) else { continue }
                    shape[shape.count - 2] = Int(size.height)
                    shape[shape.count - 1] = Int(size.width)
                case .ranges(let width, let height)?:
                    shape[shape.count - 2] = other(height, than: shape[shape.count - 2])
                    shape[shape.count - 1] = other(width, than: shape[shape.count - 1])
                case nil:
                    continue
                }
            default:
                continue
            }
            changed = changed || shape != shapes[input.name]
            shapes[input.name] = shape
        }
        return changed ? shapes : nil
    }

    /// The plan for `shapes` (made now, or the cached one).
    func plan(for shapes: [String: [Int]], lastRowOf: String? = nil) throws(RuntimeError) -> TensorPlan {
        try entry(for: shapes, lastRowOf: lastRowOf).plan
    }

    /// Plans kept now (tests).
    var keptPlanCount: Int { plans.withLock { $0.entries.count } }

    /// Plans for inputs of `shapes` (non-state inputs by name) now, if no plan
    /// for them is kept or being made, so that a prediction with them finds
    /// it: a decoder's next step, planned on another core while this one runs.
    /// A shape that cannot be planned is left for that prediction to report.
    /// `lastRowOf`: for a prediction giving that output's last row only (`predict(_:state:lastRowOf:)`).
    public func prepare(shapes: [String: [Int]], lastRowOf: String? = nil) {
        ThreadTeam.reserving { _ = try? entry(for: shapes, lastRowOf: lastRowOf) }
    }

    /// Hands the arenas of the idle prediction states of the plan for
    /// `shapes` (non-state inputs by name) to the states made next, keeping
    /// the plan: a decoder's prompt runs once at its length, and its state's
    /// arena, the largest (a 200M decoder's 128 tokens: 27 MB written), would
    /// stay resident under every step until the plan left the cache. The
    /// step that takes it keeps only the pages it uses (`ArenaPool.take`).
    /// `lastRowOf`: of the plan for predictions giving that output's last row only.
    public func releaseStates(shapes: [String: [Int]], lastRowOf: String? = nil) {
        let key = key(for: shapes, lastRow: lastRowFunction(lastRowOf))
        guard let entry = plans.withLock({ $0.entries[key] }) else { return }
        // The states are freed, giving their arenas to the pool, once the lock is let go.
        _ = entry.idle.withLock { idle in
            let states = idle
            idle.removeAll()
            return states
        }
    }

    /// States kept for later predictions by the plan for `shapes`; `nil` when no plan is kept for them (tests).
    func idleStateCount(shapes: [String: [Int]], lastRowOf: String? = nil) -> Int? {
        let key = key(for: shapes, lastRow: lastRowFunction(lastRowOf))
        return plans.withLock { $0.entries[key] }.map { entry in entry.idle.withLock { $0.count } }
    }

    /// The function a prediction giving output `lastRowOf`'s last row only
    /// runs (`GraphFunction.lastRowOnly(of:)`), with its output's place; `nil`:
    /// the whole function (no such output, or one not computed row by row).
    private func lastRowFunction(_ lastRowOf: String?) -> (function: GraphFunction, output: Int)? {
        guard let output = lastRowOf, let place = function.block.outputs.firstIndex(of: output) else { return nil }
        let made = lastRowFunctions.withLock { functions in
            if let made = functions[output] { return made }
            let made = function.lastRowOnly(of: output)
            functions[output] = made
            return made
        }
        return made.map { ($0, place) }
    }

    /// The plan cache's key for inputs of `shapes` (and for `lastRow`, the function giving an output's last row).
    private func key(for shapes: [String: [Int]], lastRow: (function: GraphFunction, output: Int)?) -> [Int] {
        function.inputs.flatMap { (shapes[$0.name] ?? []) + [-1] } + (lastRow.map { [-2 - $0.output] } ?? [])
    }

    private func entry(for shapes: [String: [Int]], lastRowOf: String? = nil) throws(RuntimeError) -> PlanEntry {
        let lastRow = lastRowFunction(lastRowOf)
        let key = key(for: shapes, lastRow: lastRow)
        enum Next {
            case ready(PlanEntry)
            case wait(PlanInFlight)
            case make(PlanInFlight, first: Bool)
        }
        let next = plans.withLock { cache -> Next in
            if let existing = cache.entry(key) { return .ready(existing) }
            if let making = cache.inFlight[key] { return .wait(making) }
            let making = PlanInFlight()
            cache.inFlight[key] = making
            // Eviction never empties the cache: no entry means this is the model's first plan.
            return .make(making, first: cache.entries.isEmpty)
        }
        switch next {
        case .ready(let entry):
            return entry
        case .wait(let making):
            // A prediction waiting for its plan, which another thread is making (a decoder's step planned ahead;
            // `MODELC_PROFILE`'s "plan_wait").
            let started = TensorState.profiling ? DispatchTime.now().uptimeNanoseconds : 0
            defer { if TensorState.profiling { TensorState.record("plan_wait", DispatchTime.now().uptimeNanoseconds - started) } }
            return try making.result().get()
        case .make(let making, let first):
            let result: Result<PlanEntry, RuntimeError>
            do throws(RuntimeError) {
                let started = TensorState.profiling ? TensorState.threadNanoseconds() : 0
                let plan = try Planner.plan(lastRow?.function ?? function, shapes: shapes, threads: threads,
                                            releasingMappedPages: first, memo: memo)
                if TensorState.profiling { TensorState.recordPlan(TensorState.threadNanoseconds() - started, reused: plan.reusedOperations, anew: plan.plannedAnew) }
                result = .success(plans.withLock { cache in
                    cache.inFlight[key] = nil
                    return cache.keep(PlanEntry(plan: plan), for: key)
                })
            } catch {
                plans.withLock { $0.inFlight[key] = nil }
                result = .failure(error)
            }
            making.finish(result)
            return try result.get()
        }
    }
}

/// The persistent state of a stateful program (Core ML's `MLState`): the
/// values `read_state` reads and `coreml_update_state` writes, kept between
/// predictions. One prediction at a time may use a state.
///
/// Each state's values live in one buffer the engine binds into a
/// prediction's plan (its kernels read and write it in place) when the plan's
/// shape for it has the same size; otherwise they are copied in and out.
public final class ProgramState: @unchecked Sendable {
    /// How one state's values lie: how many, and in what storage (an fp16
    /// state as halves). A plan binds a state in place only with the same layout.
    struct Layout: Equatable {
        var count: Int
        var storage: ElementStorage

        init(count: Int, storage: ElementStorage) {
            self.count = count
            self.storage = storage
        }

        /// The layout of a plan's state value.
        init(_ value: PlanValue) { self.init(count: value.count, storage: value.storage) }

        var bytes: Int { storage.bytes(count) }
    }

    /// One state's elements.
    private final class Storage {
        let pointer: UnsafeMutableRawPointer
        let layout: Layout

        init(_ layout: Layout) {
            self.layout = layout
            pointer = .allocate(byteCount: max(layout.bytes, 4), alignment: 64)
            pointer.initializeMemory(as: UInt8.self, repeating: 0, count: max(layout.bytes, 4))
        }

        deinit { pointer.deallocate() }
    }

    private let lock = Locked<[String: Storage]>([:])

    /// States laid out as `layouts`, by name, zero-filled (made in place: a
    /// zeroed array copied in took the states' size twice).
    init(layouts: [String: Layout]) {
        let storages = layouts.mapValues { Storage($0) }
        lock.withLock { $0 = storages }
    }

    /// The names of the states.
    public var names: [String] { lock.withLock { $0.keys.sorted() } }

    /// Bytes the states' values take (2 per element of an fp16 state, 4 otherwise).
    public var bytes: Int { lock.withLock { $0.values.reduce(0) { $0 + max($1.layout.bytes, 4) } } }

    /// Where state `name` lives when it is laid out as `layout`: a plan may
    /// read and write it there for the duration of one prediction.
    func storage(_ name: String, layout: Layout) -> UnsafeMutableRawPointer? {
        lock.withLock { $0[name].flatMap { $0.layout == layout ? $0.pointer : nil } }
    }

    /// Copies state `name` into `target`, laid out as `layout` (a plan whose
    /// shape for it differs: as many elements as both hold).
    func read(_ name: String, into target: UnsafeMutableRawPointer, layout: Layout) {
        lock.withLock { values in
            guard let stored = values[name] else { return }
            Self.copy(stored.pointer, stored.layout, into: target, layout, count: min(layout.count, stored.layout.count))
        }
    }

    func write(_ name: String, from source: UnsafeMutableRawPointer, layout: Layout) {
        lock.withLock { values in
            // In place when the layout is unchanged: a decoder's caches are rewritten on every step.
            if let stored = values[name], stored.layout == layout {
                if stored.pointer != source { stored.pointer.copyMemory(from: source, byteCount: layout.bytes) }
                return
            }
            let storage = Storage(layout)
            storage.pointer.copyMemory(from: source, byteCount: layout.bytes)
            values[name] = storage
        }
    }

    /// `count` elements from one layout's storage into another's.
    private static func copy(_ source: UnsafeMutableRawPointer, _ from: Layout, into target: UnsafeMutableRawPointer, _ to: Layout, count: Int) {
        if from.storage == to.storage {
            target.copyMemory(from: source, byteCount: from.storage.bytes(count))
        } else if to.storage == .float16 {
            ElementConversion.narrow(source.assumingMemoryBound(to: Float.self), count: count, into: target)
        } else {
            ElementConversion.widen(source, storage: from.storage, count: count, into: target)
        }
    }
}

private func nonEmptyText(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
    let value = text(pointer)
    return value.isEmpty ? nil : value
}

extension GraphBlock {
    /// Bytes of every constant the block holds: its own, its operations'
    /// inline ones and those of nested blocks.
    var constantBytes: Int {
        constants.values.reduce(0) { $0 + $1.storageBytes } + operations.reduce(0) { total, operation in
            let inline = operation.arguments.values.joined().reduce(0) { sum, argument in
                if case .constant(let tensor) = argument { sum + tensor.storageBytes } else { sum }
            }
            return total + inline + operation.blocks.reduce(0) { $0 + $1.constantBytes }
        }
    }
}

extension Tensor {
    /// Bytes its elements take in memory.
    var storageBytes: Int {
        switch storage {
        case .floats(let values): values.count * MemoryLayout<Float>.size
        case .ints(let values): values.count * MemoryLayout<Int32>.size
        case .strings(let values): values.reduce(0) { $0 + $1.utf8.count }
        // Mapped weights cost pages only while read, but the float32 copy a
        // plan packs from them is about this size: counted as if resident.
        case .mapped(let values): values.count * MemoryLayout<Float>.size
        // Packed weights are read as stored by the kernels that take them.
        case .packed(let values): values.storedBytes
        }
    }
}
