import ModelFeatures
import ModelSpec

/// Makes a `TensorPlan`: walks a function's operations in order with the
/// inputs' concrete shapes, lets each operation's definition state its
/// outputs and add its kernel, folds steps whose inputs are all known,
/// then lays out the arena from every value's last use.
final class Planner {
    private(set) var values: [PlanValue] = []
    private(set) var steps: [PlanStep] = []
    /// Values that are another value's bytes under another shape (reshape, squeeze, …).
    private var aliasOf = ValueTable<Int>()
    /// For an alias that starts inside its root (a slice): how many elements in.
    private var aliasOffset = ValueTable<Int>()
    /// Values that may be read where their elements already lie
    /// (`MatrixStacks.swift`), and the index of the step that made them.
    var recordedStacks = ValueTable<(stack: MatrixStack, from: Int)>()
    /// The value each alias was made from (`aliasOf` names the root).
    private var aliasParent = ValueTable<Int>()
    /// Each view (`view`): how many elements into the value it was taken
    /// from, and the index of the first step that may read it.
    private var views = ValueTable<(offset: Int, from: Int)>()
    /// The index of the last step writing each value (by root): whether a
    /// recorded `MatrixStack`'s source is still as it was.
    private(set) var lastWrite = ValueTable<Int>()
    /// How deep in nested blocks planning is.
    private var nesting = 0
    private var names: [String: Int] = [:]
    let memory = ConstantMemory()
    private var constantAddresses: [Int: UnsafeMutableRawPointer] = [:]
    private var classification: TensorPlan.Classification?
    private var stateInputs: [String: Int] = [:]
    /// The error an operation threw because a shape-deciding parameter is
    /// computed at run time: planning stops there and the rest waits for it.
    private var runTimeValueError: RuntimeError?
    /// Where planning stopped (top-level operations only), if it did.
    private var stop: Int?
    /// Values the steps of nested blocks read (their steps live inside the enclosing step's kernel).
    private var readsInNestedBlocks: Set<Int> = []
    /// Threads a kernel may use within one prediction.
    let threads: Int
    /// Whether mapped weights read while planning have their pages dropped after (`releaseMappedPages`).
    private let releasesMappedPages: Bool

    /// The operations' records of the function's last plan (`PlanMemo`), and this plan's.
    private var previous = PlanMemo.Last(records: [], bindings: [])
    private var made = PlanMemo.Last(records: [], bindings: [])
    /// Whether every name stands for the id it did at the function's last plan (`PlanMemo.Binding`).
    private var numberingKept = false
    private var memoizes = false
    /// Operations taken from the memo rather than planned.
    private var reused = 0
    /// The types of the operations planned anew while the memo held a last plan (`TensorPlan.plannedAnew`).
    private var plannedAnew: [String] = []
    private var hasLastPlan = false

    init(threads: Int = 1, releasesMappedPages: Bool = true) {
        self.threads = max(1, threads)
        self.releasesMappedPages = releasesMappedPages
    }

