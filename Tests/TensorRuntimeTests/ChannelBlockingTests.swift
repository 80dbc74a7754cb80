import Foundation
import Testing
@testable import TensorRuntime

/// Convolutions in channel blocks (`[N, C/8, H, W, 8]`, `ChannelBlocking`):
/// the conversion's layout, a ResNet-shaped chain against a direct float64
/// computation at 1, 2 and 3 threads and in a batch, and which groups of
/// convolutions the pass puts in blocks on realistic shapes.
@Suite("Convolutions in channel blocks")
struct ChannelBlockingTests {
    /// A convolution of `x` (`[N, C, H, W]`) by constant `w` and `b`, padding `kernel / 2`.
    static func conv(_ x: String, _ output: String, shape: [Int], kernel: Int, stride: Int = 1, groups: Int = 1) -> GraphOperation {
        let pad = Int32(kernel / 2)
        return GraphOperation(type: "conv", arguments: [
            "x": [.value(x)], "weight": [.value(output + "_w")], "bias": [.value(output + "_b")],
            "strides": [.constant(Tensor(ints: [Int32(stride), Int32(stride)], shape: [2]))],
            "pad_type": [.constant(Tensor(type: .string, shape: [], storage: .strings(["custom"])))],
            "pad": [.constant(Tensor(ints: [pad, pad, pad, pad], shape: [4]))],
            "groups": [.constant(Tensor(ints: [Int32(groups)], shape: []))],
        ], outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    static func unary(_ type: String, _ x: String, _ output: String, _ shape: [Int]) -> GraphOperation {
        GraphOperation(type: type, arguments: ["x": [.value(x)]], outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    static func add(_ x: String, _ y: String, _ output: String, _ shape: [Int]) -> GraphOperation {
        GraphOperation(type: "add", arguments: ["x": [.value(x)], "y": [.value(y)]], outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    /// Seeded weights and biases for a convolution named `name`.
    static func weights(_ name: String, outputs: Int, inputs: Int, kernel: Int, seed: Int) -> [String: Tensor] {
        let count = outputs * inputs * kernel * kernel
        let weight = (0..<count).map { Float((($0 + seed) * 37) % 29) * 0.02 - 0.28 }
        let bias = (0..<outputs).map { Float(($0 + seed) % 7) * 0.05 - 0.15 }
        return [name + "_w": Tensor(floats: weight, shape: [outputs, inputs, kernel, kernel]), name + "_b": Tensor(floats: bias, shape: [outputs])]
    }

    /// A ResNet's two basic blocks, 16 channels at `size`×`size`, then 24 at
    /// half the size with a 1×1 stride-2 downsample, ending in the spatial
    /// mean (`m`) and the last block's output itself (`r5`).
    static func resNetChain(batch: Int, size: Int) -> GraphFunction {
        let half = (size - 1) / 2 + 1
        let a = [batch, 16, size, size], b = [batch, 24, half, half]
        var constants: [String: Tensor] = [:]
        for (name, outputs, inputs, kernel, seed) in [("c1", 16, 16, 3, 1), ("c2", 16, 16, 3, 2), ("c3", 24, 16, 3, 3), ("c4", 24, 16, 1, 4),
                                                      ("c5", 24, 24, 3, 5)] {
            constants.merge(weights(name, outputs: outputs, inputs: inputs, kernel: kernel, seed: seed)) { $1 }
        }
        constants["axes"] = Tensor(ints: [2, 3], shape: [2])
        let operations = [
            conv("x", "c1", shape: a, kernel: 3), unary("relu", "c1", "r1", a),
            conv("r1", "c2", shape: a, kernel: 3), add("c2", "x", "s2", a), unary("relu", "s2", "r2", a),
            conv("r2", "c3", shape: b, kernel: 3, stride: 2), unary("relu", "c3", "r3", b),
            conv("r2", "c4", shape: b, kernel: 1, stride: 2),
            conv("r3", "c5", shape: b, kernel: 3), add("c5", "c4", "s5", b), unary("relu", "s5", "r5", b),
            GraphOperation(type: "reduce_mean", arguments: ["x": [.value("r5")], "axes": [.value("axes")]],
                           outputs: [ConvolutionThreadingTests.value("m", [batch, 24])], blocks: []),
        ]
        return GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", a)], block: GraphBlock(operations: operations, outputs: ["m", "r5"], constants: constants))
    }

    /// The same chain in float64, `[N, C, H, W]`.
    static func resNetReference(_ x: [Double], batch: Int, size: Int, constants: [String: Tensor]) -> (mean: [Double], last: [Double]) {
        func convolve(_ input: [Double], channels: Int, size: Int, _ name: String, kernel: Int, stride: Int) -> [Double] {
            let out = (size - 1) / stride + 1, pad = kernel / 2
            return DirectConvolution.float64(input, batch: batch, channels: channels, height: size, width: size,
                                             weight: constants[name + "_w"]?.floats ?? [], bias: constants[name + "_b"]?.floats ?? [],
                                             kernel: kernel, stride: stride, padTop: pad, padLeft: pad, outHeight: out, outWidth: out)
        }
        let relu = { (values: [Double]) in values.map { max($0, 0) } }
        let half = (size - 1) / 2 + 1
        let r1 = relu(convolve(x, channels: 16, size: size, "c1", kernel: 3, stride: 1))
        let r2 = relu(zip(convolve(r1, channels: 16, size: size, "c2", kernel: 3, stride: 1), x).map { $0 + $1 })
        let r3 = relu(convolve(r2, channels: 16, size: size, "c3", kernel: 3, stride: 2))
        let c4 = convolve(r2, channels: 16, size: size, "c4", kernel: 1, stride: 2)
        let r5 = relu(zip(convolve(r3, channels: 24, size: half, "c5", kernel: 3, stride: 1), c4).map { $0 + $1 })
        let plane = half * half
        let mean = (0..<(batch * 24)).map { index in r5[(index * plane)..<((index + 1) * plane)].reduce(0, +) / Double(plane) }
        return (mean, r5)
    }

    /// The chain laid out as the engine lays it out, every candidate in blocks.
    static func blockedChain(_ function: GraphFunction) throws -> GraphFunction {
        var laidOut = function
        let channelsLast = ChannelsLastLayout.run(FusionPass.run(function.block), inputs: function.inputs)
        let candidates = ChannelBlocking.candidates(channelsLast, inputs: function.inputs)
        // The five convolutions (residual sums and ReLUs fused into them).
        #expect(candidates.count == 5)
        laidOut.block = ChannelBlocking.rewritten(channelsLast, blocking: Set(candidates.keys))
        return laidOut
    }

    @Test("the conversion puts each position's 8 channels of a block in one run, and back, in a batch of 2")
    func conversionLayout() throws {
        let (batch, height, width, channels) = (2, 3, 5, 24)
        let blocks = channels / 8
        let function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [batch, height, width, channels])], block: GraphBlock(operations: [
            ChannelBlocking.conversion(from: "x", to: "b", type: ValueType(element: .float32, shape: [batch, blocks, height, width, 8]), toBlocks: true),
            ChannelBlocking.conversion(from: "b", to: "y", type: ValueType(element: .float32, shape: [batch, height, width, channels]), toBlocks: false),
        ], outputs: ["b", "y"], constants: [:]))
        let input = (0..<(batch * height * width * channels)).map(Float.init)
        for threads in [1, 2] {
            let run = try WorkSplit.$minimumPerThread.withValue(1) {
                try PlannedRun(function, input: input, shape: [batch, height, width, channels], threads: threads)
            }
            let blocked = try run.floats("b")
            var want = [Float](repeating: -1, count: input.count)
            for n in 0..<batch {
                for p in 0..<(height * width) {
                    for c in 0..<channels {
                        want[((n * blocks + c / 8) * height * width + p) * 8 + c % 8] = input[(n * height * width + p) * channels + c]
                    }
                }
            }
            #expect(blocked == want, "\(threads) threads")
            #expect(try run.floats("y") == input, "\(threads) threads")
        }
    }

    @Test("a ResNet chain in channel blocks computes float64's result at 1, 2 and 3 threads", arguments: [(1, 10), (2, 9)])
    func resNetChainMatchesFloat64(batch: Int, size: Int) throws {
        let function = Self.resNetChain(batch: batch, size: size)
        let blocked = try Self.blockedChain(function)
        let types = blocked.block.operations.map(\.type)
        // Into blocks once (the input), out of blocks once (the last block's output, read by the mean and returned).
        #expect(types.filter { $0 == "channel_blocks" }.count == 2, "\(types)")
        #expect(blocked.block.operations.filter { $0.type == "fused_conv" }.allSatisfy { $0.outputs[0].name.hasSuffix(ChannelBlocking.suffix) })
        let input = (0..<(batch * 16 * size * size)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let want = Self.resNetReference(input.map(Double.init), batch: batch, size: size, constants: function.block.constants)
        for threads in [1, 2, 3] {
            let run = try WorkSplit.$minimumPerThread.withValue(1) {
                try PlannedRun(blocked, input: input, shape: [batch, 16, size, size], threads: threads)
            }
            for (name, expected) in [("m", want.mean), ("r5", want.last)] {
                let got = try run.floats(name)
                #expect(got.count == expected.count)
                let worst = zip(got, expected).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? .infinity
                #expect(worst <= 1e-5, "\(name) at \(threads) threads: worst difference \(worst)")
            }
        }
    }

    @Test("a blocked convolution's plan runs oneDNN's optimized kernels, split by output channels in place at 2 threads")
    func blockedPlanIsOptimized() throws {
        let function = try Self.blockedChain(Self.resNetChain(batch: 1, size: 10))
        let plan = try WorkSplit.$minimumPerThread.withValue(1) { try Planner.plan(function, shapes: ["x": [1, 16, 10, 10]], threads: 2) }
        let geometry = DNNLConvolution.Geometry(input: [1, 16, 10, 10], output: [1, 24, 5, 5], weightShape: [24, 16, 3, 3], groups: 1,
                                                strides: [2, 2], dilations: [1, 1], padBefore: [1, 1], channelsLast: false, channelBlocked: true)
        let blocks = try #require(WorkSplit.$minimumPerThread.withValue(1) { ConvolutionOperations.blocks(geometry, kernel: [3, 3], threads: 2) })
        // 24 channels: 16 + 8, each block's output contiguous from its first channel's plane.
        #expect(blocks.map(\.channels) == [0..<16, 16..<24])
        #expect(blocks.map(\.output) == [0, 16 * 25])
        let primitive = try DNNLConvolution.convolution(name: "test", geometry: blocks[1].geometry,
                                                        weights: [Float](repeating: 0.5, count: 8 * 16 * 9), bias: nil,
                                                        post: DNNLPostOperations(), threads: 1)
        #expect(!primitive.implementation.contains("ref"), "oneDNN chose \(primitive.implementation)")
        #expect(plan.steps.contains { $0.kind == "channel_blocks" })
    }

    /// `block` (MIL layout) as the engine lays it out, and which operations the pass puts in blocks, by output name.
    static func chosenOutputs(_ block: GraphBlock, inputs: [(name: String, type: ValueType)]) -> Set<String> {
        let laidOut = ChannelsLastLayout.run(FusionPass.run(block), inputs: inputs)
        return Set(ChannelBlocking.chosen(laidOut, inputs: inputs).map { laidOut.operations[$0].outputs[0].name })
    }

    @Test("ResNet-18's stage goes in blocks; a DenseNet layer, MobileNet's pointwise convolutions and 12 channels do not")
    func chosenGroups() {
        let stage = Self.resNetChain(batch: 1, size: 56)
        // Only the shapes matter here; a 56×56 ResNet stage gains from blocks against two conversions.
        var big = stage.block
        for (name, outputs, inputs, kernel, _) in [("c1", 64, 64, 3, 0), ("c2", 64, 64, 3, 0), ("c3", 128, 64, 3, 0), ("c4", 128, 64, 1, 0),
                                                   ("c5", 128, 128, 3, 0)] {
            big.constants[name + "_w"] = Tensor(floats: [Float](repeating: 0, count: outputs * inputs * kernel * kernel), shape: [outputs, inputs, kernel, kernel])
            big.constants[name + "_b"] = Tensor(floats: [Float](repeating: 0, count: outputs), shape: [outputs])
        }
        let a = [1, 64, 56, 56], b = [1, 128, 28, 28]
        let shapes = ["x": a, "c1": a, "r1": a, "c2": a, "s2": a, "r2": a, "c3": b, "r3": b, "c4": b, "c5": b, "s5": b, "r5": b, "m": [1, 128]]
        big.operations = big.operations.map { op in
            var op = op
            op.outputs[0].type.shape = shapes[op.outputs[0].name]?.map { $0 }
            return op
        }
        let stageInputs = [ConvolutionThreadingTests.value("x", a)]
        #expect(WinogradConvolution.$enabled.withValue(false) { Self.chosenOutputs(big, inputs: stageInputs).count } == 5)
        // Where its 3×3 stride-1 convolutions run as Winograd's (as fast in either layout), the strided one alone gains less than the conversions.
        if WinogradConvolution.supported {
            #expect(WinogradConvolution.$enabled.withValue(true) { Self.chosenOutputs(big, inputs: stageInputs).isEmpty })
        }

        // A DenseNet layer: a per-channel affine + ReLU (a pre-activation batch norm), 1×1 128 → 128, 3×3 128 → 32, concatenated.
        let d = [1, 128, 56, 56], g = [1, 32, 56, 56]
        var dense = Self.weights("p", outputs: 128, inputs: 128, kernel: 1, seed: 0).merging(Self.weights("q", outputs: 32, inputs: 128, kernel: 3, seed: 0)) { $1 }
        dense["mean"] = Tensor(floats: [Float](repeating: 0.1, count: 128), shape: [128])
        dense["variance"] = Tensor(floats: [Float](repeating: 1, count: 128), shape: [128])
        dense["axis"] = Tensor(ints: [1], shape: [])
        let denseBlock = GraphBlock(operations: [
            GraphOperation(type: "batch_norm", arguments: ["x": [.value("x")], "mean": [.value("mean")], "variance": [.value("variance")]],
                           outputs: [ConvolutionThreadingTests.value("n", d)], blocks: []),
            Self.unary("relu", "n", "nr", d),
            Self.conv("nr", "p", shape: d, kernel: 1), Self.unary("relu", "p", "pr", d),
            Self.conv("pr", "q", shape: g, kernel: 3),
            GraphOperation(type: "concat", arguments: ["values": [.value("x"), .value("q")], "axis": [.value("axis")]],
                           outputs: [ConvolutionThreadingTests.value("cat", [1, 160, 56, 56])], blocks: []),
        ], outputs: ["cat"], constants: dense)
        let denseInputs = [ConvolutionThreadingTests.value("x", d)]
        #expect(ChannelBlocking.candidates(ChannelsLastLayout.run(FusionPass.run(denseBlock), inputs: denseInputs), inputs: denseInputs).count == 2)
        #expect(Self.chosenOutputs(denseBlock, inputs: denseInputs).isEmpty)

        // MobileNetV2: pointwise 32 → 96, depthwise 3×3 (groups: not a candidate), pointwise 96 → 24.
        let m = [1, 32, 56, 56], e = [1, 96, 56, 56], o = [1, 24, 56, 56]
        var mobile = Self.weights("e", outputs: 96, inputs: 32, kernel: 1, seed: 0).merging(Self.weights("o", outputs: 24, inputs: 96, kernel: 1, seed: 0)) { $1 }
        mobile.merge(Self.weights("dw", outputs: 96, inputs: 1, kernel: 3, seed: 0)) { $1 }
        let mobileBlock = GraphBlock(operations: [
            Self.conv("x", "e", shape: e, kernel: 1), Self.unary("relu6", "e", "er", e),
            Self.conv("er", "dw", shape: e, kernel: 3, groups: 96), Self.unary("relu6", "dw", "dr", e),
            Self.conv("dr", "o", shape: o, kernel: 1),
        ], outputs: ["o"], constants: mobile)
        let mobileInputs = [ConvolutionThreadingTests.value("x", m)]
        #expect(ChannelBlocking.candidates(ChannelsLastLayout.run(FusionPass.run(mobileBlock), inputs: mobileInputs), inputs: mobileInputs).count == 2)
        #expect(Self.chosenOutputs(mobileBlock, inputs: mobileInputs).isEmpty)

        // Channels not in whole blocks of 8: no candidate.
        let t = [1, 12, 28, 28]
        let twelve = GraphBlock(operations: [Self.conv("x", "c", shape: t, kernel: 3), Self.unary("relu", "c", "r", t), Self.conv("r", "d", shape: t, kernel: 3)],
                                outputs: ["d"], constants: Self.weights("c", outputs: 12, inputs: 12, kernel: 3, seed: 0)
                                    .merging(Self.weights("d", outputs: 12, inputs: 12, kernel: 3, seed: 0)) { $1 })
        let twelveInputs = [ConvolutionThreadingTests.value("x", t)]
        #expect(ChannelBlocking.candidates(ChannelsLastLayout.run(FusionPass.run(twelve), inputs: twelveInputs), inputs: twelveInputs).isEmpty)
        // The same with 16 channels: both convolutions are candidates.
        let s = [1, 16, 28, 28]
        let sixteen = GraphBlock(operations: [Self.conv("x", "c", shape: s, kernel: 3), Self.unary("relu", "c", "r", s), Self.conv("r", "d", shape: s, kernel: 3)],
                                 outputs: ["d"], constants: Self.weights("c", outputs: 16, inputs: 16, kernel: 3, seed: 0)
                                     .merging(Self.weights("d", outputs: 16, inputs: 16, kernel: 3, seed: 0)) { $1 })
        let sixteenInputs = [ConvolutionThreadingTests.value("x", s)]
        #expect(ChannelBlocking.candidates(ChannelsLastLayout.run(FusionPass.run(sixteen), inputs: sixteenInputs), inputs: sixteenInputs).count == 2)
    }

    @Test("told not to, the pass changes nothing; told to, it leaves a chain whose conversions cost more than it gains")
    func defaultFollowsTheMachine() {
        let function = Self.resNetChain(batch: 1, size: 10)
        let laidOut = ChannelsLastLayout.run(FusionPass.run(function.block), inputs: function.inputs)
        let off = ChannelBlocking.$enabled.withValue(false) { ChannelBlocking.run(laidOut, inputs: function.inputs) }
        #expect(!off.operations.contains { $0.type == "channel_blocks" })
        // At 10×10 the chain gains less than its two conversions cost, so even where blocks run the pass leaves it.
        let small = ChannelBlocking.$enabled.withValue(true) { ChannelBlocking.run(laidOut, inputs: function.inputs) }
        #expect(!small.operations.contains { $0.type == "channel_blocks" })
    }
}
