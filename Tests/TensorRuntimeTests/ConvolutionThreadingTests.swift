import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// Convolutions and pooling split between threads (blocks of one
/// channels-last image's rows, or of a batch's images, each a
/// single-threaded oneDNN primitive on Dispatch's threads): the blocks
/// cover the output exactly, and the split computes what one primitive
/// does and what a direct float64 convolution does.
@Suite("Convolutions split between threads")
struct ConvolutionThreadingTests {
    /// One convolution case: `[N, C, H, W]` input, `outputs` channels, a square kernel.
    struct Case: CustomTestStringConvertible, Sendable {
        var input: [Int]
        var outputs: Int
        var kernel: Int
        var stride: Int
        var dilation: Int
        var pad: [Int]
        var groups: Int
        var testDescription: String { "x \(input) → \(outputs), \(kernel)×\(kernel) s\(stride) d\(dilation) pad \(pad) groups \(groups)" }
    }

    static let cases: [Case] = [
        Case(input: [1, 3, 17, 15], outputs: 8, kernel: 7, stride: 2, dilation: 1, pad: [3, 3, 3, 3], groups: 1),   // a ResNet stem
        Case(input: [1, 6, 9, 8], outputs: 6, kernel: 3, stride: 1, dilation: 1, pad: [1, 1, 1, 1], groups: 6),     // depthwise
        Case(input: [1, 6, 10, 7], outputs: 12, kernel: 5, stride: 2, dilation: 2, pad: [4, 3, 4, 2], groups: 3),
        Case(input: [1, 16, 7, 7], outputs: 24, kernel: 1, stride: 1, dilation: 1, pad: [0, 0, 0, 0], groups: 1),   // pointwise
        Case(input: [1, 4, 5, 6], outputs: 4, kernel: 3, stride: 2, dilation: 1, pad: [0, 2, 1, 0], groups: 1),     // padding after only
        Case(input: [3, 5, 6, 6], outputs: 7, kernel: 3, stride: 1, dilation: 1, pad: [1, 1, 1, 1], groups: 1),     // a batch
        Case(input: [1, 8, 8, 10], outputs: 16, kernel: 1, stride: 2, dilation: 1, pad: [0, 0, 0, 0], groups: 1),   // last row and column unread
        Case(input: [1, 8, 1, 1], outputs: 4, kernel: 1, stride: 1, dilation: 1, pad: [0, 0, 0, 0], groups: 1),     // one row: not split
    ]

    static func value(_ name: String, _ shape: [Int]) -> (name: String, type: ValueType) {
        (name, ValueType(element: .float32, shape: shape.map { $0 }))
    }

    /// conv(x) + bias → relu → + x' (a residual when the shapes allow), as the engine lays it out: fused, channels-last.
    static func program(_ c: Case, pool: String = "max_pool", excludePadding: Bool = false) -> (GraphFunction, weight: [Float], bias: [Float]) {
        let perGroup = c.input[1] / c.groups
        let shape = outputShape(c)
        let pooled = [shape[0], shape[1], (shape[2] - 1) / 2 + 1, (shape[3] - 1) / 2 + 1]
        let weight = (0..<(c.outputs * perGroup * c.kernel * c.kernel)).map { Float(($0 * 37) % 23) * 0.05 - 0.55 }
        let bias = (0..<c.outputs).map { Float($0 % 5) * 0.1 - 0.2 }
        let conv = GraphOperation(type: "conv", arguments: [
            "x": [.value("x")], "weight": [.value("w")], "bias": [.value("b")],
            "strides": [.constant(Tensor(ints: [Int32(c.stride), Int32(c.stride)], shape: [2]))],
            "dilations": [.constant(Tensor(ints: [Int32(c.dilation), Int32(c.dilation)], shape: [2]))],
            "pad_type": [.constant(Tensor(type: .string, shape: [], storage: .strings(["custom"])))],
            "pad": [.constant(Tensor(ints: c.pad.map(Int32.init), shape: [4]))],
            "groups": [.constant(Tensor(ints: [Int32(c.groups)], shape: []))],
        ], outputs: [value("c", shape)], blocks: [])
        let relu = GraphOperation(type: "relu", arguments: ["x": [.value("c")]], outputs: [value("r", shape)], blocks: [])
        let pool = GraphOperation(type: pool, arguments: [
            "x": [.value("r")], "kernel_sizes": [.constant(Tensor(ints: [3, 3], shape: [2]))],
            "exclude_padding_from_average": [.constant(Tensor(ints: [excludePadding ? 1 : 0], shape: []))],
            "strides": [.constant(Tensor(ints: [2, 2], shape: [2]))],
            "pad_type": [.constant(Tensor(type: .string, shape: [], storage: .strings(["custom"])))],
            "pad": [.constant(Tensor(ints: [1, 1, 1, 1], shape: [4]))],
        ], outputs: [value("p", pooled)], blocks: [])
        let block = GraphBlock(operations: [conv, relu, pool], outputs: ["r", "p"], constants: [
            "w": Tensor(floats: weight, shape: [c.outputs, perGroup, c.kernel, c.kernel]),
            "b": Tensor(floats: bias, shape: [c.outputs]),
        ])
        return (GraphFunction(name: "main", inputs: [value("x", c.input)], block: block), weight, bias)
    }

