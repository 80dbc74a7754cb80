import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// The attention fusion (Fusion/AttentionFusion.swift): what `ct.convert`
/// writes for BERT, GPT-2, ViT and Llama becomes one `fused_attention` per
/// layer, which computes what the unfused plan does (1e-5, relative to
/// max(1, |value|)) at 1 and 2 threads; masks of every broadcast, scales
/// written as `mul` or `real_div`, keys stored either way; near misses stay as
/// they are.
@Suite("Attention fusion")
struct AttentionFusionTests {
    /// Every rule but the attention one: the unfused reference.
    static let withoutAttention = FusionPass.rules.filter { !$0.name.hasPrefix("attention") }

    struct NotAProgram: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path): no ML program with a default function" }
    }

    /// The default function of the program at `path` (under Fixtures/), its
    /// constants folded; read off the shared threads (`HeavyWork`).
    static func graph(_ path: String) async throws -> GraphFunction {
        try await HeavyWork.run {
            let file = try ModelFile.open(Fixtures.path(path))
            let graph = try withExtendedLifetime(file) { () throws -> ProgramGraph in
                guard let program = file.specification.root.pointee.mlprogram else { throw NotAProgram(path: path) }
                return try GraphReader(modelDirectory: file.modelDirectory).read(program, defaultFunction: nil)
            }
            guard var function = graph.functions[graph.defaultFunction] else { throw NotAProgram(path: path) }
            function.block = Planner.foldConstants(function.block)
            return function
        }
    }

    /// `compute`, planned and run off the shared threads (`HeavyWork`).
    static func run(_ function: GraphFunction, _ block: GraphBlock, shapes: [String: [Int]], threads: Int) async throws -> [String: [Float]] {
        try await HeavyWork.run { try compute(function, block, shapes: shapes, threads: threads) }
    }

    /// The plan of `block` of `function` for `shapes`, every operation split between `threads` where it can be.
    static func plan(_ function: GraphFunction, _ block: GraphBlock, shapes: [String: [Int]], threads: Int) throws -> TensorPlan {
        var function = function
        function.block = block
        // These models are small: without lowering the threshold their attention would not be split at all.
        return try WorkSplit.$minimumPerThread.withValue(1) { try Planner.plan(function, shapes: shapes, threads: threads) }
    }

    /// Runs `block` of `function` on inputs of `shapes`: integers in 0..<50, floats in [-1, 1).
    static func compute(_ function: GraphFunction, _ block: GraphBlock, shapes: [String: [Int]], threads: Int) throws -> [String: [Float]] {
        let plan = try plan(function, block, shapes: shapes, threads: threads)
        let state = TensorState(plan: plan)
        // States start at zero (the first run zeroes their slots, which may hold halves).
        for (name, id) in plan.inputs where plan.states[name] == nil {
            let count = plan.values[id].count
            if plan.values[id].isFloat {
                for index in 0..<count { state.buffers.floats(id)[index] = Float((index * 7919 + name.count * 31) % 200) / 100 - 1 }
            } else {
                for index in 0..<count { state.buffers.ints(id)[index] = Int32((index * 37 + 11) % 50) }
            }
        }
        try state.run()
        var result: [String: [Float]] = [:]
        for (name, id) in plan.outputs {
            result[name] = Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count))
        }
        return result
    }

    static func expectClose(_ expected: [String: [Float]], _ got: [String: [Float]], _ label: String) {
        #expect(expected.keys.sorted() == got.keys.sorted(), "\(label)")
        for (name, values) in expected {
            let other = got[name] ?? []
            #expect(values.count == other.count && !values.isEmpty, "\(label) \(name)")
            let worst = zip(values, other).map { abs($0 - $1) / max(1, abs($0)) }.max() ?? .infinity
            #expect(worst <= 1e-5, "\(label) \(name): differs by \(worst)")
        }
    }

    static let converted: [(path: String, shapes: [String: [Int]])] = [
        ("Parity/Zoo/bert_fp32.mlpackage", ["input_ids": [1, 12]]),
        ("Parity/Zoo/gpt2_fp32.mlpackage", ["input_ids": [1, 9]]),
        ("Parity/Zoo/gpt2_fp16.mlpackage", ["input_ids": [1, 9]]),
        ("Parity/Zoo/vit_fp32.mlpackage", ["pixel_values": [1, 3, 32, 32]]),
        ("Parity/Zoo/llama_fp32.mlpackage", ["x": [1, 11]]),
    ]

    @Test("every layer's attention of a converted program fuses and computes what the unfused plan does",
          arguments: converted.indices, [1, 2])
    func convertedPrograms(_ index: Int, threads: Int) async throws {
        let (path, shapes) = Self.converted[index]
        let function = try await Self.graph(path)
        let softmaxes = function.block.operations.filter { $0.type == "softmax" }.count
        #expect(softmaxes == 2, "\(path): two layers")
        let fused = FusionPass.run(function.block)
        let unfused = FusionPass.run(function.block, rules: Self.withoutAttention)
        #expect(fused.operations.filter { $0.type == "fused_attention" }.count == softmaxes, "\(path)")
        #expect(!fused.operations.contains { $0.type == "softmax" }, "\(path)")
        #expect(unfused.operations.filter { $0.type == "softmax" }.count == softmaxes)
        let expected = try await Self.run(function, unfused, shapes: shapes, threads: threads)
        Self.expectClose(expected, try await Self.run(function, fused, shapes: shapes, threads: threads), path)
    }

    @Test("GPT-2's GELU after the reshape of its product fuses into the product", arguments: [1, 2])
    func geluThroughReshape(threads: Int) async throws {
        let function = try await Self.graph("Parity/Zoo/gpt2_fp32.mlpackage")
        #expect(function.block.operations.filter { $0.type == "gelu" }.count == 2)
        let fused = FusionPass.run(function.block)
        #expect(!fused.operations.contains { $0.type == "gelu" })
        #expect(fused.operations.filter { $0.type == "fused_linear" && $0.arguments["activation"] != nil }.count == 2)
        let unfused = FusionPass.run(function.block, rules: FusionPass.rules.filter { $0.name != "linear + reshape + activation" })
        #expect(unfused.operations.filter { $0.type == "gelu" }.count == 2)
        let expected = try await Self.run(function, unfused, shapes: ["input_ids": [1, 9]], threads: threads)
        Self.expectClose(expected, try await Self.run(function, fused, shapes: ["input_ids": [1, 9]], threads: threads), "gpt2")
    }

    @Test("GPT-2's logits product split by columns between 2 threads equals the row split and 1 thread")
    func logitsByColumns() async throws {
        let function = try await Self.graph("Parity/Zoo/gpt2_fp32.mlpackage")
        let fused = FusionPass.run(function.block)
        let shapes = ["input_ids": [1, 9]]
        // The zoo program is small: lowering the threshold sends its products without a residual
        // (the logits, attention's projections) through the column split. The threshold is a task
        // local: set where the plan is made, on HeavyWork's thread.
        let rows = try await Self.run(function, fused, shapes: shapes, threads: 2)
        #expect(ColumnBlocks.$minimumWeights.withValue(1) { ColumnBlocks(threads: 2, k: 8, n: 1000, fused: false)?.blocks.map(\.width) } == [512, 488])
        let columns = try await HeavyWork.run {
            try ColumnBlocks.$minimumWeights.withValue(1) { try Self.compute(function, fused, shapes: shapes, threads: 2) }
        }
        Self.expectClose(rows, columns, "gpt2 columns against rows")
        Self.expectClose(try await Self.run(function, fused, shapes: shapes, threads: 1), columns, "gpt2 columns against 1 thread")
        Self.expectClose(try await Self.run(function, FusionPass.run(function.block, rules: []), shapes: shapes, threads: 2), columns,
                         "gpt2 columns against unfused")
    }

    @Test("column blocks: only for several threads, large weights, no residual; widths in 64s")
    func columnBlocks() {
        #expect(ColumnBlocks(threads: 1, k: 768, n: 50257, fused: false) == nil)
        #expect(ColumnBlocks(threads: 2, k: 768, n: 50257, fused: true) == nil)
        #expect(ColumnBlocks(threads: 2, k: 768, n: 3072, fused: false) == nil)
        #expect(ColumnBlocks(threads: 2, k: 768, n: 50257, fused: false)?.blocks.map(\.first) == [0, 25152])
        #expect(ColumnBlocks.$minimumWeights.withValue(1) { ColumnBlocks(threads: 2, k: 32, n: 96, fused: false)?.blocks.map(\.width) } == [64, 32])
        #expect(ColumnBlocks(threads: 3, k: 768, n: 50257, fused: false)?.blocks.map(\.width) == [16768, 16768, 16721])
        // A one-row product's blocks (any weights, any residual): as many parts as there are, in 64s.
        #expect(ColumnBlocks(parts: 2, n: 768)?.blocks.map(\.width) == [384, 384])
        #expect(ColumnBlocks(parts: 2, n: 2304)?.blocks.map(\.first) == [0, 1152])
        #expect(ColumnBlocks(parts: 1, n: 768) == nil)
        #expect(ColumnBlocks(parts: 2, n: 64) == nil)
    }

    @Test("a converted model's products of too few rows for every thread (one token, 9 tokens) equal 1 thread's at 2 threads",
          arguments: ["bert", "gpt2"], [1, 9])
    func fewRowsByColumns(model: String, tokens: Int) async throws {
        let function = try await Self.graph("Parity/Zoo/\(model)_fp32.mlpackage")
        let fused = FusionPass.run(function.block)
        let shapes = ["input_ids": [1, tokens]]
        Self.expectClose(try await Self.run(function, fused, shapes: shapes, threads: 1),
                         try await Self.run(function, fused, shapes: shapes, threads: 2), "\(model) \(tokens) tokens")
        // Where oneDNN packs weights as plain rows (AVX2), GPT-2's MLP product (32 → 128 columns) splits
        // by columns; blocked packings (AVX-512) for one token only, where oneDNN reads the blocks in place.
        // BERT's products of 32 and 64 columns keep the rows.
        let plan = try await HeavyWork.run { try Self.plan(function, fused, shapes: shapes, threads: 2) }
        let splits = plan.steps.filter { $0.kind == "fused_linear" }.map { $0.split ?? "rows" }
        // (The plan lowers the work a thread needs, as `plan` does.)
        let blockedByColumns = try tokens == 1 && WorkSplit.$minimumPerThread.withValue(1) {
            try ProductDepthSplitTests.blockedColumnSplit(threads: 2, depth: 32, columns: 128) != nil
        }
        let byColumns = try model == "gpt2" && (DNNLPrimitiveTests.packsPlainRows() || blockedByColumns)
        #expect(splits.contains("2 column blocks") == byColumns, "\(splits)")
    }

    // MARK: Written by hand

    static func value(_ name: String, _ shape: [Int?]) -> (name: String, type: ValueType) {
        (name, ValueType(element: .float32, shape: shape))
    }

    static func scalar(_ value: Float) -> GraphArgument { .constant(Tensor(floats: [value], shape: [])) }
    static func flag(_ value: Bool) -> GraphArgument { .constant(Tensor(ints: [value ? 1 : 0], shape: [], type: .bool)) }

    /// The attention of q [2, 3, 5, 4], k ([2, 3, 6, 4], or [2, 3, 4, 6] with `storedTransposed`)
    /// and v [2, 3, 6, 4] as ct.convert writes it, with the given scale step and mask.
    struct Case: CustomStringConvertible, Sendable {
        var name: String
        /// "mul", "mul_left", "real_div" or "" (no scale step).
        var scale = "mul"
        /// The mask's shape, nil for none.
        var mask: [Int]?
        /// The mask as a constant (a causal mask) instead of an input.
        var constantMask = false
        var storedTransposed = false
        var softmaxAxis = -1

        var description: String { name }

        var keyShape: [Int] { storedTransposed ? [2, 3, 4, 6] : [2, 3, 6, 4] }

        var function: GraphFunction {
            var inputs = [value("q", [2, 3, 5, 4]), value("k", keyShape.map { $0 }), value("v", [2, 3, 6, 4])]
            var constants: [String: Tensor] = [:]
            var operations = [GraphOperation(type: "matmul", arguments: ["x": [.value("q")], "y": [.value("k")],
                                                                          "transpose_y": [flag(!storedTransposed)]],
                                             outputs: [value("scores", [2, 3, 5, 6])], blocks: [])]
            var last = "scores"
            switch scale {
            case "mul", "mul_left":
                let arguments: [String: [GraphArgument]] = scale == "mul" ? ["x": [.value(last)], "y": [scalar(0.5)]] : ["x": [scalar(0.5)], "y": [.value(last)]]
                operations.append(GraphOperation(type: "mul", arguments: arguments, outputs: [value("scaled", [2, 3, 5, 6])], blocks: []))
                last = "scaled"
            case "real_div":
                operations.append(GraphOperation(type: "real_div", arguments: ["x": [.value(last)], "y": [scalar(2)]],
                                                 outputs: [value("scaled", [2, 3, 5, 6])], blocks: []))
                last = "scaled"
            default: break
            }
            if let mask {
                if constantMask {
                    // Causal: position j is hidden from row i when j > i + 1 (as a GPT-2 prefix of one token).
                    let values = (0..<mask.reduce(1, *)).map { index -> Float in index % 6 > index / 6 % 5 + 1 ? -1e4 : 0 }
                    constants["mask"] = Tensor(floats: values, shape: mask)
                } else {
                    inputs.append(value("mask", mask.map { $0 }))
                }
                operations.append(GraphOperation(type: "add", arguments: ["x": [.value(last)], "y": [.value("mask")]],
                                                 outputs: [value("masked", [2, 3, 5, 6])], blocks: []))
                last = "masked"
            }
            operations += [
                GraphOperation(type: "softmax", arguments: ["x": [.value(last)], "axis": [.constant(Tensor(ints: [Int32(softmaxAxis)], shape: []))]],
                               outputs: [value("weights", [2, 3, 5, 6])], blocks: []),
                GraphOperation(type: "matmul", arguments: ["x": [.value("weights")], "y": [.value("v")]],
                               outputs: [value("attended", [2, 3, 5, 4])], blocks: []),
            ]
            return GraphFunction(name: "main", inputs: inputs, block: GraphBlock(operations: operations, outputs: ["attended"], constants: constants))
        }

        var shapes: [String: [Int]] {
            var shapes = ["q": [2, 3, 5, 4], "k": keyShape, "v": [2, 3, 6, 4]]
            if let mask, !constantMask { shapes["mask"] = mask }
            return shapes
        }
    }

    static let cases: [Case] = [
        Case(name: "no mask (ViT)", mask: nil),
        Case(name: "padding mask per batch [2, 1, 1, 6] (BERT)", mask: [2, 1, 1, 6]),
        Case(name: "full mask [2, 3, 5, 6]", mask: [2, 3, 5, 6]),
        Case(name: "causal mask constant [1, 1, 5, 6] (GPT-2)", scale: "", mask: [1, 1, 5, 6], constantMask: true),
        Case(name: "scale on the left, key stored [E, S]", scale: "mul_left", mask: [5, 6], storedTransposed: true),
        Case(name: "real_div scale, mask column broadcast [2, 3, 5, 1]", scale: "real_div", mask: [2, 3, 5, 1]),
    ]

    @Test("hand-written attention fuses and computes what the unfused plan does", arguments: cases, [1, 2])
    func handWritten(_ testCase: Case, threads: Int) async throws {
        let function = testCase.function
        let fused = FusionPass.run(function.block)
        #expect(fused.operations.map(\.type) == ["fused_attention"])
        #expect(fused.operations.first?.outputs.first?.name == "attended")
        let unfused = FusionPass.run(function.block, rules: Self.withoutAttention)
        let expected = try await Self.run(function, unfused, shapes: testCase.shapes, threads: threads)
        Self.expectClose(expected, try await Self.run(function, fused, shapes: testCase.shapes, threads: threads), testCase.name)
    }

    @Test("a softmax over another axis, a scale per element or a transposed query is left unfused")
    func nearMissesStay() throws {
        var axis = Case(name: "softmax over the rows", mask: [2, 1, 1, 6])
        axis.softmaxAxis = -2
        #expect(FusionPass.run(axis.function.block).operations.map(\.type) == ["matmul", "mul", "add", "softmax", "matmul"])

        var perElement = Case(name: "scale per column", mask: nil).function
        perElement.block.operations[1].arguments["y"] = [.constant(Tensor(floats: [0.5, 1, 0.5, 1, 0.5, 1], shape: [6]))]
        #expect(FusionPass.run(perElement.block).operations.map(\.type) == ["matmul", "mul", "softmax", "matmul"])

        var transposedQuery = Case(name: "query transposed", mask: nil).function
        transposedQuery.block.operations[0].arguments["transpose_x"] = [Self.flag(true)]
        #expect(FusionPass.run(transposedQuery.block).operations.map(\.type) == ["matmul", "mul", "softmax", "matmul"])
    }

    @Test("scores or weights the block returns or another operation reads are not fused away")
    func sharedValuesStay() throws {
        var returned = Case(name: "weights returned", mask: [2, 1, 1, 6]).function
        returned.block.outputs.append("weights")
        #expect(FusionPass.run(returned.block).operations.map(\.type) == ["matmul", "mul", "add", "softmax", "matmul"])

        var read = Case(name: "scores read twice", mask: nil).function
        read.block.operations.append(GraphOperation(type: "relu", arguments: ["x": [.value("scores")]],
                                                    outputs: [Self.value("other", [2, 3, 5, 6])], blocks: []))
        read.block.outputs.append("other")
        #expect(FusionPass.run(read.block).operations.map(\.type) == ["matmul", "mul", "softmax", "matmul", "relu"])
    }
}
