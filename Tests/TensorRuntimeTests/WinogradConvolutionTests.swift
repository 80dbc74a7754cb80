import Testing
@testable import TensorRuntime

/// 3×3 convolutions as Winograd's F(2×2, 3×3) (`WinogradConvolution`):
/// which convolutions take it, and chains of them (padding on any side,
/// partial tiles, a residual sum and ReLU fused, a batch) against a direct
/// float64 computation, channels-last and in channel blocks, at 1, 2 and 3
/// threads, split by tiles and by output channels.
@Suite("Winograd convolutions", .enabled(if: WinogradConvolution.supported))
struct WinogradConvolutionTests {
    @Test("3×3, stride 1, one group, 64 or more input and 32 or more output channels in blocks of 8, 10×10 or more outputs")
    func whichConvolutions() {
        WinogradConvolution.$enabled.withValue(true) {
            func applies(kernel: [Int] = [3, 3], strides: [Int] = [1, 1], dilations: [Int] = [1, 1], groups: Int = 1, inputs: Int = 64,
                         outputs: Int = 64, output: [Int] = [56, 56]) -> Bool {
                WinogradConvolution.applies(kernel: kernel, strides: strides, dilations: dilations, groups: groups, inputs: inputs, outputs: outputs,
                                            output: output)
            }
            #expect(applies())
            #expect(applies(inputs: 128, outputs: 32, output: [10, 10]))
            #expect(applies(inputs: 512, outputs: 512, output: [14, 14]))
            #expect(!applies(output: [7, 7]), "ResNet-18's last stage stays on oneDNN")
            #expect(!applies(output: [9, 9]))
            #expect(!applies(inputs: 32, outputs: 32))
            #expect(!applies(inputs: 72, outputs: 24))
            #expect(!applies(inputs: 68))
            #expect(!applies(outputs: 36))
            #expect(!applies(kernel: [5, 5]))
            #expect(!applies(kernel: [3, 1]))
            #expect(!applies(strides: [2, 2]))
            #expect(!applies(dilations: [2, 2]))
            #expect(!applies(groups: 2, inputs: 128))
            #expect(!applies(output: [56, 56, 56]))
        }
        #expect(!WinogradConvolution.$enabled.withValue(false) { WinogradConvolution.applies(kernel: [3, 3], strides: [1, 1], dilations: [1, 1],
                                                                                             groups: 1, inputs: 64, outputs: 64, output: [56, 56]) })
    }

    /// `c1 = conv(x)` with padding `pad` (top, bottom, left, right), `r1 =
    /// relu(c1)`, `c2 = conv(r1)` padded by 1, `r2 = relu(c2 + c1)`: 64
    /// channels throughout.
    static func chain(batch: Int, height: Int, width: Int, pad: [Int]) -> GraphFunction {
        let channels = 64
        let out = [batch, channels, height + pad[0] + pad[1] - 2, width + pad[2] + pad[3] - 2]
        var first = ChannelBlockingTests.conv("x", "c1", shape: out, kernel: 3)
        first.arguments["pad"] = [.constant(Tensor(ints: pad.map(Int32.init), shape: [4]))]
        let constants = ChannelBlockingTests.weights("c1", outputs: channels, inputs: channels, kernel: 3, seed: 1)
            .merging(ChannelBlockingTests.weights("c2", outputs: channels, inputs: channels, kernel: 3, seed: 2)) { $1 }
        let operations = [
            first, ChannelBlockingTests.unary("relu", "c1", "r1", out),
            ChannelBlockingTests.conv("r1", "c2", shape: out, kernel: 3), ChannelBlockingTests.add("c2", "c1", "s2", out),
            ChannelBlockingTests.unary("relu", "s2", "r2", out),
        ]
        return GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [batch, channels, height, width])],
                             block: GraphBlock(operations: operations, outputs: ["r2"], constants: constants))
    }

    static let cases: [(batch: Int, height: Int, width: Int, pad: [Int])] = [
        (1, 10, 10, [1, 1, 1, 1]),
        // Partial tiles at the bottom and right, padding on one side of each axis.
        (1, 11, 13, [0, 2, 1, 0]),
        // No padding; 2 images: 160 tiles, split by tiles at 2 threads and by channels at 3.
        (2, 18, 22, [0, 0, 0, 0]),
    ]

    @Test("a chain with a residual sum and ReLUs computes float64's result, channels-last and in blocks, at 1, 2 and 3 threads",
          arguments: cases.indices)
    func chainMatchesFloat64(index: Int) throws {
        let (batch, height, width, pad) = Self.cases[index]
        let function = Self.chain(batch: batch, height: height, width: width, pad: pad)
        let constants = function.block.constants
        let input = (0..<(batch * 64 * height * width)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let outHeight = height + pad[0] + pad[1] - 2, outWidth = width + pad[2] + pad[3] - 2
        let c1 = DirectConvolution.float64(input.map(Double.init), batch: batch, channels: 64, height: height, width: width,
                                           weight: constants["c1_w"]?.floats ?? [], bias: constants["c1_b"]?.floats ?? [], kernel: 3,
                                           padTop: pad[0], padLeft: pad[2], outHeight: outHeight, outWidth: outWidth)
        let c2 = DirectConvolution.float64(c1.map { max($0, 0) }, batch: batch, channels: 64, height: outHeight, width: outWidth,
                                           weight: constants["c2_w"]?.floats ?? [], bias: constants["c2_b"]?.floats ?? [], kernel: 3,
                                           padTop: 1, padLeft: 1, outHeight: outHeight, outWidth: outWidth)
        let want = zip(c2, c1).map { max($0 + $1, 0) }

        try ChannelBlocking.$chosenWidth.withValue(WinogradConvolution.blockWidth) { try WinogradConvolution.$enabled.withValue(true) {
            let channelsLast = ChannelsLastLayout.run(FusionPass.run(function.block), inputs: function.inputs)
            var blocked = function
            blocked.block = ChannelBlocking.rewritten(channelsLast, blocking: Set(ChannelBlocking.candidates(channelsLast, inputs: function.inputs).keys))
            var laidOut = function
            laidOut.block = channelsLast
            for (layout, candidate) in [("channels-last", laidOut), ("blocks", blocked)] {
                for threads in [1, 2, 3] {
                    let run = try WorkSplit.$minimumPerThread.withValue(1) {
                        try PlannedRun(candidate, input: input, shape: [batch, 64, height, width], threads: threads)
                    }
                    let splits = run.plan.steps.filter { $0.kind == "fused_conv" }.map { $0.split ?? "" }
                    #expect(splits.count == 2 && splits.allSatisfy { $0.hasPrefix("winograd") }, "\(layout), \(threads) threads: \(splits)")
                    if threads > 1 {
                        let tiles = batch * ((outHeight + 1) / 2) * ((outWidth + 1) / 2)
                        let expected = tiles >= WinogradConvolution.tilesPerThread * threads ? "tile blocks" : "channel blocks"
                        #expect(splits.allSatisfy { $0 == "winograd, \(threads) \(expected)" }, "\(layout), \(threads) threads: \(splits)")
                    }
                    // The layout passes turn the function's output back into [N, C, H, W].
                    let got = try run.floats("r2")
                    #expect(got.count == want.count)
                    let worst = zip(got, want).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? .infinity
                    #expect(worst <= 1e-5, "\(layout), \(threads) threads: worst difference \(worst)")
                }
            }
        } }
    }

    @Test("the fused post-operations: a residual of the output's shape, then a clamp; anything else after the convolution")
    func fusedPostOperations() {
        let residual = PlanValue(id: 7, type: .float32, shape: [1, 4, 4, 8], constant: nil)
        let add = ConvolutionOperations.PostOperation(kind: "add", alpha: 0, beta: 0, residual: residual)
        let relu = ConvolutionOperations.PostOperation(kind: "relu", alpha: 0, beta: 0, residual: nil)
        let clip = ConvolutionOperations.PostOperation(kind: "clip", alpha: -1, beta: 2, residual: nil)
        let sigmoid = ConvolutionOperations.PostOperation(kind: "sigmoid", alpha: 0, beta: 0, residual: nil)
        let stored = [1, 4, 4, 8]
        let both = WinogradConvolution.fused([add, relu, sigmoid], stored: stored)
        #expect(both.count == 2 && both.residual?.id == 7 && both.low == 0 && both.high == .infinity)
        let clamp = WinogradConvolution.fused([clip, add], stored: stored)
        #expect(clamp.count == 1 && clamp.residual == nil && clamp.low == -1 && clamp.high == 2)
        let none = WinogradConvolution.fused([sigmoid, relu], stored: stored)
        #expect(none.count == 0 && none.low == -.infinity && none.high == .infinity)
        // A residual broadcast from another shape is summed after the convolution.
        let broadcast = WinogradConvolution.fused([add, relu], stored: [1, 4, 4, 16])
        #expect(broadcast.count == 0 && broadcast.residual == nil)
    }
}
