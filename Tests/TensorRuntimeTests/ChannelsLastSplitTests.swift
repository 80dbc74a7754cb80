import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// A squeeze-and-excitation block's channels-last kernels split on the
/// thread team: `spatial_mean` in blocks of channels, `channel_mul` in
/// blocks of positions. On EfficientNet-B0's shapes at 1, 2 and 3 threads
/// both equal a float64 computation within 1e-5, and the split chosen is
/// the one intended (small images stay on one thread).
@Suite("Channels-last kernels split between threads")
struct ChannelsLastSplitTests {
    /// `[N, H, W, C]` shapes of EfficientNet-B0's squeeze-and-excitation blocks, and a small one.
    static let shapes: [[Int]] = [[1, 56, 56, 144], [1, 14, 14, 480], [1, 7, 7, 1152], [1, 7, 7, 40], [2, 9, 9, 200]]

    /// mean = spatial_mean(x); y = channel_mul(x, mean · 0.5): the scale is computed, as in the models.
    static func run(_ shape: [Int], input: [Float], threads: Int) throws -> (mean: [Float], product: [Float]) {
        let pooled = [shape[0], 1, 1, shape[3]]
        let mean = GraphOperation(type: "spatial_mean", arguments: ["x": [.value("x")]], outputs: [ConvolutionThreadingTests.value("m", pooled)], blocks: [])
        let half = GraphOperation(type: "mul", arguments: ["x": [.value("m")], "y": [.constant(Tensor(floats: [0.5], shape: []))]],
                                  outputs: [ConvolutionThreadingTests.value("h", pooled)], blocks: [])
        let product = GraphOperation(type: "channel_mul", arguments: ["x": [.value("x")], "y": [.value("h")]], outputs: [ConvolutionThreadingTests.value("p", shape)], blocks: [])
        let function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", shape)],
                                     block: GraphBlock(operations: [mean, half, product], outputs: ["m", "p"], constants: [:]))
        let run = try PlannedRun(function, input: input, shape: shape, threads: threads)
        return (try run.floats("m"), try run.floats("p"))
    }

    @Test("1, 2 and 3 threads equal float64", arguments: shapes)
    func matchesFloat64(_ shape: [Int]) throws {
        let (batch, positions, channels) = (shape[0], shape[1] * shape[2], shape[3])
        let input = (0..<shape.reduce(1, *)).map { Float(($0 * 53) % 41) * 0.05 - 1 }
        var mean = [Double](repeating: 0, count: batch * channels)
        for n in 0..<batch {
            for p in 0..<positions {
                for c in 0..<channels { mean[n * channels + c] += Double(input[(n * positions + p) * channels + c]) }
            }
        }
        mean = mean.map { $0 / Double(positions) }
        let product = input.indices.map { index in Double(input[index]) * Double(Float(Float(mean[index / (positions * channels) * channels + index % channels]) * 0.5)) }
        for threads in [1, 2, 3] {
            let got = try Self.run(shape, input: input, threads: threads)
            #expect(zip(got.mean, mean).allSatisfy { abs(Double($0) - $1) <= 1e-5 * max(1, abs($1)) }, "spatial_mean on \(threads) threads")
            #expect(zip(got.product, product).allSatisfy { abs(Double($0) - $1) <= 1e-5 * max(1, abs($1)) }, "channel_mul on \(threads) threads")
        }
    }

    @Test("the split: blocks of 64 channels or more, positions, nothing under 16 K elements")
    func chosenSplit() {
        #expect(ChannelsLastOperations.meanParts(count: 14 * 14 * 480, channels: 480, threads: 2) == 2)
        #expect(ChannelsLastOperations.meanParts(count: 14 * 14 * 480, channels: 480, threads: 3) == 3)
        #expect(ChannelsLastOperations.meanParts(count: 112 * 112 * 32, channels: 32, threads: 2) == 1)   // under 64 channels a block
        #expect(ChannelsLastOperations.meanParts(count: 7 * 7 * 40, channels: 40, threads: 2) == 1)       // under 16 K elements
        #expect(ChannelsLastOperations.meanParts(count: 56 * 56 * 144, channels: 144, threads: 1) == 1)
        #expect(ChannelsLastOperations.productParts(count: 7 * 7 * 1152, rows: 49, threads: 2) == 2)
        #expect(ChannelsLastOperations.productParts(count: 7 * 7 * 40, rows: 49, threads: 2) == 1)
        #expect(ChannelsLastOperations.productParts(count: 56 * 56 * 144, rows: 56 * 56, threads: 3) == 3)
    }
}

/// The layout change at a CNN's input and output (`layout_transpose`) split
/// into blocks of column tiles: at 1, 2 and 3 threads every element lands
/// where the definition puts it, both ways.
@Suite("Layout changes split between threads")
struct LayoutTransposeSplitTests {
    @Test("1, 2 and 3 threads move every element to its place", arguments: [[1, 3, 224, 224], [2, 5, 41, 37], [1, 1280, 1, 1], [1, 96, 7, 7]])
    func exact(_ shape: [Int]) throws {
        let (batch, channels, positions) = (shape[0], shape[1], shape[2] * shape[3])
        let input = (0..<shape.reduce(1, *)).map { Float($0) }
        let last = [batch, shape[2], shape[3], channels]
        let there = GraphOperation(type: "layout_transpose", arguments: ["x": [.value("x")]],
                                   outputs: [(name: "t", type: ValueType(element: .float32, shape: last.map { $0 }))], blocks: [])
        let back = GraphOperation(type: "layout_transpose", arguments: ["x": [.value("t")],
                                                                       "channels_last": [.constant(Tensor(ints: [0], shape: [], type: .bool))]],
                                  outputs: [(name: "u", type: ValueType(element: .float32, shape: shape.map { $0 }))], blocks: [])
        let function = GraphFunction(name: "main", inputs: [(name: "x", type: ValueType(element: .float32, shape: shape.map { $0 }))],
                                     block: GraphBlock(operations: [there, back], outputs: ["t", "u"], constants: [:]))
        for threads in [1, 2, 3] {
            let run = try PlannedRun(function, input: input, shape: shape, threads: threads)
            let moved = try run.floats("t")
            let want = (0..<input.count).map { index -> Float in
                let n = index / (positions * channels), p = index / channels % positions, c = index % channels
                return input[(n * channels + c) * positions + p]
            }
            #expect(moved == want, "to channels-last on \(threads) threads")
            #expect(try run.floats("u") == input, "and back on \(threads) threads")
        }
        let tiles = (positions + 31) / 32
        #expect(ConvolutionOperations.layoutTransposeParts(count: input.count, columnTiles: tiles, threads: 2) == (input.count >= 1 << 14 ? 2 : 1))
    }
}
