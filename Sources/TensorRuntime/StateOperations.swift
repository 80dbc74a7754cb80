import ModelFeatures

/// States of stateful programs: `read_state` copies the state's value;
/// `coreml_update_state` writes a value into it (kept between predictions
/// by the engine's `ProgramState`). A state declared fp16 is held as halves
/// (`ElementType.persistentStorage`): read as floats, written rounded.
enum StateOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "read_state": OperationDefinition(["input"], hasEffects: true) { context throws(RuntimeError) in
            let state = try context.storedInput("input")
            let out = try context.output(state.shape)
            let from = state.id, count = state.count, storage = state.storage
            context.run(reads: [state], writes: [out]) { buffers in
                ElementConversion.widen(buffers.raw(from), storage: storage, count: count, into: buffers.raw(out))
            }
        }.withFacts(readStateFacts),
        "coreml_update_state": OperationDefinition(["state", "value"], hasEffects: true) { context throws(RuntimeError) in
            try write(context, state: try context.storedInput("state"), value: try context.input("value"))
        }.withFacts(writeFacts("value")),
        // What coreml_update_state is serialized as: a write, then a read_state of the new value.
        "write_state": OperationDefinition(["input", "data"], hasEffects: true) { context throws(RuntimeError) in
            try write(context, state: try context.storedInput("input"), value: try context.input("data"))
        }.withFacts(writeFacts("data")),
    ]

    /// Operations only the engine's passes make (a program file naming one is refused).
    static let internalDefinitions: [String: OperationDefinition] = [
        // A read_state after which nothing writes the state (Fusion/StateFusion.swift): its bytes, no copy. Its plan
        // is an alias of the state's value, the same at every plan: the memo takes it (a decoder's step, 2 a layer).
        "read_state_view": OperationDefinition(["input"], hasEffects: true, replayable: true) { context throws(RuntimeError) in
            let state = try context.storedInput("input")
            try context.alias(state, shape: state.shape)
        }.withFacts(readStateFacts),
        // read_state → slice_update → write_state of one state (Fusion/StateFusion.swift): the update
        // written into the state where it lives, rounded to fp16 when the program's cast back did that. Where it
        // writes (begin, end) is read at run time, so its plan is a function of its inputs' types and shapes: the
        // memo takes it (a decoder's step writes its position's keys and values, 2 a layer, at another offset each).
        "update_state_slice": OperationDefinition(["state", "update", "begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask",
                                                   "round_to_half"], hasEffects: true, replayable: true,
                                                  readAtRunTime: ["begin", "end"]) { context throws(RuntimeError) in
            try updateSlice(context)
        }.withFacts(writeFacts("state")),
    ]

    private static func write(_ context: OperationContext, state: PlanValue, value: PlanValue) throws(RuntimeError) {
        guard state.shape == value.shape else { throw context.invalid("a value of shape \(value.shape) for a state of shape \(state.shape)") }
        let to = state.id, from = value.id, count = value.count, storage = state.storage
        let outputs = context.op.outputs.count
        let out = outputs > 0 ? try context.output(value.shape) : nil
        context.run(reads: [value], writes: [to] + (out.map { [$0] } ?? [])) { buffers in
            ElementConversion.narrow(buffers.floats(from), count: count, into: buffers.raw(to), storage: storage)
            if let out { buffers.raw(out).copyMemory(from: buffers.raw(from), byteCount: count * 4) }
        }
    }

    /// Writes `update` into the slice of state `state` that begin, end,
    /// stride and the masks select (`slice_update`'s parameters), in place.
    /// Begin and end are read per prediction, constants (folded from a
    /// mask's shape) as computed ones (a cache position given as an input):
    /// a slice they select that does not hold the update fails the prediction, naming the operation.
    private static func updateSlice(_ context: OperationContext) throws(RuntimeError) {
        let state = try context.storedInput("state"), update = try context.input("update")
        let begin = try context.input("begin"), end = try context.input("end")
        guard update.isFloat, state.isFloat else { throw context.invalid("a float update is needed for a float state") }
        let to = state.id, values = update.id, half = try context.bool("round_to_half", false)
        let halves = state.storage == .float16
        @Sendable func write(_ buffers: Buffers, offset: Int, strides: [Int], shape: [Int]) {
            let target = buffers.floats(to), source = buffers.floats(values)
            let step = strides.last ?? 0
            var next = 0
            if halves {
                // Into a state held as halves: rounded as it is stored.
                let raw = buffers.raw(to)
                Shapes.walk(shape, [strides]) { _, offsets, n in
                    if step == 1 {
                        ElementConversion.narrow(source + next, count: n, into: raw + (offset + offsets[0]) * 2)
                    } else {
                        for k in 0..<n { ElementConversion.storeHalf(source[next + k], raw, offset + offsets[0] + k * step) }
                    }
                    next += n
                }
                return
            }
            Shapes.walk(shape, [strides]) { _, offsets, n in
                for k in 0..<n {
                    target[offset + offsets[0] + k * step] = half ? ElementwiseOperations.roundedToHalf(source[next + k]) : source[next + k]
                }
                next += n
            }
        }
        let slice = try ShapeOperations.RunTimeSlice(context, shape: state.shape, begin: begin, end: end)
        let count = update.count
        context.run(reads: [update, begin, end], writes: [to]) { buffers throws(RuntimeError) in
            let found = try slice.geometry(buffers, count: count)
            write(buffers, offset: found.offset, strides: found.strides, shape: found.shape)
        }
    }
}

// MARK: Facts

extension StateOperations {
    /// A read of a state: the tensor it wraps.
    static let readStateFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        var state = try context.input("input")
        state.isState = false
        return [state]
    }

    /// A write into a state: each result (if any) is the value written, `key`.
    static func writeFacts(_ key: String) -> OperationDefinition.FactsRule {
        { context throws(RuntimeError) in
            var value = try context.input(key)
            value.isState = false
            return context.op.outputs.map { _ in value }
        }
    }
}
