import CDNNL
import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// The fusion pass: what it fuses, what it must leave alone, and that the
/// fused convolutions on oneDNN compute what the unfused program does.
@Suite("Fusions of the tensor engine")
struct FusionTests {
    static func value(_ name: String, _ shape: [Int?] = [1, 4, 5, 5]) -> (name: String, type: ValueType) {
        (name, ValueType(element: .float32, shape: shape))
    }

    /// x → conv (4 → 4 channels, 3×3, same) → add(bias) → relu, returning `outputs`.
    static func block(outputs: [String], extra: [GraphOperation] = []) -> GraphBlock {
        let weight = Tensor(floats: (0..<144).map { Float($0 % 7) * 0.1 - 0.3 }, shape: [4, 4, 3, 3])
        let conv = GraphOperation(type: "conv", arguments: ["x": [.value("x")], "weight": [.value("w")],
                                                            "pad_type": [.constant(Tensor(type: .string, shape: [], storage: .strings(["same"])))]],
                                  outputs: [value("c")], blocks: [])
        let add = GraphOperation(type: "add", arguments: ["x": [.value("c")], "y": [.value("b")]], outputs: [value("a")], blocks: [])
        let relu = GraphOperation(type: "relu", arguments: ["x": [.value("a")]], outputs: [value("r")], blocks: [])
        return GraphBlock(operations: [conv, add, relu] + extra, outputs: outputs,
                          constants: ["w": weight, "b": Tensor(floats: [0.5, -0.5, 1, -1], shape: [1, 4, 1, 1])])
    }