    /// Plans `function` for `shapes` (one per input; states take their declared shape).
    ///
    /// With `staging`, an operation whose outputs' shapes depend on values
    /// computed at run time (a slice's begin, `non_zero`, a `cond` whose
    /// branches differ in shape) ends the plan: the plan returned computes
    /// what comes before it and holds the rest as a `PlanContinuation`
    /// (see `TensorEngine`'s run loop). Without, such an operation is refused.
    ///
    /// `releasingMappedPages`: whether the pages of mapped weights read while
    /// planning (packed, folded) are dropped after, so that the file and the
    /// packed copies are never resident together. The first plan of a model
    /// does; a later one reads the packed copies the first made and skips the
    /// walk (a decoder plans every step anew).
    ///
    /// `memo`: where the operations' parts of the function's last plan are
    /// taken from where their inputs are the same, and this plan's are kept.
    static func plan(_ function: GraphFunction, shapes: [String: [Int]], threads: Int = 1,
                     staging: Bool = true, releasingMappedPages: Bool = true, memo: PlanMemo? = nil) throws(RuntimeError) -> TensorPlan {
        let planner = Planner(threads: threads, releasesMappedPages: releasingMappedPages)
        if let memo {
            planner.memoizes = true
            let count = function.block.operations.count
            planner.previous = memo.last(of: function.name, count: count)
            planner.hasLastPlan = planner.previous.records.contains { $0 != nil }
            planner.made = PlanMemo.Last(records: Array(repeating: nil, count: count), bindings: Array(repeating: nil, count: count))
        }
        defer { if planner.memoizes { memo?.keep(planner.made, of: function.name) } }
        let expected = function.inputs.count + function.block.operations.count * 2
        planner.values.reserveCapacity(expected)
        planner.names.reserveCapacity(expected)
        planner.steps.reserveCapacity(function.block.operations.count)
        var inputs: [String: Int] = [:]
        for input in function.inputs {
            var shape = shapes[input.name]
            if shape == nil, let declared = input.type.shape, declared.allSatisfy({ $0 != nil }) { shape = declared.map { $0 ?? 0 } }
            guard let shape else {
                throw .missingInput(feature: input.name, expected: "a tensor")
            }
            // A state persists in its own width (fp16 in two bytes); inputs are written as computed.
            let storage = input.type.isState ? input.type.element.persistentStorage : nil
            let id = planner.add(type: input.type.element, shape: shape, constant: nil, storage: storage)
            planner.names[input.name] = id
            inputs[input.name] = id
            if input.type.isState { planner.stateInputs[input.name] = id }
        }
        planner.addConstants(of: function, memo: memo)
        try planner.run(function.block, staging: staging)
        if let stop = planner.stop { return planner.staged(function, at: stop, inputs: inputs) }
        var outputs: [String: Int] = [:]
        for name in function.block.outputs {
            guard let id = planner.names[name] else {
                throw .invalidParameters(model: "mlProgram", detail: "function \(function.name) returns \"\(name)\", which nothing computes")
            }
            outputs[name] = id
        }
        var plan = planner.finish(inputs: inputs, outputs: outputs)
        plan.reusedOperations = planner.reused
        plan.plannedAnew = planner.plannedAnew
        return plan
    }

    /// Folds the operations of `block` whose arguments are all constants
    /// (weight decompression, shape-free arithmetic on constants) into
    /// constants, once, before any plan: the block returned runs the rest.
    ///
    /// A lowered neural network may write one blob name twice (a `while_loop`
    /// or `cond` reassigning a blob that held a constant): a name an
    /// operation left to run time has written is no longer known after it, and
    /// an operation writing a name already defined is not folded (its
    /// constant would stand for the name before its definition too).
    static func foldConstants(_ block: GraphBlock) -> GraphBlock {
        var result = block
        result.operations = []
        var defined = Set(block.constants.keys)
        var reassigned: Set<String> = []
        func keep(_ op: GraphOperation) {
            result.operations.append(op)
            for output in op.outputs {
                if defined.contains(output.name) { reassigned.insert(output.name) }
                defined.insert(output.name)
            }
        }
        for op in block.operations {
            let known = op.arguments.values.allSatisfy { arguments in
                arguments.allSatisfy { argument in
                    if case .value(let name) = argument { return result.constants[name] != nil && !reassigned.contains(name) }
                    return true
                }
            }
            let redefines = op.outputs.contains { defined.contains($0.name) }
            guard known, !redefines, op.blocks.isEmpty, op.type != "classify", OperationRegistry.definition(op.type)?.hasEffects == false else {
                keep(op)
                continue
            }
            let planner = Planner()
            guard (try? planner.operation(op, constants: result.constants)) != nil else {
                keep(op)
                continue
            }
            var folded: [String: Tensor] = [:]
            for output in op.outputs {
                guard let id = planner.names[output.name], let value = planner.values[id].constant else { break }
                folded[output.name] = value
            }
            if folded.count == op.outputs.count {
                result.constants.merge(folded) { _, new in new }
                defined.formUnion(folded.keys)
            } else {
                keep(op)
            }
        }
        return result
    }

    private func operation(_ op: GraphOperation, constants: [String: Tensor]) throws(RuntimeError) {
        for arguments in op.arguments.values {
            for case .value(let name) in arguments where names[name] == nil {
                if let constant = constants[name] { names[name] = add(type: constant.type, shape: constant.shape, constant: constant) }
            }
        }
        try plan(op)
    }

