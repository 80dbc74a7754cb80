import Testing
@testable import TensorRuntime

/// `topk` (and the NeuralNetwork `topK` layer lowered onto it) orders equal
/// values by their index, lowest first, as a stable sort does (NumPy's
/// `argsort(kind="stable")`). coremltools' `test_topk_cpu` compares with
/// NumPy's default `argsort`, whose SIMD sort on x86 (NumPy 2.x, AVX2 /
/// AVX-512) orders ties arbitrarily: 29 % of 2,000 random 9-value rows with
/// ties differed from the stable order there, and every case of the test's
/// shapes agreed with the stable one (issue 37's "[0 2 7], got [0 2 5]").
@Suite("topk with ties")
struct TopKTiesTests {
    static func run(_ values: [Float], k: Int, ascending: Bool) throws -> (values: [Float], indices: [Int32]) {
        let n = values.count
        let operation = GraphOperation(type: "topk", arguments: [
            "x": [.value("x")], "k": [.constant(Tensor(ints: [Int32(k)], shape: []))],
            "ascending": [.constant(Tensor(ints: [ascending ? 1 : 0], shape: [], type: .bool))],
        ], outputs: [("v", ValueType(element: .float32, shape: [k])), ("i", ValueType(element: .int32, shape: [k]))], blocks: [])
        let function = GraphFunction(name: "main", inputs: [("x", ValueType(element: .float32, shape: [n]))],
                                     block: GraphBlock(operations: [operation], outputs: ["v", "i"], constants: [:]))
        let plan = try Planner.plan(function, shapes: ["x": [n]], threads: 1)
        let state = TensorState(plan: plan)
        let x = try #require(plan.inputs["x"])
        for (index, value) in values.enumerated() { state.buffers.floats(x)[index] = value }
        try state.run()
        let v = try #require(plan.outputs["v"]), i = try #require(plan.outputs["i"])
        return (Array(UnsafeBufferPointer(start: state.buffers.floats(v), count: k)),
                Array(UnsafeBufferPointer(start: state.buffers.ints(i), count: k)))
    }

    @Test("equal values come in index order, largest or smallest first")
    func tiesInIndexOrder() throws {
        let values: [Float] = [8, 3, 8, 1, 5, 3, 0, 8, 1]
        let top = try Self.run(values, k: 4, ascending: false)
        #expect(top.indices == [0, 2, 7, 4])
        #expect(top.values == [8, 8, 8, 5])
        let bottom = try Self.run(values, k: 5, ascending: true)
        #expect(bottom.indices == [6, 3, 8, 1, 5])
        #expect(bottom.values == [0, 1, 1, 3, 3])
    }
}
