import ModelFeatures

/// `cond` and `while_loop`: nested blocks planned with the enclosing
/// function (their values in the same arena, alive for the step that runs
/// them), run by one step that tests the condition at prediction. A `cond`
/// whose branches return different shapes, or a loop whose variables change
/// shape, waits for its values: planned when they are known (as constants,
/// a loop then unrolled while planning).
enum ControlFlowOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "cond": OperationDefinition(["pred"], hasEffects: true) { context throws(RuntimeError) in try condition(context) },
        "while_loop": OperationDefinition(["loop_vars"], hasEffects: true) { context throws(RuntimeError) in try loop(context) },
    ]

    /// Copies `count` 4-byte elements.
    @inline(__always)
    static func copy(_ buffers: Buffers, from: Int, to: Int, count: Int) {
        if from != to { buffers.raw(to).copyMemory(from: buffers.raw(from), byteCount: count * 4) }
    }

    private static func condition(_ context: OperationContext) throws(RuntimeError) {
        let predicate = try context.input("pred")
        guard context.op.blocks.count == 2 else { throw context.invalid("cond needs two blocks, has \(context.op.blocks.count)") }
        if let known = predicate.constant?.scalar {
            // Known now: only the branch taken is planned.
            let taken = try context.nested(context.op.blocks[known != 0 ? 0 : 1])
            guard taken.outputs.count == context.op.outputs.count else {
                throw context.invalid("the branch returns \(taken.outputs.count) values for \(context.op.outputs.count) outputs")
            }
            if taken.steps.isEmpty, taken.outputs.allSatisfy({ $0.constant != nil }) {
                for output in taken.outputs { if let constant = output.constant { context.output(constant: constant) } }
                return
            }
            var outputs: [Int] = []
            for output in taken.outputs { outputs.append(try context.output(output.shape)) }
            let sources = taken.outputs.map(\.id), counts = taken.outputs.map(\.count), steps = taken.steps, produced = outputs
            context.run(reads: Set(taken.outerReads + sources).sorted(), outputs: outputs, scratch: taken.computed) { buffers throws(RuntimeError) in
                for step in steps { try step.kernel(buffers) }
                for index in produced.indices { copy(buffers, from: sources[index], to: produced[index], count: counts[index]) }
            }
            return
        }
        let yes = try context.nested(context.op.blocks[0]), no = try context.nested(context.op.blocks[1])
        guard yes.outputs.count == context.op.outputs.count, no.outputs.count == context.op.outputs.count else {
            throw context.invalid("the branches return \(yes.outputs.count) and \(no.outputs.count) values for \(context.op.outputs.count) outputs")
        }
        var outputs: [Int] = []
        for (a, b) in zip(yes.outputs, no.outputs) {
            guard a.type.isFloat == b.type.isFloat else {
                throw context.unsupported("branches returning different types (\(a.type) and \(b.type)) are not supported")
            }
            guard a.shape == b.shape else { throw context.runTimeValueNeeded("pred") }
            outputs.append(try context.output(a.shape))
        }
        // A branch may return an outer value as it is: read too.
        let reads = Set([predicate.id] + yes.outerReads + no.outerReads + yes.outputs.map(\.id) + no.outputs.map(\.id)).sorted()
        let pairs = Array(zip(yes.outputs.map(\.id), no.outputs.map(\.id)))
        let counts = yes.outputs.map(\.count)
        let flag = predicate.id, isFloat = predicate.isFloat
        let yesSteps = yes.steps, noSteps = no.steps
        let produced = outputs
        context.run(reads: reads, outputs: outputs, scratch: yes.computed + no.computed) { buffers throws(RuntimeError) in
            let taken = isFloat ? buffers.floats(flag)[0] != 0 : buffers.ints(flag)[0] != 0
            for step in taken ? yesSteps : noSteps { try step.kernel(buffers) }
            for (index, pair) in pairs.enumerated() {
                copy(buffers, from: taken ? pair.0 : pair.1, to: produced[index], count: counts[index])
            }
        }
    }

    private static func loop(_ context: OperationContext) throws(RuntimeError) {
        let initial = try context.list("loop_vars")
        guard context.op.blocks.count == 2 else { throw context.invalid("while_loop needs a condition and a body block") }
        if initial.allSatisfy({ $0.constant != nil }), let results = try unrolled(context, initial) {
            for result in results { if let constant = result.constant { context.output(constant: constant) } }
            return
        }
        let slots = initial.map { context.scratch($0.type, shape: $0.shape) }
        let condition = try context.nested(context.op.blocks[0], inputs: slots)
        let body = try context.nested(context.op.blocks[1], inputs: slots)
        guard let flag = condition.outputs.first, condition.outputs.count == 1 else { throw context.invalid("the condition must return one value") }
        guard body.outputs.count == slots.count else {
            throw context.invalid("the body returns \(body.outputs.count) values for \(slots.count) loop variables")
        }
        for (slot, next) in zip(slots, body.outputs) where slot.shape != next.shape {
            throw context.runTimeValueNeeded("loop_vars")
        }
        // The body's results are staged before they become the next iteration's variables.
        let staged = slots.map { context.scratch($0.type, shape: $0.shape) }
        var outputs: [Int] = []
        for slot in slots { outputs.append(try context.output(slot.shape)) }
        let reads = Set(initial.map(\.id) + condition.outerReads.filter { !slots.map(\.id).contains($0) }
                        + body.outerReads.filter { !slots.map(\.id).contains($0) }).sorted()
        let starts = initial.map(\.id), slotIDs = slots.map(\.id), nextIDs = body.outputs.map(\.id), stagedIDs = staged.map(\.id)
        let counts = slots.map(\.count), produced = outputs
        let flagID = flag.id, flagFloat = flag.isFloat
        let conditionSteps = condition.steps, bodySteps = body.steps
        let scratch = slotIDs + stagedIDs + condition.computed + body.computed
        context.run(reads: reads, outputs: outputs, scratch: scratch) { buffers throws(RuntimeError) in
            for index in slotIDs.indices { copy(buffers, from: starts[index], to: slotIDs[index], count: counts[index]) }
            while true {
                for step in conditionSteps { try step.kernel(buffers) }
                let going = flagFloat ? buffers.floats(flagID)[0] != 0 : buffers.ints(flagID)[0] != 0
                if !going { break }
                for step in bodySteps { try step.kernel(buffers) }
                for index in slotIDs.indices { copy(buffers, from: nextIDs[index], to: stagedIDs[index], count: counts[index]) }
                for index in slotIDs.indices { copy(buffers, from: stagedIDs[index], to: slotIDs[index], count: counts[index]) }
            }
            for index in slotIDs.indices { copy(buffers, from: slotIDs[index], to: produced[index], count: counts[index]) }
        }
    }

    /// Iterations a loop of known values is unrolled to at most while planning.
    static let unrollLimit = 100_000

    /// The loop run while planning, when its variables and everything its
    /// blocks read are known: the final variables, or `nil` when some value
    /// is computed at run time (then the loop runs as a step).
    private static func unrolled(_ context: OperationContext, _ initial: [PlanValue]) throws(RuntimeError) -> [PlanValue]? {
        var current = initial
        for _ in 0..<unrollLimit {
            let condition = try context.nested(context.op.blocks[0], inputs: current)
            guard condition.steps.isEmpty, let flag = condition.outputs.first?.constant?.scalar else { return nil }
            if flag == 0 { return current }
            let body = try context.nested(context.op.blocks[1], inputs: current)
            guard body.steps.isEmpty, body.outputs.count == current.count, body.outputs.allSatisfy({ $0.constant != nil }) else { return nil }
            current = body.outputs
        }
        throw context.unsupported("a loop of known values running more than \(unrollLimit) iterations")
    }
}
