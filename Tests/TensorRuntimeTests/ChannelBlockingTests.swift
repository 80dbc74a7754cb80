import Foundation
import Testing
@testable import TensorRuntime

/// Convolutions in channel blocks (`[N, C/w, H, W, w]`, `ChannelBlocking`),
/// at both widths on any machine: the conversion's layout, a ResNet-shaped
/// chain against a direct float64 computation at 1, 2 and 3 threads and in
/// a batch, and which groups of convolutions the pass puts in blocks on
/// realistic shapes (at 16, as oneDNN answers whether it runs Winograd here).
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

    /// A ResNet's two basic blocks, 2w channels at `size`×`size`, then 3w at
    /// half the size with a 1×1 stride-2 downsample, ending in the spatial
    /// mean (`m`) and the last block's output itself (`r5`); w is `width`.
    static func resNetChain(batch: Int, size: Int, width: Int = 8) -> GraphFunction {
        let half = (size - 1) / 2 + 1, (two, three) = (2 * width, 3 * width)
        let a = [batch, two, size, size], b = [batch, three, half, half]
        var constants: [String: Tensor] = [:]
        for (name, outputs, inputs, kernel, seed) in [("c1", two, two, 3, 1), ("c2", two, two, 3, 2), ("c3", three, two, 3, 3), ("c4", three, two, 1, 4),
                                                      ("c5", three, three, 3, 5)] {
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
                           outputs: [ConvolutionThreadingTests.value("m", [batch, three])], blocks: []),
        ]
        return GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", a)], block: GraphBlock(operations: operations, outputs: ["m", "r5"], constants: constants))
    }

    /// The same chain in float64, `[N, C, H, W]`.
    static func resNetReference(_ x: [Double], batch: Int, size: Int, width: Int = 8, constants: [String: Tensor]) -> (mean: [Double], last: [Double]) {
        func convolve(_ input: [Double], channels: Int, size: Int, _ name: String, kernel: Int, stride: Int) -> [Double] {
            let out = (size - 1) / stride + 1, pad = kernel / 2
            return DirectConvolution.float64(input, batch: batch, channels: channels, height: size, width: size,
                                             weight: constants[name + "_w"]?.floats ?? [], bias: constants[name + "_b"]?.floats ?? [],
                                             kernel: kernel, stride: stride, padTop: pad, padLeft: pad, outHeight: out, outWidth: out)
        }
        let relu = { (values: [Double]) in values.map { max($0, 0) } }
        let half = (size - 1) / 2 + 1, (two, three) = (2 * width, 3 * width)
        let r1 = relu(convolve(x, channels: two, size: size, "c1", kernel: 3, stride: 1))
        let r2 = relu(zip(convolve(r1, channels: two, size: size, "c2", kernel: 3, stride: 1), x).map { $0 + $1 })
        let r3 = relu(convolve(r2, channels: two, size: size, "c3", kernel: 3, stride: 2))
        let c4 = convolve(r2, channels: two, size: size, "c4", kernel: 1, stride: 2)
        let r5 = relu(zip(convolve(r3, channels: three, size: half, "c5", kernel: 3, stride: 1), c4).map { $0 + $1 })
        let plane = half * half
        let mean = (0..<(batch * three)).map { index in r5[(index * plane)..<((index + 1) * plane)].reduce(0, +) / Double(plane) }
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

    @Test("the conversion puts each position's w channels of a block in one run, and back, in a batch of 2", arguments: ChannelBlocking.widths)
    func conversionLayout(blockWidth: Int) throws {
        let (batch, height, width, channels) = (2, 3, 5, 3 * blockWidth)
        let blocks = channels / blockWidth
        let function = ChannelBlocking.$chosenWidth.withValue(blockWidth) {
            GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [batch, height, width, channels])], block: GraphBlock(operations: [
                ChannelBlocking.conversion(from: "x", to: "b", type: ValueType(element: .float32, shape: [batch, blocks, height, width, blockWidth]),
                                           toBlocks: true),
                ChannelBlocking.conversion(from: "b", to: "y", type: ValueType(element: .float32, shape: [batch, height, width, channels]), toBlocks: false),
            ], outputs: ["b", "y"], constants: [:]))
        }
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
                        want[((n * blocks + c / blockWidth) * height * width + p) * blockWidth + c % blockWidth] = input[(n * height * width + p) * channels + c]
                    }
                }
            }
            #expect(blocked == want, "\(threads) threads")
            #expect(try run.floats("y") == input, "\(threads) threads")
        }
    }

    @Test("a ResNet chain in channel blocks of 8 and 16 computes float64's result at 1, 2 and 3 threads",
          arguments: [(1, 10), (2, 9)], ChannelBlocking.widths)
    func resNetChainMatchesFloat64(shape: (batch: Int, size: Int), width: Int) throws {
        let (batch, size) = shape
        let function = Self.resNetChain(batch: batch, size: size, width: width)
        let blocked = try ChannelBlocking.$chosenWidth.withValue(width) { try Self.blockedChain(function) }
        let types = blocked.block.operations.map(\.type)
        // Into blocks once (the input), out of blocks once (the last block's output, read by the mean and returned).
        #expect(types.filter { $0 == "channel_blocks" }.count == 2, "\(types)")
        #expect(blocked.block.operations.filter { $0.type == "fused_conv" }.allSatisfy { $0.outputs[0].name.hasSuffix(ChannelBlocking.suffix) })
        let input = (0..<(batch * 2 * width * size * size)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let want = Self.resNetReference(input.map(Double.init), batch: batch, size: size, width: width, constants: function.block.constants)
        // oneDNN's Winograd transforms (blocks of 16 where it has them) were 2.1e-5 off at most; its direct kernels 1e-5.
        let winograd = width == 16 && DNNLConvolution.runsWinograd(DNNLConvolution.Geometry(
            input: [batch, 2 * width, size, size], output: [batch, 2 * width, size, size], weightShape: [2 * width, 2 * width, 3, 3], groups: 1,
            strides: [1, 1], dilations: [1, 1], padBefore: [1, 1], channelsLast: false, channelBlock: width))
        // Blocks of 16 on oneDNN's AVX2 kernels: its reference loops, 1.1e-5 off.
        let tolerance = winograd || (width == 16 && !DNNL.runsAVX512Kernels) ? 1e-4 : 1e-5
        for threads in [1, 2, 3] {
            let run = try WorkSplit.$minimumPerThread.withValue(1) {
                try PlannedRun(blocked, input: input, shape: [batch, 2 * width, size, size], threads: threads)
            }
            for (name, expected) in [("m", want.mean), ("r5", want.last)] {
                let got = try run.floats(name)
                #expect(got.count == expected.count)
                let worst = zip(got, expected).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? .infinity
                #expect(worst <= tolerance, "\(name) at \(threads) threads: worst difference \(worst)")
            }
        }
    }

    @Test("a blocked convolution's plan runs oneDNN's optimized kernels, split by output channels in place at 2 threads")
    func blockedPlanIsOptimized() throws {
        try ChannelBlocking.$chosenWidth.withValue(8) {
            let function = try Self.blockedChain(Self.resNetChain(batch: 1, size: 10))
            let plan = try WorkSplit.$minimumPerThread.withValue(1) { try Planner.plan(function, shapes: ["x": [1, 16, 10, 10]], threads: 2) }
            let geometry = DNNLConvolution.Geometry(input: [1, 16, 10, 10], output: [1, 24, 5, 5], weightShape: [24, 16, 3, 3], groups: 1,
                                                    strides: [2, 2], dilations: [1, 1], padBefore: [1, 1], channelsLast: false, channelBlock: 8)
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
    }

    @Test("in blocks of 16 a 3×3 stride-1 convolution runs as Winograd exactly where oneDNN says it does, whole or split by channels")
    func winogradInBlocksOf16() throws {
        for (channels, size) in [(64, 56), (128, 28), (512, 7), (32, 10)] {
            let geometry = DNNLConvolution.Geometry(input: [1, channels, size, size], output: [1, channels, size, size],
                                                    weightShape: [channels, channels, 3, 3], groups: 1, strides: [1, 1], dilations: [1, 1],
                                                    padBefore: [1, 1], channelsLast: false, channelBlock: 16)
            #expect(DNNLConvolution.winogradShape(geometry))
            let expected = DNNLConvolution.runsWinograd(geometry)
            let weights = [Float](repeating: 0.01, count: channels * channels * 9)
            let whole = try DNNLConvolution.convolution(name: "test", geometry: geometry, weights: weights, bias: nil, post: DNNLPostOperations(),
                                                        threads: 1)
            #expect(whole.implementation.contains("wino") == expected, "\(channels)×\(size)²: oneDNN chose \(whole.implementation)")
            // Its AVX2 kernels have no blocks of 16 (its reference loops run them; the pass never asks for them there).
            #expect(!DNNL.runsAVX512Kernels || !whole.implementation.contains("ref"), "\(channels)×\(size)²: oneDNN chose \(whole.implementation)")
            // A thread's block of output channels, with the residual sum and ReLU a ResNet fuses.
            let blocks = try #require(WorkSplit.$minimumPerThread.withValue(1) { ConvolutionOperations.blocks(geometry, kernel: [3, 3], threads: 2) })
            var post = DNNLPostOperations()
            post.steps = [.sum] + (DNNLConvolution.steps(kind: "relu", alpha: 0, beta: 0) ?? [])
            let half = try DNNLConvolution.convolution(name: "test", geometry: blocks[1].geometry, weights: Array(weights[..<(channels / 2 * channels * 9)]),
                                                       bias: nil, post: post, threads: 1)
            #expect(half.implementation.contains("wino") == DNNLConvolution.runsWinograd(blocks[1].geometry),
                    "\(channels)×\(size)², a half: oneDNN chose \(half.implementation)")
        }
        // Not its shape: a strided, a 1×1 or a channels-last convolution.
        let strided = DNNLConvolution.Geometry(input: [1, 64, 56, 56], output: [1, 64, 28, 28], weightShape: [64, 64, 3, 3], groups: 1,
                                               strides: [2, 2], dilations: [1, 1], padBefore: [1, 1], channelsLast: false, channelBlock: 16)
        #expect(!DNNLConvolution.winogradShape(strided) && !DNNLConvolution.runsWinograd(strided))
        var pointwise = strided
        (pointwise.strides, pointwise.output, pointwise.weightShape, pointwise.padBefore) = ([1, 1], [1, 64, 56, 56], [64, 64, 1, 1], [0, 0])
        #expect(!DNNLConvolution.winogradShape(pointwise))
        var channelsLast = pointwise
        (channelsLast.weightShape, channelsLast.padBefore, channelsLast.channelBlock, channelsLast.channelsLast) = ([64, 64, 3, 3], [1, 1], nil, true)
        #expect(!DNNLConvolution.winogradShape(channelsLast))
    }

    /// `block` (MIL layout) as the engine lays it out, and which operations the pass puts in blocks, by output name.
    static func chosenOutputs(_ block: GraphBlock, inputs: [(name: String, type: ValueType)]) -> Set<String> {
        let laidOut = ChannelsLastLayout.run(FusionPass.run(block), inputs: inputs)
        return Set(ChannelBlocking.chosen(laidOut, inputs: inputs).map { laidOut.operations[$0].outputs[0].name })
    }

    @Test("ResNet-18's stage goes in blocks of 8; a DenseNet layer, MobileNet's pointwise convolutions and 12 channels do not")
    func chosenGroups() {
        ChannelBlocking.$chosenWidth.withValue(8) { chosenGroupsInBlocksOf8() }
    }

    func chosenGroupsInBlocksOf8() {
        // Only the shapes matter here; a 56×56 ResNet stage gains from blocks against two conversions.
        let (big, stageInputs) = Self.resNetStage(width: 8)
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

    /// ResNet-18's first stage (56×56, 64 channels, then 128 at 28×28) as the engine lays it out, its shapes known.
    static func resNetStage(width: Int) -> (block: GraphBlock, inputs: [(name: String, type: ValueType)]) {
        var big = resNetChain(batch: 1, size: 56, width: width).block
        for (name, outputs, inputs, kernel) in [("c1", 64, 64, 3), ("c2", 64, 64, 3), ("c3", 128, 64, 3), ("c4", 128, 64, 1), ("c5", 128, 128, 3)] {
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
        return (big, [ConvolutionThreadingTests.value("x", a)])
    }

    @Test("in blocks of 16 ResNet-18's stage goes in blocks exactly where oneDNN runs its 3×3 stride-1 convolutions as Winograd")
    func chosenGroupsInBlocksOf16() {
        ChannelBlocking.$chosenWidth.withValue(16) {
            let (stage, inputs) = Self.resNetStage(width: 16)
            let laidOut = ChannelsLastLayout.run(FusionPass.run(stage), inputs: inputs)
            let candidates = ChannelBlocking.candidates(laidOut, inputs: inputs)
            #expect(candidates.count == 5)
            let geometry = { (channels: Int, size: Int) in
                DNNLConvolution.Geometry(input: [1, channels, size, size], output: [1, channels, size, size], weightShape: [channels, channels, 3, 3],
                                         groups: 1, strides: [1, 1], dilations: [1, 1], padBefore: [1, 1], channelsLast: false, channelBlock: 16)
            }
            let winograd = DNNLConvolution.runsWinograd(geometry(64, 56)) && DNNLConvolution.runsWinograd(geometry(128, 28))
            // The three stride-1 3×3 convolutions are oneDNN's Winograd where it has one; the strided and the 1×1 never.
            #expect(candidates.values.filter(\.dnnlWinograd).count == (winograd ? 3 : 0))
            #expect(candidates.values.allSatisfy { !$0.winograd })
            #expect(Self.chosenOutputs(stage, inputs: inputs).count == (winograd ? 5 : 0))
        }
    }

    @Test("told not to, the pass changes nothing; told to, it leaves a chain whose conversions cost more than it gains")
    func defaultFollowsTheMachine() {
        #expect(ChannelBlocking.width == (DNNL.runsAVX512Kernels ? 16 : 8))
        ChannelBlocking.$chosenWidth.withValue(8) { leavesASmallChain() }
    }

    func leavesASmallChain() {
        let function = Self.resNetChain(batch: 1, size: 10)
        let laidOut = ChannelsLastLayout.run(FusionPass.run(function.block), inputs: function.inputs)
        let off = ChannelBlocking.$enabled.withValue(false) { ChannelBlocking.run(laidOut, inputs: function.inputs) }
        #expect(!off.operations.contains { $0.type == "channel_blocks" })
        // At 10×10 the chain gains less than its two conversions cost, so even where blocks run the pass leaves it.
        let small = ChannelBlocking.$enabled.withValue(true) { ChannelBlocking.run(laidOut, inputs: function.inputs) }
        #expect(!small.operations.contains { $0.type == "channel_blocks" })
    }
}