    /// Adds the constants of `function`'s block as values, after its inputs:
    /// from `memo` where it holds them (the same values and names at every
    /// plan — a 200M decoder's program has about a thousand, each a name to hash),
    /// else one by one, kept there for the next plan.
    private func addConstants(of function: GraphFunction, memo: PlanMemo?) {
        let block = function.block
        if let start = memo?.start(of: function.name), start.firstID == values.count, start.values.count == block.constants.count {
            values.append(contentsOf: start.values)
            names = start.names
            // The inputs' ids are their places, the constants' the start's: as at the last plan.
            numberingKept = true
            return
        }
        let firstID = values.count
        for (name, constant) in block.constants where names[name] == nil {
            names[name] = add(type: constant.type, shape: constant.shape, constant: constant)
        }
        // Kept only where every constant has a value of its own (a name both an input and a constant keeps the input).
        if values.count - firstID == block.constants.count {
            memo?.keep(PlanMemo.Start(firstID: firstID, values: Array(values[firstID...]), names: names), of: function.name)
        }
    }

    private func run(_ block: GraphBlock, staging: Bool) throws(RuntimeError) {
        for (index, op) in block.operations.enumerated() {
            if op.type == "classify" {
                try classify(op)
                numberingKept = false
                continue
            }
            guard staging else {
                try plan(op, index: index)
                continue
            }
            let firstStep = steps.count
            runTimeValueError = nil
            do {
                try plan(op, index: index)
            } catch {
                guard let waiting = runTimeValueError, waiting == error else { throw error }
                steps.removeSubrange(firstStep...)
                stop = index
                return
            }
        }
    }

    /// The plan of what comes before operation `index` of the function's
    /// block, which needs values computed at run time to be planned: the
    /// values it and the operations after it read stay alive to the end.
    private func staged(_ function: GraphFunction, at index: Int, inputs: [String: Int]) -> TensorPlan {
        let block = function.block
        let operation = block.operations[index]
        let rest = Array(block.operations[(index + 1)...])
        let read = Self.referencedNames([operation]), restRead = Self.referencedNames(rest).union(block.outputs)
        var carried: [String: Int] = [:], operationReads: [String: Int] = [:]
        var operationConstants: [String: Tensor] = [:], restConstants: [String: Tensor] = [:]
        var restInputs: [(name: String, type: ValueType)] = []
        for name in read.union(restRead).sorted() {
            guard let id = names[name], stateInputs[name] == nil else { continue }
            let value = values[id]
            if let constant = value.constant {
                if read.contains(name) { operationConstants[name] = constant }
                if restRead.contains(name) { restConstants[name] = constant }
                continue
            }
            if read.contains(name) { operationReads[name] = id }
            if restRead.contains(name) {
                carried[name] = id
                restInputs.append((name, ValueType(element: value.type, shape: nil)))
            }
        }
        let produced = Set(operation.outputs.map(\.name))
        for output in operation.outputs where restRead.contains(output.name) {
            restInputs.append((output.name, ValueType(element: output.type.element, shape: nil)))
        }
        for input in function.inputs where input.type.isState { restInputs.append(input) }
        for (name, constant) in block.constants where restRead.contains(name) && restConstants[name] == nil && !produced.contains(name) {
            restConstants[name] = constant
        }
        let remainder = GraphFunction(name: function.name, inputs: restInputs,
                                      block: GraphBlock(operations: rest, outputs: block.outputs, constants: restConstants))
        let continuation = PlanContinuation(operation: operation, reads: operationReads, constants: operationConstants,
                                            rest: remainder, carried: carried, threads: threads)
        // The values carried over are the prefix's outputs: alive to its end.
        var plan = finish(inputs: inputs, outputs: carried.merging(operationReads) { first, _ in first })
        plan.continuation = continuation
        return plan
    }

    /// The names of the values `operations` (and their nested blocks) read or return.
    static func referencedNames(_ operations: [GraphOperation]) -> Set<String> {
        var result = Set<String>()
        for op in operations {
            for arguments in op.arguments.values {
                for case .value(let name) in arguments { result.insert(name) }
            }
            for block in op.blocks { result.formUnion(referencedNames(block.operations).union(block.outputs)) }
        }
        return result
    }

    /// Marks `error` as one that planning at run time would avoid (a shape
    /// decided by a value computed from the inputs), and returns it.
    func waitingForRunTimeValue(_ error: RuntimeError) -> RuntimeError {
        runTimeValueError = error
        return error
    }

