import Testing
@testable import TensorRuntime

/// The decoder fusions (Fusion/DecoderFusion.swift) on the Llama-shaped
/// fixture converted as Apple documents (Fixtures/Models/LlamaDecoderInt4,
/// made by Fixtures/llama_decoder.py): its RMSNorms and rotary embeddings
/// become one operation each, and the fused plans compute the unfused
/// plans' logits bit for bit, for a prompt and a one-token step.
@Suite("Decoder fusions")
struct DecoderFusionTests {
    static let path = "Models/LlamaDecoderInt4.mlpackage"
    /// Every rule but the decoder fusions.
    static let otherRules = ConvolutionFusion.rules + ProductFusion.rules + AttentionFusion.rules + StateFusion.rules

    @Test("the fixture's 5 RMSNorms, 4 rotary embeddings, 2 SwiGLU gates and 4 key/value head repeats are one operation each")
    func fusedCounts() async throws {
        let function = try await AttentionFusionTests.graph(Self.path)
        let before = FusionPass.run(function.block, rules: Self.otherRules).operations.map(\.type)
        let after = FusionPass.run(function.block).operations.map(\.type)
        // Two layers: a norm before attention and before the MLP, and the final norm; rotary on q and k.
        #expect(after.filter { $0 == "rms_norm" }.count == 5)
        #expect(after.filter { $0 == "rotary_embedding" }.count == 4)
        #expect(after.filter { $0 == "silu_mul" }.count == 2)
        #expect(after.filter { $0 == "repeat_heads" }.count == 4)
        #expect(!after.contains("tile"))
        for gone in ["pow", "rsqrt", "reduce_mean", "silu"] { #expect(!after.contains(gone), "\(gone) left") }
        #expect(before.count - after.count == 5 * 5 + 4 * 6 + 2 * 1 + 4 * 5, "\(before.count) → \(after.count) operations")
    }

    @Test("fused plans give the unfused plans' logits exactly, for a prompt and a step, at 1 and 2 threads",
          arguments: [(3, 3), (1, 4), (5, 9)])
    func sameLogits(q: Int, end: Int) async throws {
        let function = try await AttentionFusionTests.graph(Self.path)
        let shapes = ["inputIds": [1, q], "causalMask": [1, 1, q, end]]
        for threads in [1, 2] {
            let unfused = try await AttentionFusionTests.run(function, FusionPass.run(function.block, rules: Self.otherRules), shapes: shapes, threads: threads)
            let fused = try await AttentionFusionTests.run(function, FusionPass.run(function.block), shapes: shapes, threads: threads)
            let want = try #require(unfused["logits"]), got = try #require(fused["logits"])
            #expect(want.count == q * 96 || want.count == 96)
            #expect(want == got, "q \(q) end \(end), \(threads) threads")
        }
    }

    /// What the next session's plans for every length (docs/runtime.md) rest on, and what keeps a step's plan short.
    @Test("a step plans anew only what follows the mask's length: attention, its cache views and head repeats, the rotary tables' rows and the shape arithmetic folded from the mask")
    func stepPlansAnew() async throws {
        var function = try await AttentionFusionTests.graph(Self.path)
        function.block = FusionPass.run(function.block)
        let memo = PlanMemo()
        var last: TensorPlan?
        for end in 5...7 {
            last = try Planner.plan(function, shapes: ["inputIds": [1, 1], "causalMask": [1, 1, 1, end]], memo: memo)
        }
        let plan = try #require(last)
        let anew = Dictionary(plan.plannedAnew.map { ($0, 1) }, uniquingKeysWith: +)
        // Two layers: per layer one attention, two cache views (keys, values) and their head repeats; the rotary
        // tables' rows (cos, sin) and the arithmetic from the mask's shape once. The state reads (views of the
        // caches) and the cache updates (their offsets read at run time) are taken.
        #expect(anew == ["scaled_dot_product_attention": 2, "slice_by_index": 4 + 2, "repeat_heads": 4,
                         "shape": 1, "cast": 2, "gather": 1, "sub": 1, "expand_dims": 2, "concat": 6],
                "\(anew.sorted { $0.key < $1.key })")
        #expect(plan.reusedOperations + plan.plannedAnew.count == function.block.operations.count)
    }

    /// x → pow → reduce_mean → add(ε) → rsqrt → mul(x, r) → mul(weight), returning `outputs`.
    static func norm(outputs: [String], weight: Tensor = Tensor(floats: (0..<8).map { 1 + Float($0) / 10 }, shape: [8])) -> GraphBlock {
        let type = ValueType(element: .float32, shape: [2, 8]), column = ValueType(element: .float32, shape: [2, 1])
        func op(_ kind: String, _ arguments: [String: [GraphArgument]], _ output: String, _ outputType: ValueType) -> GraphOperation {
            GraphOperation(type: kind, arguments: arguments, outputs: [(output, outputType)], blocks: [])
        }
        return GraphBlock(operations: [
            op("pow", ["x": [.value("x")], "y": [.constant(Tensor(floats: [2], shape: []))]], "p", type),
            op("reduce_mean", ["x": [.value("p")], "axes": [.constant(Tensor(ints: [-1], shape: [1]))],
                               "keep_dims": [.constant(Tensor(ints: [1], shape: [], type: .bool))]], "m", column),
            op("add", ["x": [.value("m")], "y": [.constant(Tensor(floats: [1e-5], shape: []))]], "a", column),
            op("rsqrt", ["x": [.value("a")]], "r", column),
            op("mul", ["x": [.value("r")], "y": [.value("x")]], "s", type),
            op("mul", ["x": [.value("s")], "y": [.constant(weight)]], "o", type),
        ], outputs: outputs, constants: [:])
    }

    @Test("a SwiGLU gate fuses and computes the chain exactly, with equal shapes and broadcast, either operand order", arguments: [[2, 8], [1, 8], [2, 1]])
    func gate(yShape: [Int]) throws {
        let x = ValueType(element: .float32, shape: [2, 8]), y = ValueType(element: .float32, shape: yShape.map { Optional($0) })
        for (first, second) in [("s", "y"), ("y", "s")] {
            let block = GraphBlock(operations: [
                GraphOperation(type: "silu", arguments: ["x": [.value("x")]], outputs: [("s", x)], blocks: []),
                GraphOperation(type: "mul", arguments: ["x": [.value(first)], "y": [.value(second)]], outputs: [("o", x)], blocks: []),
            ], outputs: ["o"], constants: [:])
            let function = GraphFunction(name: "main", inputs: [("x", x), ("y", y)], block: block)
            let fused = FusionPass.run(block)
            #expect(fused.operations.map(\.type) == ["silu_mul"])
            let shapes = ["x": [2, 8], "y": yShape]
            #expect(try AttentionFusionTests.compute(function, fused, shapes: shapes, threads: 1)
                    == (try AttentionFusionTests.compute(function, block, shapes: shapes, threads: 1)))
        }
    }

    @Test("an RMSNorm fuses with its operands in either order and computes the chain exactly; one whose scale is read elsewhere does not")
    func normAlone() throws {
        // A weight per column, and one broadcast to every column.
        for weight in [Tensor(floats: (0..<8).map { 1 + Float($0) / 10 }, shape: [8]), Tensor(floats: [0.75], shape: [1])] {
            let function = GraphFunction(name: "main", inputs: [("x", ValueType(element: .float32, shape: [2, 8]))],
                                         block: Self.norm(outputs: ["o"], weight: weight))
            let fused = FusionPass.run(function.block)
            #expect(fused.operations.map(\.type) == ["rms_norm"])
            let shapes = ["x": [2, 8]]
            #expect(try AttentionFusionTests.compute(function, fused, shapes: shapes, threads: 1)
                    == (try AttentionFusionTests.compute(function, function.block, shapes: shapes, threads: 1)))
        }
        // r also returned: nothing fuses.
        #expect(!FusionPass.run(Self.norm(outputs: ["o", "r"])).operations.contains { $0.type == "rms_norm" })
    }

    @Test("a rotary embedding fuses and computes the chain exactly, with a table per column and one broadcast along the row",
          arguments: [[3, 4], [3, 1]])
    func rotaryAlone(tableShape: [Int]) throws {
        let x = ValueType(element: .float32, shape: [1, 2, 3, 4]), half = ValueType(element: .float32, shape: [1, 2, 3, 2])
        let ints = { (values: [Int32]) in GraphArgument.constant(Tensor(ints: values, shape: [values.count])) }
        let bools = { (values: [Int32]) in GraphArgument.constant(Tensor(ints: values, shape: [values.count], type: .bool)) }
        func op(_ kind: String, _ arguments: [String: [GraphArgument]], _ output: String, _ type: ValueType) -> GraphOperation {
            GraphOperation(type: kind, arguments: arguments, outputs: [(output, type)], blocks: [])
        }
        let block = GraphBlock(operations: [
            op("mul", ["x": [.value("x")], "y": [.value("cos")]], "xc", x),
            op("slice_by_index", ["x": [.value("x")], "begin": [ints([0, 0, 0, 2])], "end": [ints([1, 2, 3, 4])], "end_mask": [bools([1, 1, 1, 1])]], "hi", half),
            op("mul", ["x": [.value("hi")], "y": [.constant(Tensor(floats: [-1], shape: []))]], "neg", half),
            op("slice_by_index", ["x": [.value("x")], "begin": [ints([0, 0, 0, 0])], "end": [ints([1, 2, 3, 2])], "end_mask": [bools([1, 1, 1, 0])]], "lo", half),
            op("concat", ["values": [.value("neg"), .value("lo")], "axis": [.constant(Tensor(ints: [-1], shape: []))],
                          "interleave": [.constant(Tensor(ints: [0], shape: [], type: .bool))]], "rot", x),
            op("mul", ["x": [.value("rot")], "y": [.value("sin")]], "rs", x),
            op("add", ["x": [.value("xc")], "y": [.value("rs")]], "o", x),
        ], outputs: ["o"], constants: [:])
        let table = ValueType(element: .float32, shape: tableShape.map { Optional($0) })
        let function = GraphFunction(name: "main", inputs: [("x", x), ("cos", table), ("sin", table)], block: block)
        let fused = FusionPass.run(block)
        #expect(fused.operations.map(\.type) == ["rotary_embedding"])
        let shapes = ["x": [1, 2, 3, 4], "cos": tableShape, "sin": tableShape]
        let want = try AttentionFusionTests.compute(function, block, shapes: shapes, threads: 1)
        #expect(try AttentionFusionTests.compute(function, fused, shapes: shapes, threads: 1) == want)
        #expect(want["o"]?.count == 24)
    }
}