    /// `[N, outputs, H, W]` of the convolution.
    static func outputShape(_ c: Case) -> [Int] {
        let effective = (c.kernel - 1) * c.dilation + 1
        return [c.input[0], c.outputs, (c.input[2] + c.pad[0] + c.pad[1] - effective) / c.stride + 1,
                (c.input[3] + c.pad[2] + c.pad[3] - effective) / c.stride + 1]
    }

    /// The program's outputs on `threads` threads, laid out as the engine lays it out.
    static func run(_ function: GraphFunction, input: [Float], shape: [Int], threads: Int) throws -> [String: [Float]] {
        var laidOut = function
        laidOut.block = ChannelsLastLayout.run(FusionPass.run(function.block), inputs: function.inputs)
        #expect(laidOut.block.operations.contains { $0.type == "fused_conv" && $0.outputs.first?.name.hasSuffix(ChannelsLastLayout.suffix) == true },
                "the convolution runs channels-last")
        return try PlannedRun(laidOut, input: input, shape: shape, threads: threads).outputs()
    }

    /// A direct float64 convolution of `c` (with bias, and ReLU when `activation`), its shape, and for every output
    /// value the sum of its terms' magnitudes (|bias| + Σ|x·w|): the scale fp32 summation errors grow with.
    static func reference(_ c: Case, input: [Float], weight: [Float], bias: [Float],
                          activation: Bool = true) -> (values: [Double], shape: [Int], scale: [Double]) {
        let (n, channels, height, width) = (c.input[0], c.input[1], c.input[2], c.input[3])
        let effective = (c.kernel - 1) * c.dilation + 1
        let outH = (height + c.pad[0] + c.pad[1] - effective) / c.stride + 1
        let outW = (width + c.pad[2] + c.pad[3] - effective) / c.stride + 1
        let perGroup = channels / c.groups, outPerGroup = c.outputs / c.groups
        var result: [Double] = [], scale: [Double] = []
        for image in 0..<n {
            for o in 0..<c.outputs {
                let g = o / outPerGroup
                for y in 0..<outH {
                    for x in 0..<outW {
                        var sum = Double(bias[o]), magnitude = abs(Double(bias[o]))
                        for i in 0..<perGroup {
                            for ky in 0..<c.kernel {
                                for kx in 0..<c.kernel {
                                    let iy = y * c.stride - c.pad[0] + ky * c.dilation, ix = x * c.stride - c.pad[2] + kx * c.dilation
                                    guard iy >= 0, iy < height, ix >= 0, ix < width else { continue }
                                    let v = input[((image * channels + g * perGroup + i) * height + iy) * width + ix]
                                    let term = Double(v) * Double(weight[((o * perGroup + i) * c.kernel + ky) * c.kernel + kx])
                                    sum += term
                                    magnitude += abs(term)
                                }
                            }
                        }
                        result.append(activation ? max(sum, 0) : sum)
                        scale.append(magnitude)
                    }
                }
            }
        }
        return (result, [n, c.outputs, outH, outW], scale)
    }

    @Test("row blocks cover every output row once and read only the image", arguments: cases)
    func blocksCover(_ c: Case) throws {
        let effective = (c.kernel - 1) * c.dilation + 1
        let outH = (c.input[2] + c.pad[0] + c.pad[1] - effective) / c.stride + 1
        guard outH >= 2 else {
            #expect(DNNLConvolution.rowBlocks(input: c.input, output: [c.input[0], c.outputs, outH, 1], kernel: [c.kernel, c.kernel],
                                              strides: [c.stride, c.stride], dilations: [c.dilation, c.dilation],
                                              padBefore: [c.pad[0], c.pad[2]], parts: 2) == nil)
            return
        }
        for parts in [2, 3, 4, 7] {
            let blocks = try #require(DNNLConvolution.rowBlocks(input: c.input, output: [c.input[0], c.outputs, outH, 1], kernel: [c.kernel, c.kernel],
                                                                strides: [c.stride, c.stride], dilations: [c.dilation, c.dilation],
                                                                padBefore: [c.pad[0], c.pad[2]], parts: parts))
            #expect(blocks.count == min(parts, outH))
            #expect(blocks.map(\.first) == blocks.indices.map { index in blocks[..<index].reduce(0) { $0 + $1.count } })
            #expect(blocks.reduce(0) { $0 + $1.count } == outH)
            for block in blocks {
                #expect(block.inputFirst >= 0 && block.inputFirst + block.input[2] <= c.input[2])
                // The block's first output row reads input row first·s − pad, its own row −padBefore.
                #expect(block.first * c.stride - c.pad[0] == block.inputFirst - block.padBefore[0])
            }
        }
    }

    @Test("split between 2, 3 and 7 threads, outputs match one thread and float64", arguments: cases)
    func matches(_ c: Case) throws {
        let (function, weight, bias) = Self.program(c)
        let count = c.input.reduce(1, *)
        let input = (0..<count).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let single = try Self.run(function, input: input, shape: c.input, threads: 1)
        let (want, _, _) = Self.reference(c, input: input, weight: weight, bias: bias)
        let got = try #require(single["r"])
        #expect(got.count == want.count)
        #expect(zip(got, want).allSatisfy { abs(Double($0) - $1) <= 1e-5 * max(1, abs($1)) })
        for threads in [2, 3, 7] {
            // These convolutions are too small to be split by default (see `tinyNotSplit`).
            let split = try WorkSplit.$minimumPerThread.withValue(1) { try Self.run(function, input: input, shape: c.input, threads: threads) }
            for name in ["r", "p"] {
                let a = try #require(single[name]), b = try #require(split[name])
                #expect(a.count == b.count)
                #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 1e-5 * max(1, abs($0)) }, "\(name) on \(threads) threads")
            }
        }
    }

    @Test("a tiny convolution or pooling runs on the calling thread; a large one is split", arguments: [2, 3])
    func tinyNotSplit(threads: Int) {
        func geometry(_ input: [Int], _ output: [Int], kernel: Int, groups: Int = 1) -> DNNLConvolution.Geometry {
            DNNLConvolution.Geometry(input: input, output: output, weightShape: [output[1], input[1] / groups, kernel, kernel], groups: groups,
                                     strides: [1, 1], dilations: [1, 1], padBefore: [kernel / 2, kernel / 2], channelsLast: true)
        }
        // A zoo network's 16-channel 4×4 pointwise convolution: 4 K multiply-adds, far less than a thread's hand-off costs.
        let tiny = geometry([1, 16, 4, 4], [1, 16, 4, 4], kernel: 1)
        #expect(ConvolutionOperations.blocks(tiny, kernel: [1, 1], threads: threads) == nil)
        // Its 3×3 max pool over 16 channels (as pooling plans it: a window per channel).
        let pool = geometry([1, 16, 4, 4], [1, 16, 4, 4], kernel: 3, groups: 16)
        #expect(ConvolutionOperations.blocks(pool, kernel: [3, 3], threads: threads) == nil)
        // A MobileNet-sized 3×3 convolution, 32 → 32 channels at 56×56: 29 M multiply-adds.
        let large = geometry([1, 32, 56, 56], [1, 32, 56, 56], kernel: 3)
        #expect(ConvolutionOperations.blocks(large, kernel: [3, 3], threads: threads)?.count == threads)
        #expect(WorkSplit.workers(threads: threads, work: 4096, items: 16) == 1)
        #expect(WorkSplit.workers(threads: threads, work: 1 << 24, items: 16) == threads)
        #expect(WorkSplit.workers(threads: threads, work: 1 << 24, items: 1) == 1)
    }

    @Test("a channels-last pooling (its own loop, at 1 and 2 threads) gives what oneDNN's pooling gives", arguments: cases)
    func channelsLastPoolingMatchesOneDNN(_ c: Case) throws {
        let count = c.input.reduce(1, *)
        let input = (0..<count).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        for (pool, exclude) in [("max_pool", false), ("avg_pool", false), ("avg_pool", true)] {
            let (function, _, _) = Self.program(c, pool: pool, excludePadding: exclude)
            let dnnl = try ConvolutionOperations.$channelsLastPoolingOnDNNL.withValue(true) {
                try Self.run(function, input: input, shape: c.input, threads: 1)
            }
            for threads in [1, 2] {
                let own = try WorkSplit.$minimumPerThread.withValue(1) { try Self.run(function, input: input, shape: c.input, threads: threads) }
                let a = try #require(own["p"]), b = try #require(dnnl["p"])
                #expect(a.count == b.count && !a.isEmpty)
                #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 1e-6 * max(1, abs($1)) }, "\(pool) exclude \(exclude) threads \(threads)")
            }
        }
    }
}