    /// Plans `op`, operation `index` of the function's block when given:
    /// from its record of the last plan where that fits (`PlanMemo`).
    private func plan(_ op: GraphOperation, index: Int? = nil) throws(RuntimeError) {
        let firstValue = values.count, firstStep = steps.count
        // Only replayable operations without nested blocks have records (so the registry is not asked again).
        if memoizes, let index, nesting == 0, let record = previous.records[index], record.type == op.type, record.threads == threads,
           record.firstValue == firstValue, memoInputs(of: op, match: record.inputs, numberingKept: numberingKept) {
            // A record binds its outputs as it did where it was made: the numbering stays as it was.
            replay(record, of: op)
            made.records[index] = record
            made.bindings[index] = PlanMemo.Binding(end: values.count, outputs: record.outputs)
            reused += 1
            return
        }
        guard let definition = OperationRegistry.definition(op.type) else {
            throw .unsupportedLayer(layer: op.reportedName, kind: op.reportedType, reason: "modelc does not run this ML program operation yet")
        }
        guard memoizes, let index, nesting == 0 else {
            try plan(op, definition)
            return
        }
        if hasLastPlan { plannedAnew.append(op.type) }
        defer {
            // Nested blocks bind names of their own: the numbering is not followed through them.
            let binding = PlanMemo.Binding(end: values.count, outputs: op.outputs.map { names[$0.name] ?? -1 })
            made.bindings[index] = binding
            numberingKept = numberingKept && op.blocks.isEmpty && binding == previous.bindings[index]
        }
        guard definition.replayable, op.blocks.isEmpty else {
            try plan(op, definition)
            return
        }
        var inputs = memoInputs(of: op, readAtRunTime: definition.readAtRunTime)
        try plan(op, definition)
        // Folded (no step left): its outputs are constants made from its inputs' elements, which then matter.
        if steps.count == firstStep { for position in inputs.indices { inputs[position].anyConstant = false } }
        let ids = firstValue..<values.count
        made.records[index] = PlanMemo.Record(
            type: op.type, threads: threads, firstValue: firstValue, inputs: inputs, values: Array(values[ids]), steps: Array(steps[firstStep...]),
            outputs: op.outputs.compactMap { names[$0.name] },
            aliases: ids.compactMap { id in aliasOf[id].map { (id, $0, aliasParent[id] ?? $0, aliasOffset[id]) } },
            views: ids.compactMap { id in views[id].map { (id, $0.offset, $0.from - firstStep) } },
            stacks: ids.compactMap { id in recordedStacks[id].map { (id, $0.stack, $0.from - firstStep) } })
    }

    /// Adds what `record` holds of `op`'s planning (`PlanMemo`).
    private func replay(_ record: PlanMemo.Record, of op: GraphOperation) {
        let firstStep = steps.count
        values.append(contentsOf: record.values)
        for step in record.steps { addStep(step) }
        for alias in record.aliases {
            aliasOf[alias.id] = alias.root
            aliasParent[alias.id] = alias.parent
            aliasOffset[alias.id] = alias.offset
        }
        for view in record.views { views[view.id] = (view.offset, firstStep + view.from) }
        for stack in record.stacks { recordedStacks[stack.id] = (stack.stack, firstStep + stack.from) }
        for (output, id) in zip(op.outputs, record.outputs) { names[output.name] = id }
    }

    private func plan(_ op: GraphOperation, _ definition: OperationDefinition) throws(RuntimeError) {
        let context = OperationContext(op: op, planner: self)
        let first = steps.count, firstValue = values.count
        try definition.plan(context)
        guard context.outputIDs.count == op.outputs.count else {
            throw .invalidParameters(model: "operation \"\(op.reportedName)\" (\(op.reportedType))", detail: "made \(context.outputIDs.count) of \(op.outputs.count) outputs")
        }
        for (output, id) in zip(op.outputs, context.outputIDs) { names[output.name] = id }
        // Fold: a step that reads only constants runs now, and its outputs become constants.
        if !definition.hasEffects, steps.count == first + 1, let step = steps.last,
           step.reads.allSatisfy({ values[$0].constant != nil }) {
            steps.removeLast()
            try fold(step, madeFrom: firstValue)
        }
        if releasesMappedPages { releaseMappedPages(of: op) }
    }

    /// Mapped constants of fewer values than this (fp16 512 KB, fp32 1 MB)
    /// keep their pages: dropping them costs a system call at every plan and
    /// a page fault at the next (a decoder plans each step anew: its norms'
    /// weights and rotary tables), for memory that does not matter.
    static let releasedPagesMinimumCount = 1 << 18

