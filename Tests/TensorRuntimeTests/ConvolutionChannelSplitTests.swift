import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// One channels-last image's convolution split into blocks of output
/// channels (each block the whole input, its channels' weights packed for
/// it, computed into scratch and copied into its strided slice of the output) where its rows split unevenly
/// and each output value reads many inputs, and into rows elsewhere: which
/// split is chosen for ResNet-18's shapes, and that every split computes a
/// direct float64 convolution with bias, residual and ReLU at 1, 2 and 3 threads.
@Suite("Convolutions split into blocks of output channels")
struct ConvolutionChannelSplitTests {
    typealias Case = ConvolutionThreadingTests.Case

    static func geometry(_ input: [Int], outputs: Int, kernel: Int, stride: Int = 1, groups: Int = 1) -> DNNLConvolution.Geometry {
        let size = { (extent: Int) in (extent + 2 * (kernel / 2) - kernel) / stride + 1 }
        return DNNLConvolution.Geometry(input: input, output: [input[0], outputs, size(input[2]), size(input[3])],
                                        weightShape: [outputs, input[1] / groups, kernel, kernel], groups: groups, strides: [stride, stride],
                                        dilations: [1, 1], padBefore: [kernel / 2, kernel / 2], channelsLast: true)
    }

    @Test("ResNet-18's 7×7 stage splits by channels; its 14×14 and 56×56 stages, MobileNetV2's pointwise and grouped convolutions by rows")
    func chosenSplit() throws {
        // layer4's 3×3 512 → 512 at 7×7: 7 rows would split 4 + 3; 2.4 M weights against 25 K inputs.
        let last = Self.geometry([1, 512, 7, 7], outputs: 512, kernel: 3)
        let two = try #require(ConvolutionOperations.blocks(last, kernel: [3, 3], threads: 2, channelBlocksAllowed: true))
        #expect(two.map(\.channels) == [0..<256, 256..<512])
        #expect(two.allSatisfy { $0.geometry.output == [1, 256, 7, 7] && $0.geometry.weightShape == [256, 512, 3, 3] && $0.input == 0 })
        #expect(two.map(\.output) == [0, 256])
        let three = try #require(ConvolutionOperations.blocks(last, kernel: [3, 3], threads: 3, channelBlocksAllowed: true))
        #expect(three.map(\.channels) == [0..<176, 176..<336, 336..<512])
        // Not where the caller cannot take a strided output (a binary residual, pooling).
        #expect(ConvolutionOperations.blocks(last, kernel: [3, 3], threads: 2)?.allSatisfy { $0.channels == nil } == true)
        // layer4's stride-2 entry (7 rows, 2,304 inputs per output) too; not its 1×1 downsample (256 inputs per output).
        #expect(ConvolutionOperations.splitsChannels(Self.geometry([1, 256, 14, 14], outputs: 512, kernel: 3, stride: 2), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 256, 14, 14], outputs: 512, kernel: 1, stride: 2), threads: 2))
        // layer3 (14 rows, even) and layer1 (56 rows): rows, though layer3's weights outweigh its input.
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 256, 14, 14], outputs: 256, kernel: 3), threads: 2))
        let early = Self.geometry([1, 64, 56, 56], outputs: 64, kernel: 3)
        #expect(!ConvolutionOperations.splitsChannels(early, threads: 2))
        #expect(ConvolutionOperations.blocks(early, kernel: [3, 3], threads: 2, channelBlocksAllowed: true)?.map { $0.geometry.output[2] } == [28, 28])
        // 14 rows at 3 threads (5 + 5 + 4, 7 % above an even share): rows; 7 rows at 3 threads (3 + 3 + 1): channels.
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 256, 14, 14], outputs: 256, kernel: 3), threads: 3))
        #expect(ConvolutionOperations.splitsChannels(last, threads: 3))
        // MobileNetV2's 7×7 pointwise convolutions (160 and 960 inputs per output) and the stem: rows.
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 160, 7, 7], outputs: 960, kernel: 1), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 960, 7, 7], outputs: 160, kernel: 1), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 3, 224, 224], outputs: 64, kernel: 7, stride: 2), threads: 2))
        // Grouped and depthwise convolutions, a batch, too few channels for two 16-channel blocks: never by channels.
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 960, 7, 7], outputs: 960, kernel: 3, groups: 960), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 512, 7, 7], outputs: 512, kernel: 3, groups: 2), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([2, 512, 7, 7], outputs: 512, kernel: 3), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(Self.geometry([1, 512, 7, 7], outputs: 24, kernel: 3), threads: 2))
        #expect(!ConvolutionOperations.splitsChannels(last, threads: 1))
        // Bounds on whole 16-channel vectors; the last block takes the rest.
        #expect(ConvolutionOperations.channelBlocks(49, parts: 3) == [0..<16, 16..<32, 32..<49])
        #expect(ConvolutionOperations.channelBlocks(960, parts: 2) == [0..<480, 480..<960])
        #expect(ConvolutionOperations.channelBlocks(17, parts: 3) == nil)
    }

    @Test("a block of output channels runs one of oneDNN's optimized kernels, not its reference loops")
    func blockIsOptimized() throws {
        guard DNNL.isAvailable else { return }
        let block = try #require(ConvolutionOperations.blocks(Self.geometry([1, 512, 7, 7], outputs: 512, kernel: 3), kernel: [3, 3], threads: 2,
                                                              channelBlocksAllowed: true)?.first)
        let weights = [Float](repeating: 0.5, count: 256 * 512 * 9)
        let primitive = try DNNLConvolution.convolution(name: "test", geometry: block.geometry, weights: weights, bias: nil,
                                                        post: DNNLPostOperations(), threads: 1)
        #expect(!primitive.implementation.contains("ref"), "oneDNN chose \(primitive.implementation)")
    }

    /// relu(conv(x) + bias + x): the residual sum of a ResNet block, fused into the convolution.
    static func residualProgram(_ c: Case) -> (GraphFunction, weight: [Float], bias: [Float]) {
        let value = ConvolutionThreadingTests.value
        let shape = ConvolutionThreadingTests.outputShape(c)
        let weight = (0..<(c.outputs * c.input[1] / c.groups * c.kernel * c.kernel)).map { Float(($0 * 37) % 23) * 0.01 - 0.11 }
        let bias = (0..<c.outputs).map { Float($0 % 5) * 0.1 - 0.2 }
        let conv = GraphOperation(type: "conv", arguments: [
            "x": [.value("x")], "weight": [.value("w")], "bias": [.value("b")],
            "strides": [.constant(Tensor(ints: [Int32(c.stride), Int32(c.stride)], shape: [2]))],
            "pad_type": [.constant(Tensor(type: .string, shape: [], storage: .strings(["custom"])))],
            "pad": [.constant(Tensor(ints: c.pad.map(Int32.init), shape: [4]))],
            "groups": [.constant(Tensor(ints: [Int32(c.groups)], shape: []))],
        ], outputs: [value("c", shape)], blocks: [])
        let add = GraphOperation(type: "add", arguments: ["x": [.value("c")], "y": [.value("x")]], outputs: [value("s", shape)], blocks: [])
        let relu = GraphOperation(type: "relu", arguments: ["x": [.value("s")]], outputs: [value("r", shape)], blocks: [])
        let block = GraphBlock(operations: [conv, add, relu], outputs: ["r"], constants: [
            "w": Tensor(floats: weight, shape: [c.outputs, c.input[1] / c.groups, c.kernel, c.kernel]),
            "b": Tensor(floats: bias, shape: [c.outputs]),
        ])
        return (GraphFunction(name: "main", inputs: [value("x", c.input)], block: block), weight, bias)
    }

    static let cases: [Case] = [
        Case(input: [1, 512, 7, 7], outputs: 512, kernel: 3, stride: 1, dilation: 1, pad: [1, 1, 1, 1], groups: 1),    // ResNet-18 layer4
        Case(input: [1, 256, 14, 14], outputs: 512, kernel: 3, stride: 2, dilation: 1, pad: [1, 1, 1, 1], groups: 1),  // layer4's entry
        Case(input: [1, 1031, 9, 9], outputs: 48, kernel: 1, stride: 2, dilation: 1, pad: [0, 0, 0, 0], groups: 1),   // a deep 1×1, 5 rows
        Case(input: [1, 123, 9, 9], outputs: 49, kernel: 3, stride: 2, dilation: 1, pad: [1, 1, 1, 1], groups: 1),     // odd channel counts
        Case(input: [1, 256, 7, 7], outputs: 64, kernel: 3, stride: 1, dilation: 1, pad: [1, 1, 1, 1], groups: 2),     // groups: rows
    ]

    @Test("channel blocks compute float64's convolution + bias + ReLU at 1, 2 and 3 threads", arguments: cases)
    func matchesFloat64(_ c: Case) throws {
        // Every case but the grouped one splits by channels at 2 and 3 threads.
        let shape = ConvolutionThreadingTests.outputShape(c)
        let geometry = DNNLConvolution.Geometry(input: c.input, output: shape, weightShape: [c.outputs, c.input[1] / c.groups, c.kernel, c.kernel],
                                                groups: c.groups, strides: [c.stride, c.stride], dilations: [1, 1], padBefore: [c.pad[0], c.pad[2]],
                                                channelsLast: true)
        #expect([2, 3].map { ConvolutionOperations.splitsChannels(geometry, threads: $0) } == [c.groups == 1, c.groups == 1])
        let (function, weight, bias) = ConvolutionThreadingTests.program(c)
        let input = (0..<c.input.reduce(1, *)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let (want, _, scale) = ConvolutionThreadingTests.reference(c, input: input, weight: weight, bias: bias)
        try Self.expectAtEveryThreadCount(function, input: input, shape: c.input, equal: want, scale: scale)
    }

    @Test("channel blocks sum a fused residual (ResNet's block) as float64 does at 1, 2 and 3 threads",
          arguments: cases.filter { $0.stride == 1 && $0.outputs == $0.input[1] })
    func residualMatchesFloat64(_ c: Case) throws {
        let (function, weight, bias) = Self.residualProgram(c)
        let fused = FusionPass.run(function.block)
        #expect(fused.operations.count == 1 && fused.operations.first?.arguments["residuals"]?.count == 1, "conv + add + relu is one fused convolution")
        let input = (0..<c.input.reduce(1, *)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let (convolved, _, sums) = ConvolutionThreadingTests.reference(c, input: input, weight: weight, bias: bias, activation: false)
        let want = zip(convolved, input).map { max($0 + Double($1), 0) }
        let scale = zip(sums, input).map { $0 + abs(Double($1)) }
        try Self.expectAtEveryThreadCount(function, input: input, shape: c.input, equal: want, scale: scale)
    }

    /// Runs `function` at 1, 2 and 3 threads (every operation split) and expects its output `r` to equal `want`
    /// within 1e-6 of each value's `scale` (the sum of its terms' magnitudes). A sum of 4,608 terms in fp32, in
    /// the order oneDNN's kernel for the machine takes, is measured at most 1.0e-7 of that scale from float64 on
    /// an AVX2 machine, yet 3e-5 of the value itself where the terms cancel (which an error relative to the value
    /// failed on); a term lost or counted twice is about 2e-4 of the scale here.
    static func expectAtEveryThreadCount(_ function: GraphFunction, input: [Float], shape: [Int], equal want: [Double], scale: [Double]) throws {
        for threads in [1, 2, 3] {
            let got = try #require(try WorkSplit.$minimumPerThread.withValue(1) {
                try ConvolutionThreadingTests.run(function, input: input, shape: shape, threads: threads)
            }["r"])
            #expect(got.count == want.count)
            let worst = zip(zip(got, want), scale).map { abs(Double($0.0) - $0.1) / max(1, $1) }.max() ?? 0
            #expect(worst <= 1e-6, "\(threads) threads: worst difference \(worst) of the terms' magnitudes")
        }
    }
}