    static func run(_ block: GraphBlock, input: [Float]) throws -> [String: [Float]] {
        let function = GraphFunction(name: "main", inputs: [value("x")], block: block)
        let plan = try Planner.plan(function, shapes: ["x": [1, 4, 5, 5]])
        let state = TensorState(plan: plan)
        guard let x = plan.inputs["x"] else { return [:] }
        input.withUnsafeBytes { state.table[x].copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        try state.run()
        var result: [String: [Float]] = [:]
        for (name, id) in plan.outputs {
            result[name] = Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count))
        }
        return result
    }

    @Test("conv + bias + relu becomes one fused_conv keeping the output's name")
    func fusesChain() throws {
        let fused = FusionPass.run(Self.block(outputs: ["r"]))
        #expect(fused.operations.map(\.type) == ["fused_conv"])
        #expect(fused.operations.first?.outputs.first?.name == "r")
        #expect(fused.constants["b"] == nil, "the bias folded into the convolution is dropped")
        let input = (0..<100).map { Float($0 % 11) * 0.2 - 1 }
        let expected = try Self.run(Self.block(outputs: ["r"]), input: input)["r"] ?? []
        let got = try Self.run(fused, input: input)["r"] ?? []
        #expect(expected.count == 100)
        #expect(zip(expected, got).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) })
    }

    @Test("a value the block returns or another operation reads is not fused away")
    func keepsSharedValues() throws {
        let returned = FusionPass.run(Self.block(outputs: ["r", "a"]))
        #expect(returned.operations.map(\.type) == ["conv", "relu"], "conv + bias fuse, the returned sum stays")
        #expect(returned.operations.first?.outputs.first?.name == "a")
        let twice = GraphOperation(type: "sigmoid", arguments: ["x": [.value("c")]], outputs: [Self.value("s")], blocks: [])
        let shared = FusionPass.run(Self.block(outputs: ["r", "s"], extra: [twice]))
        #expect(shared.operations.map(\.type) == ["conv", "add", "relu", "sigmoid"])
    }

    @Test("a residual sum after a convolution is a post-operation, then the activation after it")
    func fusesResidual() throws {
        var block = Self.block(outputs: ["o"])
        // r (relu of conv + bias) feeds a second convolution whose result is added to r, then relu.
        let weight = Tensor(floats: (0..<144).map { Float($0 % 5) * 0.1 - 0.2 }, shape: [4, 4, 3, 3])
        block.constants["w2"] = weight
        let same = GraphArgument.constant(Tensor(type: .string, shape: [], storage: .strings(["same"])))
        block.operations += [
            GraphOperation(type: "conv", arguments: ["x": [.value("r")], "weight": [.value("w2")], "pad_type": [same]], outputs: [Self.value("c2")], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("r")], "y": [.value("c2")]], outputs: [Self.value("s")], blocks: []),
            GraphOperation(type: "relu", arguments: ["x": [.value("s")]], outputs: [Self.value("o")], blocks: []),
        ]
        let fused = FusionPass.run(block)
        #expect(fused.operations.map(\.type) == ["fused_conv", "fused_conv"])
        let input = (0..<100).map { Float($0 % 13) * 0.15 - 0.9 }
        let expected = try Self.run(block, input: input)["o"] ?? []
        let got = try Self.run(fused, input: input)["o"] ?? []
        #expect(expected.count == 100)
        #expect(zip(expected, got).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) })
    }

    @Test("batch_norm after a convolution folds into its weights")
    func foldsBatchNorm() throws {
        var block = Self.block(outputs: ["n"])
        block.operations = [block.operations[0]]
        block.operations.append(GraphOperation(type: "batch_norm", arguments: [
            "x": [.value("c")], "mean": [.constant(Tensor(floats: [0.1, 0.2, -0.3, 0], shape: [4]))],
            "variance": [.constant(Tensor(floats: [1, 0.5, 2, 1.5], shape: [4]))],
            "gamma": [.constant(Tensor(floats: [1, 2, 0.5, -1], shape: [4]))], "beta": [.constant(Tensor(floats: [0, 1, -1, 0.25], shape: [4]))],
        ], outputs: [Self.value("n")], blocks: []))
        let fused = FusionPass.run(block)
        #expect(fused.operations.map(\.type) == ["conv"])
        let input = (0..<100).map { Float($0 % 9) * 0.25 - 1 }
        let expected = try Self.run(block, input: input)["n"] ?? []
        let got = try Self.run(fused, input: input)["n"] ?? []
        #expect(expected.count == 100)
        #expect(zip(expected, got).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) })
    }

    @Test("oneDNN runs here and chooses an implementation for a convolution with packed weights")
    func oneDNNConvolution() throws {
        #expect(DNNL.isAvailable)
        let geometry = DNNLConvolution.Geometry(input: [1, 4, 5, 5], output: [1, 4, 5, 5], weightShape: [4, 4, 3, 3], groups: 1,
                                                strides: [1, 1], dilations: [1, 1], padBefore: [1, 1], channelsLast: false)
        let primitive = try DNNLConvolution.convolution(name: "convolution \"test\"", geometry: geometry,
                                                        weights: [Float](repeating: 1, count: 144), bias: [1, 2, 3, 4],
                                                        post: DNNLPostOperations(steps: [.eltwise(dnnl_eltwise_relu.rawValue, alpha: 0, beta: 0)]),
                                                        threads: 1)
        #expect(primitive.implementation != "?")
        var input = [Float](repeating: 1, count: 100), output = [Float](repeating: 0, count: 100)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: max(primitive.scratchpadBytes, 64), alignment: 64)
        defer { scratch.deallocate() }
        try input.withUnsafeMutableBytes { x in
            try output.withUnsafeMutableBytes { y in
                try primitive.run(scratchpad: scratch) { $0 == 0 ? x.baseAddress! : y.baseAddress! }
            }
        }
        // Centre: 4 channels × 9 ones + bias; corner: 4 × 4 + bias.
        #expect(output[12] == 37)
        #expect(output[25 + 12] == 38)
        #expect(output[0] == 17)
    }

    @Test("the channels-last layout computes what MIL's layout does, transposing only at the edges")
    func channelsLastLayout() throws {
        var block = Self.block(outputs: ["o", "m"])
        let constant = { (name: String) in GraphArgument.constant(Tensor(type: .string, shape: [], storage: .strings([name]))) }
        let ints = { (values: [Int32]) in GraphArgument.constant(Tensor(ints: values, shape: [values.count])) }
        let yes = GraphArgument.constant(Tensor(ints: [1], shape: [], type: .bool))
        block.operations += [
            // r [1,4,5,5] → max_pool 3×3 same → batch_norm → concat with r on channels → mean over H, W → scale r2 by it.
            GraphOperation(type: "max_pool", arguments: ["x": [.value("r")], "kernel_sizes": [ints([3, 3])], "strides": [ints([1, 1])],
                                                         "pad_type": [constant("same")]], outputs: [Self.value("p")], blocks: []),
            GraphOperation(type: "batch_norm", arguments: [
                "x": [.value("p")], "mean": [.constant(Tensor(floats: [0.1, 0.2, -0.3, 0], shape: [4]))],
                "variance": [.constant(Tensor(floats: [1, 0.5, 2, 1.5], shape: [4]))],
            ], outputs: [Self.value("n")], blocks: []),
            GraphOperation(type: "relu", arguments: ["x": [.value("n")]], outputs: [Self.value("n2")], blocks: []),
            GraphOperation(type: "concat", arguments: ["values": [.value("n2"), .value("r")], "axis": [.constant(Tensor(ints: [1], shape: []))]],
                           outputs: [Self.value("k", [1, 8, 5, 5])], blocks: []),
            GraphOperation(type: "reduce_mean", arguments: ["x": [.value("k")], "axes": [ints([2, 3])], "keep_dims": [yes]],
                           outputs: [Self.value("m", [1, 8, 1, 1])], blocks: []),
            GraphOperation(type: "mul", arguments: ["x": [.value("k")], "y": [.value("m")]], outputs: [Self.value("o", [1, 8, 5, 5])], blocks: []),
        ]
        let fused = FusionPass.run(block)
        let laidOut = ChannelsLastLayout.run(fused, inputs: [Self.value("x")])
        #expect(laidOut.operations.filter { $0.type == "layout_transpose" }.count == 3, "into the first convolution, out to o and m")
        #expect(laidOut.operations.contains { $0.type == "channel_affine" })
        let input = (0..<100).map { Float($0 % 17) * 0.12 - 1 }
        let expected = try Self.run(block, input: input)
        let got = try Self.run(laidOut, input: input)
        for name in ["o", "m"] {
            let want = expected[name] ?? [], have = got[name] ?? []
            #expect(want.count > 0 && want.count == have.count, "\(name)")
            #expect(zip(want, have).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) }, "\(name)")
        }
    }

    @Test("an operation's layout behaviour is its definition's: elementwise float operations and axis reductions stay channels-last; a comparison (elementwise, but a bool result) and a per-channel activation go back to MIL's layout",
          arguments: [("floor", true), ("sign", true), ("clamped_relu", true), ("reduce_l2_norm", true), ("greater", false), ("prelu", false)])
    func layoutBehaviour(type: String, staysChannelsLast: Bool) throws {
        let expected: LayoutBehavior = switch type {
        case "reduce_l2_norm": .reducesAxes
        case "prelu": .fixed
        default: .elementwise
        }
        #expect(OperationRegistry.definition(type)?.layout == expected)
        // x → conv → relu ("r", channels-last after the convolution) → `type` → o.
        var arguments: [String: [GraphArgument]] = ["x": [.value("r")]]
        var output = Self.value("o")
        switch type {
        case "greater": arguments["y"] = [.constant(Tensor(floats: [0.25], shape: []))]; output.type.element = .bool
        case "prelu": arguments["alpha"] = [.constant(Tensor(floats: [0.1, 0.2, 0.3, 0.4], shape: [4]))]
        case "reduce_l2_norm":
            arguments["axes"] = [.constant(Tensor(ints: [2, 3], shape: [2]))]
            arguments["keep_dims"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
            output = Self.value("o", [1, 4, 1, 1])
        default: break
        }
        let block = Self.block(outputs: ["o"], extra: [GraphOperation(type: type, arguments: arguments, outputs: [output], blocks: [])])
        let laidOut = ChannelsLastLayout.run(FusionPass.run(block), inputs: [Self.value("x")])
        let op = try #require(laidOut.operations.first { $0.type == type })
        guard case .value(let read)? = op.arguments["x"]?.first else { Issue.record("no x"); return }
        #expect(read.hasSuffix(ChannelsLastLayout.suffix) == staysChannelsLast, "\(type) reads \(read)")
        guard type != "greater" else { return }
        let input = (0..<100).map { Float($0 % 13) * 0.21 - 1.3 }
        let want = try Self.run(block, input: input)["o"] ?? [], have = try Self.run(laidOut, input: input)["o"] ?? []
        #expect(want.count > 0 && want.count == have.count)
        #expect(zip(want, have).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) }, "\(type): \(want) vs \(have)")
    }
}
