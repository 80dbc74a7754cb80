import Testing
@testable import TensorRuntime

/// Kernel taps that only ever read padding are dropped from a convolution
/// at plan time (DeepLabV3's atrous convolutions on a small feature map),
/// and the convolution still computes what float64 computes with all of them.
@Suite("Convolution taps that read only padding")
struct ConvolutionTapsTests {
    static func geometry(_ input: [Int], kernel: [Int], dilations: [Int], pad: [Int], strides: [Int] = [1, 1]) -> DNNLConvolution.Geometry {
        let output = (0..<2).map { (axis: Int) -> Int in
            let effective = (kernel[axis] - 1) * dilations[axis] + 1
            return (input[axis + 2] + 2 * pad[axis] - effective) / strides[axis] + 1
        }
        return DNNLConvolution.Geometry(input: input, output: [input[0], 4] + output, weightShape: [4, input[1]] + kernel, groups: 1,
                                        strides: strides, dilations: dilations, padBefore: pad, channelsLast: true)
    }

    @Test("DeepLabV3's rates 24 and 36 on 14 × 14 keep the centre tap, rate 12 keeps all nine, a 5 × 12 image trims rows only")
    func readTaps() throws {
        for rate in [24, 36] {
            let atrous = Self.geometry([1, 8, 14, 14], kernel: [3, 3], dilations: [rate, rate], pad: [rate, rate])
            #expect(ConvolutionTaps.readTaps(atrous) == [1..<2, 1..<2])
            let (trimmed, _) = try #require(ConvolutionTaps.trimmed(atrous, weights: [Float](repeating: 1, count: 4 * 8 * 9)))
            #expect(trimmed.weightShape == [4, 8, 1, 1] && trimmed.padBefore == [0, 0] && trimmed.output == atrous.output)
            #expect(trimmed.padAfter(transposed: false) == [0, 0])
        }
        let twelve = Self.geometry([1, 8, 14, 14], kernel: [3, 3], dilations: [12, 12], pad: [12, 12])
        #expect(ConvolutionTaps.readTaps(twelve) == [0..<3, 0..<3])
        #expect(ConvolutionTaps.trimmed(twelve, weights: [Float](repeating: 1, count: 4 * 8 * 9)) == nil)
        let wide = Self.geometry([1, 8, 5, 12], kernel: [3, 3], dilations: [6, 6], pad: [6, 6])
        #expect(ConvolutionTaps.readTaps(wide) == [1..<2, 0..<3])
        // Stride 2, 3 rows, pad 4, dilation 4: two outputs read rows −4, −2 (tap 0), 0, 2 (tap 1), 4, 6 (tap 2).
        let strided = Self.geometry([1, 8, 3, 3], kernel: [3, 3], dilations: [4, 4], pad: [4, 4], strides: [2, 2])
        #expect(ConvolutionTaps.readTaps(strided) == [1..<2, 1..<2])
        #expect(try #require(ConvolutionTaps.trimmed(strided, weights: [Float](repeating: 1, count: 4 * 8 * 9))).geometry.padBefore == [0, 0])
        // Stride 3 over 2 rows with pad 2: tap 1 reads rows −1 and 2, neither inside, but lies between taps 0 and 2, which do.
        let skipping = Self.geometry([1, 8, 2, 2], kernel: [3, 3], dilations: [1, 1], pad: [2, 2], strides: [3, 3])
        #expect(ConvolutionTaps.readTaps(skipping) == [0..<3, 0..<3])
        // An ordinary 3 × 3 convolution keeps every tap.
        #expect(ConvolutionTaps.trimmed(Self.geometry([1, 8, 7, 7], kernel: [3, 3], dilations: [1, 1], pad: [1, 1]),
                                        weights: [Float](repeating: 1, count: 4 * 8 * 9)) == nil)
    }

    @Test("the kept taps' weights are cut in order: output, input, then the kept rows and columns")
    func weightsCut() throws {
        let wide = Self.geometry([1, 2, 5, 12], kernel: [3, 3], dilations: [6, 6], pad: [6, 6])
        let weights = (0..<(4 * 2 * 9)).map(Float.init)
        let (trimmed, cut) = try #require(ConvolutionTaps.trimmed(wide, weights: weights))
        #expect(trimmed.weightShape == [4, 2, 1, 3] && trimmed.padBefore == [0, 6])
        // Row 1 of every 3 × 3 kernel: values 3, 4, 5 of each plane of 9.
        #expect(cut == (0..<8).flatMap { plane in (3..<6).map { Float(plane * 9 + $0) } })
    }

    @Test("DeepLabV3's rate-12 convolution on 14 × 14 runs as three regions of rows, each with the kernel rows it reads the image with")
    func rowRegions() throws {
        let atrous = Self.geometry([1, 8, 14, 14], kernel: [3, 3], dilations: [12, 12], pad: [12, 12])
        let weights = (0..<(4 * 8 * 9)).map(Float.init)
        let regions = try #require(ConvolutionTaps.rowRegions(atrous, weights: weights))
        #expect(regions.map { $0.block.geometry.output[2] } == [2, 10, 2])
        #expect(regions.map { $0.block.geometry.weightShape } == [[4, 8, 2, 3], [4, 8, 1, 3], [4, 8, 2, 3]])
        #expect(regions.map { $0.block.geometry.input[2] } == [14, 10, 14])
        #expect(regions.map { $0.block.geometry.padBefore } == [[0, 12], [0, 12], [0, 12]])
        // Offsets in floats: the middle region starts at input row 2 and output row 2 (14 × 8 and 14 × 4 floats a row).
        #expect(regions.map(\.block.input) == [0, 2 * 14 * 8, 0])
        #expect(regions.map(\.block.output) == [0, 2 * 14 * 4, 12 * 14 * 4])
        #expect(regions[1].weights == (0..<32).flatMap { plane in (3..<6).map { Float(plane * 9 + $0) } })
        #expect(regions.allSatisfy { $0.block.geometry.padAfter(transposed: false)[0] == 0 })
        // An ordinary 3 × 3 convolution saves too little (19 of 21 kernel rows on 7 rows); a batch is not split.
        #expect(ConvolutionTaps.rowRegions(Self.geometry([1, 8, 7, 7], kernel: [3, 3], dilations: [1, 1], pad: [1, 1]), weights: weights) == nil)
        #expect(ConvolutionTaps.rowRegions(Self.geometry([2, 8, 14, 14], kernel: [3, 3], dilations: [12, 12], pad: [12, 12]), weights: weights) == nil)
    }

    @Test("a trimmed convolution computes float64's convolution + bias + ReLU with every tap at 1, 2 and 3 threads", arguments: [
        ConvolutionThreadingTests.Case(input: [1, 8, 14, 14], outputs: 8, kernel: 3, stride: 1, dilation: 12, pad: [12, 12, 12, 12], groups: 1),
        ConvolutionThreadingTests.Case(input: [1, 4, 9, 9], outputs: 4, kernel: 3, stride: 2, dilation: 7, pad: [7, 7, 7, 7], groups: 1),
        ConvolutionThreadingTests.Case(input: [1, 16, 5, 5], outputs: 8, kernel: 3, stride: 1, dilation: 6, pad: [6, 6, 6, 6], groups: 1),
        ConvolutionThreadingTests.Case(input: [1, 16, 5, 12], outputs: 8, kernel: 3, stride: 1, dilation: 6, pad: [6, 6, 6, 6], groups: 1),
        ConvolutionThreadingTests.Case(input: [1, 6, 14, 14], outputs: 6, kernel: 3, stride: 1, dilation: 24, pad: [24, 24, 24, 24], groups: 3),
    ])
    func matchesFloat64(_ c: ConvolutionThreadingTests.Case) throws {
        let (function, weight, bias) = ConvolutionThreadingTests.program(c)
        let input = (0..<c.input.reduce(1, *)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        let (want, _, scale) = ConvolutionThreadingTests.reference(c, input: input, weight: weight, bias: bias)
        try ConvolutionChannelSplitTests.expectAtEveryThreadCount(function, input: input, shape: c.input, equal: want, scale: scale)
    }
}
