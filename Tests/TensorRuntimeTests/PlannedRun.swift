import Testing
@testable import TensorRuntime

/// A function planned for one float32 input `x`, run once: what the split
/// tests read their outputs from.
struct PlannedRun {
    let plan: TensorPlan
    let state: TensorState

    /// Plans `function` for `x` of `shape` on `threads` threads, copies `input` into `x` and runs it.
    init(_ function: GraphFunction, input: [Float], shape: [Int], threads: Int) throws {
        plan = try Planner.plan(function, shapes: ["x": shape], threads: threads)
        state = TensorState(plan: plan)
        let x = try #require(plan.inputs["x"])
        input.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { state.table[x].copyMemory(from: base, byteCount: bytes.count) }
        }
        try state.run()
    }

    /// The values of output `name`.
    func floats(_ name: String) throws -> [Float] {
        let id = try #require(plan.outputs[name])
        return Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count))
    }

    /// Every output by name.
    func outputs() throws -> [String: [Float]] {
        var result: [String: [Float]] = [:]
        for name in plan.outputs.keys { result[name] = try floats(name) }
        return result
    }
}