    /// Drops the pages of the mapped weights `op` read while it was planned
    /// (packing them, folding): a kernel that reads them in place maps back
    /// only what it reads, so planning never holds the weight file and the
    /// packed copies at once.
    private func releaseMappedPages(of op: GraphOperation) {
        // Weights kept as stored that this operation made (a decompression) may read its constants in place (their scales).
        let made: [PackedWeights] = op.outputs.compactMap { output in
            guard let id = names[output.name], case .packed(let packed) = values[id].constant?.storage else { return nil }
            return packed
        }
        func release(_ tensor: Tensor) {
            guard tensor.count >= Self.releasedPagesMinimumCount else { return }
            if case .mapped(let mapped) = tensor.storage, made.contains(where: { $0.reads(mapped) }) { return }
            tensor.releasePages()
        }
        for arguments in op.arguments.values {
            for argument in arguments {
                switch argument {
                case .constant(let tensor): release(tensor)
                case .value(let name):
                    // Weights a kernel reads as stored, at every run, keep their pages.
                    guard let id = names[name], let constant = values[id].constant, LinearAlgebraOperations.packedWeights(values[id]) == nil
                    else { continue }
                    release(constant)
                }
            }
        }
    }

    /// Runs `step` now (its operation made values from `firstValue` on) and makes its outputs constants.
    private func fold(_ step: PlanStep, madeFrom firstValue: Int) throws(RuntimeError) {
        let table = UnsafeMutablePointer<UnsafeMutableRawPointer>.allocate(capacity: max(values.count, 1))
        defer { table.deallocate() }
        table.initialize(repeating: memory.empty, count: max(values.count, 1))
        // The constants nested blocks read, then the step's reads.
        for id in readsInNestedBlocks where values[id].constant != nil { table[id] = address(of: id) }
        for id in step.reads { table[id] = address(of: id) }
        var scratch: [UnsafeMutableRawPointer] = []
        defer { for pointer in scratch { pointer.deallocate() } }
        for id in step.writes {
            let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(values[id].bytes, 4), alignment: 64)
            scratch.append(pointer)
            table[id] = pointer
        }
        // Views of written values (inside nested blocks) read their root's bytes: made by this operation, as its values are.
        for id in firstValue..<values.count { if let root = aliasOf[id], step.writes.contains(root) { table[id] = table[root] + byteOffset(of: id) } }
        try step.kernel(Buffers(base: table))
        for (id, pointer) in zip(step.writes, scratch) where step.outputs.contains(id) {
            let value = values[id]
            let tensor: Tensor = value.type.isFloat
                ? Tensor(floats: Array(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: Float.self), count: value.count)), shape: value.shape, type: value.type)
                : Tensor(ints: Array(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: Int32.self), count: value.count)), shape: value.shape, type: value.type)
            values[id] = PlanValue(id: id, type: value.type, shape: value.shape, constant: tensor)
        }
    }

    private func address(of id: Int) -> UnsafeMutableRawPointer {
        if let pointer = constantAddresses[id] { return pointer }
        if let constant = values[id].constant {
            let pointer = memory.store(constant)
            constantAddresses[id] = pointer
            return pointer
        }
        if let root = aliasOf[id] { return address(of: root) }
        return memory.empty
    }

    // MARK: For operation contexts

    func add(type: ElementType, shape: [Int], constant: Tensor?, storage: ElementStorage? = nil) -> Int {
        let id = values.count
        values.append(PlanValue(id: id, type: type, shape: shape, constant: constant, storage: storage))
        // A constant gets the plan's memory only once a kernel reads it through its address
        // (`address(of:)`): weights a kernel packs into its own layout are never copied there.
        return id
    }

    func value(named name: String) -> PlanValue? { names[name].map { values[$0] } }

    /// The id of the value `name` stands for now.
    func id(named name: String) -> Int? { names[name] }

    /// The value whose bytes `id` are (itself unless it is an alias).
    func aliasRoot(_ id: Int) -> Int { aliasOf[id] ?? id }

    /// How many bytes into its root an alias starts (a slice read in place).
    private func byteOffset(of id: Int) -> Int { (aliasOffset[id] ?? 0) * values[id].storage.byteWidth }

    func constantValue(_ tensor: Tensor) -> PlanValue {
        let id = add(type: tensor.type, shape: tensor.shape, constant: tensor)
        return values[id]
    }

    func addStep(_ step: PlanStep) {
        for id in step.writes { lastWrite[aliasRoot(id)] = steps.count }
        steps.append(step)
    }

    /// A value holding `source`'s bytes under another shape (and its storage:
    /// a source held narrower than computed is read as floats only by
    /// another float type, which `OperationContext` sees to).
    func alias(_ source: PlanValue, shape: [Int], type: ElementType) -> Int {
        if let constant = source.constant {
            return add(type: type, shape: shape, constant: Tensor(type: constant.type, shape: shape, storage: constant.storage).converted(to: type))
        }
        let id = add(type: type, shape: shape, constant: nil, storage: source.isNarrow ? source.storage : nil)
        aliasOf[id] = aliasOf[source.id] ?? source.id
        aliasParent[id] = source.id
        if let inner = aliasOffset[source.id] { aliasOffset[id] = inner }
        return id
    }

    /// Whether values may be views inside their root (`view`): not in nested
    /// blocks, where a loop copies its body's results over the values they
    /// were computed from.
    var viewsAllowed: Bool { nesting == 0 }

    /// A value holding the `shape.product` elements of computed `source` from
    /// element `offset` on (a contiguous slice), read in place.
    func view(_ source: PlanValue, offset: Int, shape: [Int], type: ElementType) -> Int {
        let id = alias(source, shape: shape, type: type)
        let total = (aliasOffset[source.id] ?? 0) + offset
        if total != 0 { aliasOffset[id] = total }
        views[id] = (offset, steps.count)
        return id
    }

    /// Makes copies of the views whose root a step writes in place while the
    /// view (or a value read through it) is still to be read — a decoder
    /// layer's slice of the cache read after the next layer's update: each
    /// such view becomes a value of its own, copied where it was taken.
    private func copyOverwrittenViews(outputs: [String: Int]) {
        let taken = views.entries
        guard !taken.isEmpty else { return }
        // The last step reading each value, or anything read through it (an alias is made after its source).
        var lastRead = [Int](repeating: -1, count: values.count)
        for (index, step) in steps.enumerated() { for id in step.reads { lastRead[id] = index } }
        for id in outputs.values { lastRead[id] = steps.count }
        if let classification { lastRead[classification.probabilities] = steps.count }
        for id in values.indices.reversed() { if let source = aliasParent[id] { lastRead[source] = max(lastRead[source], lastRead[id]) } }
        let overwritten = taken.filter { id, view in
            let target = aliasRoot(id), last = min(lastRead[id], steps.count - 1)
            return last >= view.from && steps[view.from...last].contains { $0.writes.contains(target) }
        }.map(\.id)
        guard !overwritten.isEmpty else { return }
        func isMade(_ id: Int, from ancestor: Int) -> Bool {
            var current = aliasParent[id]
            while let value = current, value >= ancestor {
                if value == ancestor { return true }
                current = aliasParent[value]
            }
            return false
        }
        var copies: [Int: [PlanStep]] = [:]
        for id in overwritten {
            guard let view = views[id], let source = aliasParent[id] else { continue }
            let bytes = values[id].bytes, offset = view.offset * values[id].storage.byteWidth, start = aliasOffset[id] ?? 0
            // Values made from this view now read the copy.
            for other in values.indices where other > id && isMade(other, from: id) {
                aliasOf[other] = id
                let inner = (aliasOffset[other] ?? 0) - start
                aliasOffset[other] = inner == 0 ? nil : inner
            }
            aliasOf[id] = nil
            aliasOffset[id] = nil
            aliasParent[id] = nil
            views[id] = nil
            copies[view.from, default: []].append(PlanStep(operation: "copy of view \(id)", kind: "slice_by_index", reads: [source], writes: [id]) { buffers in
                buffers.raw(id).copyMemory(from: buffers.raw(source) + offset, byteCount: bytes)
            })
        }
        var rebuilt: [PlanStep] = []
        for (index, step) in steps.enumerated() {
            rebuilt += copies[index] ?? []
            rebuilt.append(step)
        }
        rebuilt += copies[steps.count] ?? []
        steps = rebuilt
    }

    // MARK: Nested blocks

    /// A nested block (a branch of `cond`, a `while_loop`'s condition or
    /// body) planned for the enclosing step to run: its steps, its outputs,
    /// the values it computes (which live for the whole enclosing step) and
    /// the outer values it reads.
    struct NestedPlan {
        var steps: [PlanStep]
        var outputs: [PlanValue]
        var computed: [Int]
        var outerReads: [Int]
    }

    func nested(_ block: GraphBlock, inputs: [PlanValue]) throws(RuntimeError) -> NestedPlan {
        let savedNames = names
        nesting += 1
        defer {
            names = savedNames
            nesting -= 1
        }
        let firstValue = values.count, firstStep = steps.count
        for (input, value) in zip(block.inputs, inputs) { names[input.name] = value.id }
        for (name, constant) in block.constants { names[name] = add(type: constant.type, shape: constant.shape, constant: constant) }
        for op in block.operations {
            guard op.type != "classify" else { throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "classify inside a nested block") }
            try plan(op)
        }
        var outputs: [PlanValue] = []
        for name in block.outputs {
            guard let id = names[name] else { throw .invalidParameters(model: "mlProgram", detail: "a block returns \"\(name)\", which nothing computes") }
            outputs.append(values[id])
        }
        let inner = Array(steps[firstStep...])
        steps.removeSubrange(firstStep...)
        readsInNestedBlocks.formUnion(inner.flatMap(\.reads))
        let computed = (firstValue..<values.count).filter { values[$0].constant == nil && aliasOf[$0] == nil }
        let outer = Set(inner.flatMap(\.reads).map(aliasRoot)).filter { $0 < firstValue && values[$0].constant == nil }
        return NestedPlan(steps: inner, outputs: outputs, computed: computed, outerReads: outer.sorted())
    }

    // MARK: Classification

    private func classify(_ op: GraphOperation) throws(RuntimeError) {
        guard op.outputs.count == 2, case .value(let probabilitiesName)? = op.arguments["probabilities"]?.first,
              let probabilities = names[probabilitiesName] else {
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "classify needs computed probabilities")
        }
        let classes: Tensor
        switch op.arguments["classes"]?.first {
        case .constant(let tensor)?: classes = tensor
        case .value(let name)?:
            guard let id = names[name], let tensor = values[id].constant else { fallthrough }
            classes = tensor
        case nil: throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "classify needs constant classes")
        }
        let labels: ClassLabels = classes.type == .string ? .strings(classes.strings) : .int64s(classes.ints.map(Int64.init))
        classification = TensorPlan.Classification(probabilities: probabilities, labels: labels,
                                                   labelOutput: op.outputs[0].name, probabilitiesOutput: op.outputs[1].name)
        // The outputs name the probabilities, so that a function returning them finds a value.
        names[op.outputs[0].name] = probabilities
        names[op.outputs[1].name] = probabilities
    }

    // MARK: Liveness and the arena

    /// Drops the steps that only copy (`PlanStep.unreadRemovable`) whose
    /// results nothing reads any more: kernels read those elements where they
    /// lie (`MatrixStack`).
    private func removeUnreadCopies(outputs: [String: Int]) {
        guard steps.contains(where: \.unreadRemovable) else { return }
        // By root id: a decoder's step plan walks every step here, and hashing the ids showed.
        var needed = [Bool](repeating: false, count: values.count)
        for id in outputs.values { needed[aliasRoot(id)] = true }
        for id in readsInNestedBlocks { needed[aliasRoot(id)] = true }
        if let classification { needed[aliasRoot(classification.probabilities)] = true }
        var kept: [PlanStep] = []
        kept.reserveCapacity(steps.count)
        for step in steps.reversed() {
            if step.unreadRemovable, !step.writes.contains(where: { needed[aliasRoot($0)] }) { continue }
            for id in step.reads { needed[aliasRoot(id)] = true }
            kept.append(step)
        }
        steps = kept.reversed()
    }

    /// Value ids in groups (a step's values born or dying), each group in
    /// the order given: two flat arrays, where an array per group cost an
    /// allocation each at every plan (a decoder plans every step).
    private struct Groups {
        private var starts: [Int]
        private var ids: [Int]

        /// `ids` in groups `0 ..< groups`, by `group` (a counting sort).
        init(_ ids: [Int], groups: Int, by group: (Int) -> Int) {
            starts = [Int](repeating: 0, count: groups + 1)
            for id in ids { starts[group(id) + 1] += 1 }
            for index in 0..<groups { starts[index + 1] += starts[index] }
            var next = starts
            self.ids = [Int](repeating: 0, count: ids.count)
            for id in ids {
                let index = group(id)
                self.ids[next[index]] = id
                next[index] += 1
            }
        }

        subscript(group: Int) -> ArraySlice<Int> { ids[starts[group]..<starts[group + 1]] }
    }

    private func finish(inputs: [String: Int], outputs: [String: Int]) -> TensorPlan {
        copyOverwrittenViews(outputs: outputs)
        removeUnreadCopies(outputs: outputs)
        let end = steps.count
        var lastUse = [Int](repeating: -1, count: values.count)
        var firstDefinition = [Int](repeating: end, count: values.count)
        for id in inputs.values { firstDefinition[aliasRoot(id)] = -1; lastUse[aliasRoot(id)] = end }
        for (index, step) in steps.enumerated() {
            for id in step.reads { lastUse[aliasRoot(id)] = max(lastUse[aliasRoot(id)], index) }
            for id in step.writes {
                firstDefinition[aliasRoot(id)] = min(firstDefinition[aliasRoot(id)], index)
                lastUse[aliasRoot(id)] = max(lastUse[aliasRoot(id)], index)
            }
        }
        for id in outputs.values { lastUse[aliasRoot(id)] = end }
        if let classification { lastUse[aliasRoot(classification.probabilities)] = end }
        // Values in the arena: not constants, roots of their aliases.
        var offsets = [Int?](repeating: nil, count: values.count)
        var free: [(offset: Int, size: Int)] = []
        var top = 0
        func allocate(_ size: Int) -> Int {
            if let index = free.firstIndex(where: { $0.size >= size }) {
                let block = free.remove(at: index)
                if block.size > size { free.append((block.offset + size, block.size - size)) }
                return block.offset
            }
            defer { top += size }
            return top
        }
        // The free list stays sorted by offset; a released block joins its neighbours.
        func release(_ offset: Int, _ size: Int) {
            var index = free.firstIndex { $0.offset > offset } ?? free.count
            free.insert((offset, size), at: index)
            if index + 1 < free.count, free[index].offset + free[index].size == free[index + 1].offset {
                free[index].size += free[index + 1].size
                free.remove(at: index + 1)
            }
            if index > 0, free[index - 1].offset + free[index - 1].size == free[index].offset {
                free[index - 1].size += free[index].size
                free.remove(at: index)
                index -= 1
            }
        }
        func size(_ id: Int) -> Int { (max(values[id].bytes, 4) + 63) / 64 * 64 }
        // States get the arena's end: the engine binds their storage in place (their slots are a fallback it
        // fills by copying), so those pages are neither zeroed nor touched (a 7B decoder's caches: 0.5 GB).
        let states = Set(stateInputs.values)
        let inArena = values.indices.filter { values[$0].constant == nil && aliasOf[$0] == nil && lastUse[$0] >= 0 && !states.contains($0) }
        // Values by the step that makes them (the inputs before the first: group 0) and by their last one, in id order.
        let born = Groups(inArena, groups: end + 2) { firstDefinition[$0] + 1 }, dies = Groups(inArena, groups: end + 1) { lastUse[$0] }
        for id in born[0] { offsets[id] = allocate(size(id)) }
        for index in 0..<end {
            for id in born[index + 1] { offsets[id] = allocate(size(id)) }
            for id in dies[index] { if let offset = offsets[id] { release(offset, size(id)) } }
        }
        let zeroedBytes = top
        for id in stateInputs.values.sorted() where values[id].constant == nil {
            offsets[id] = top
            top += size(id)
        }
        for id in values.indices where offsets[id] == nil {
            if let source = aliasOf[id] { offsets[id] = offsets[source].map { $0 + byteOffset(of: id) } }
        }
        // The constants kernels read get the plan's memory now.
        var read = [Bool](repeating: false, count: values.count)
        for step in steps { for id in step.reads { read[id] = true } }
        for id in readsInNestedBlocks { read[id] = true }
        for id in outputs.values { read[id] = true }
        for id in inputs.values { read[id] = true }
        if let classification { read[classification.probabilities] = true }
        for id in values.indices where read[id] && values[id].constant != nil { _ = address(of: id) }
        var addresses: [Int: UnsafeMutableRawPointerBox] = [:]
        for (id, pointer) in constantAddresses { addresses[id] = UnsafeMutableRawPointerBox(pointer: pointer) }
        for (id, source) in aliasOf.entries where offsets[source] == nil {
            addresses[id] = addresses[source]
        }
        let stateViews = stateInputs.mapValues { id in values.indices.filter { aliasOf[$0] == id } }
        return TensorPlan(values: values, steps: steps, offsets: offsets, constantAddresses: addresses, arenaBytes: max(top, 64), zeroedBytes: zeroedBytes,
                          memory: memory, inputs: inputs, outputs: outputs, classification: classification, states: stateInputs,
                          stateViews: stateViews, viewOffsets: Dictionary(uniqueKeysWithValues: aliasOffset.entries.map { ($0.id, byteOffset(of: $0.id)) }))
    }
}
