import FixtureSupport
import ModelFeatures
import Testing
@testable import TensorRuntime

/// The fusions around matrix products with constant weights (GPT-2's
/// matmul + bias, BERT's and ViT's linear, then GELU and the residual sum):
/// what becomes one `fused_linear`, and that it computes what the unfused
/// program does, at 1 and 2 threads.
@Suite("Fusions of matrix products")
struct ProductFusionTests {
    /// x's shape: 6 rows of `width` values.
    static func shape(_ width: Int) -> [Int] { [2, 3, width] }

    static func value(_ name: String, _ width: Int = 8) -> (name: String, type: ValueType) {
        (name, ValueType(element: .float32, shape: shape(width)))
    }

    /// x → matmul(x, W) → add(bias) → gelu(mode) → add(x), returning `outputs`; W is `width` × `width`.
    static func gpt2Block(mode: String, outputs: [String], width: Int = 8) -> GraphBlock {
        let weight = Tensor(floats: (0..<(width * width)).map { Float($0 % 9) * 0.07 - 0.3 }, shape: [width, width])
        func value(_ name: String) -> (name: String, type: ValueType) { Self.value(name, width) }
        let operations = [
            GraphOperation(type: "matmul", arguments: ["x": [.value("x")], "y": [.value("w")]], outputs: [value("m")], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("m")], "y": [.value("b")]], outputs: [value("a")], blocks: []),
            GraphOperation(type: "gelu", arguments: ["x": [.value("a")],
                                                     "mode": [.constant(Tensor(type: .string, shape: [], storage: .strings([mode])))]],
                           outputs: [value("g")], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("x")], "y": [.value("g")]], outputs: [value("r")], blocks: []),
        ]
        return GraphBlock(operations: operations, outputs: outputs,
                          constants: ["w": weight, "b": Tensor(floats: (0..<width).map { Float($0 % 8) * 0.1 - 0.4 }, shape: [width])])
    }

    /// x → linear(x, W, bias) → relu → add(y) with y computed from x; W is `width` × `width`.
    static func linearBlock(width: Int = 8) -> GraphBlock {
        let weight = Tensor(floats: (0..<(width * width)).map { Float($0 % 5) * 0.11 - 0.2 }, shape: [width, width])
        func value(_ name: String) -> (name: String, type: ValueType) { Self.value(name, width) }
        let operations = [
            GraphOperation(type: "sigmoid", arguments: ["x": [.value("x")]], outputs: [value("y")], blocks: []),
            GraphOperation(type: "linear", arguments: ["x": [.value("x")], "weight": [.value("w")], "bias": [.value("b")]],
                           outputs: [value("l")], blocks: []),
            GraphOperation(type: "relu", arguments: ["x": [.value("l")]], outputs: [value("f")], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("f")], "y": [.value("y")]], outputs: [value("r")], blocks: []),
        ]
        return GraphBlock(operations: operations, outputs: ["r"],
                          constants: ["w": weight, "b": Tensor(floats: (0..<width).map { Float($0 % 8) * -0.05 }, shape: [width])])
    }

    /// The plan of `block` over x of 6 rows of `width`, every operation split between `threads` where it can be.
    static func plan(_ block: GraphBlock, threads: Int, width: Int = 8) throws -> TensorPlan {
        let function = GraphFunction(name: "main", inputs: [value("x", width)], block: block)
        return try WorkSplit.$minimumPerThread.withValue(1) { try Planner.plan(function, shapes: ["x": shape(width)], threads: threads) }
    }

    static func run(_ block: GraphBlock, threads: Int, width: Int = 8) throws -> [String: [Float]] {
        let plan = try plan(block, threads: threads, width: width)
        let state = TensorState(plan: plan)
        guard let x = plan.inputs["x"] else { return [:] }
        let input = (0..<(6 * width)).map { Float($0 % 13) * 0.3 - 1.7 }
        input.withUnsafeBytes { state.table[x].copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        try state.run()
        var result: [String: [Float]] = [:]
        for (name, id) in plan.outputs {
            result[name] = Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count))
        }
        return result
    }

    static func agree(_ block: GraphBlock, fused: GraphBlock, output: String, threads: Int, width: Int = 8) throws {
        let expected = try run(block, threads: threads, width: width)[output] ?? []
        let got = try run(fused, threads: threads, width: width)[output] ?? []
        #expect(expected.count == 6 * width && got.count == 6 * width)
        let worst = zip(expected, got).map { abs($0 - $1) / max(1, abs($0)) }.max() ?? .infinity
        #expect(worst <= 1e-5, "largest relative difference \(worst)")
    }

    @Test("matmul with constant weights + bias + GELU + residual becomes one fused_linear",
          arguments: ["EXACT", "TANH_APPROXIMATION"], [1, 2])
    func gpt2Chain(mode: String, threads: Int) throws {
        let block = Self.gpt2Block(mode: mode, outputs: ["r"])
        let fused = FusionPass.run(block)
        #expect(fused.operations.map(\.type) == ["fused_linear"])
        #expect(fused.operations.first?.outputs.first?.name == "r")
        #expect(fused.constants["b"] == nil, "the bias moved into the fused operation")
        #expect(fused.constants["w"] != nil && fused.operations.first?.arguments["weight_layout"] != nil,
                "the matmul's weights are read in place, not transposed into a copy")
        try Self.agree(block, fused: fused, output: "r", threads: threads)
    }

    @Test("linear + relu + a computed residual fuse; the residual's producer stays", arguments: [1, 2])
    func linearChain(threads: Int) throws {
        let block = Self.linearBlock()
        let fused = FusionPass.run(block)
        #expect(fused.operations.map(\.type) == ["sigmoid", "fused_linear"])
        try Self.agree(block, fused: fused, output: "r", threads: threads)
    }

    @Test("fused products of too few rows for every thread split by columns (where oneDNN packs plain rows) and sum their residual there",
          arguments: [1, 2])
    func fewRowsByColumns(threads: Int) throws {
        // 6 rows of 128: the row split would give a second thread nothing.
        let plainRows = try DNNLPrimitiveTests.packsPlainRows()
        for block in [Self.gpt2Block(mode: "EXACT", outputs: ["r"], width: 128), Self.linearBlock(width: 128)] {
            let fused = FusionPass.run(block)
            let product = try #require(try Self.plan(fused, threads: threads, width: 128).steps.first { $0.kind == "fused_linear" })
            #expect(product.split == (threads == 2 && plainRows ? "2 column blocks" : nil))
            try Self.agree(block, fused: fused, output: "r", threads: threads, width: 128)
        }
    }

    @Test("a product whose result the block returns keeps it: only the bias fuses")
    func keepsReturnedValues() throws {
        let fused = FusionPass.run(Self.gpt2Block(mode: "EXACT", outputs: ["r", "a"]))
        #expect(fused.operations.map(\.type) == ["fused_linear", "gelu", "add"])
        #expect(fused.operations.first?.outputs.first?.name == "a")
    }
}
