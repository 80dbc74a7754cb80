import ModelFeatures

/// States of stateful programs: `read_state` copies the state's value;
/// `coreml_update_state` writes a value into it (kept between predictions
/// by the engine's `ProgramState`).
enum StateOperations {
    static let definitions: [String: OperationDefinition] = [
        "read_state": OperationDefinition(["input"], hasEffects: true) { context throws(RuntimeError) in
            let state = try context.input("input")
            let out = try context.output(state.shape)
            let from = state.id, count = state.count
            context.run(reads: [state], writes: [out]) { buffers in
                buffers.raw(out).copyMemory(from: buffers.raw(from), byteCount: count * 4)
            }
        },
        "coreml_update_state": OperationDefinition(["state", "value"], hasEffects: true) { context throws(RuntimeError) in
            try write(context, state: try context.input("state"), value: try context.input("value"))
        },
        // What coreml_update_state is serialized as: a write, then a read_state of the new value.
        "write_state": OperationDefinition(["input", "data"], hasEffects: true) { context throws(RuntimeError) in
            try write(context, state: try context.input("input"), value: try context.input("data"))
        },
    ]

    private static func write(_ context: OperationContext, state: PlanValue, value: PlanValue) throws(RuntimeError) {
        guard state.shape == value.shape else { throw context.invalid("a value of shape \(value.shape) for a state of shape \(state.shape)") }
        let to = state.id, from = value.id, count = value.count
        let outputs = context.op.outputs.count
        let out = outputs > 0 ? try context.output(value.shape) : nil
        context.run(reads: [value], writes: [to] + (out.map { [$0] } ?? [])) { buffers in
            buffers.raw(to).copyMemory(from: buffers.raw(from), byteCount: count * 4)
            if let out { buffers.raw(out).copyMemory(from: buffers.raw(from), byteCount: count * 4) }
        }
    }
}
