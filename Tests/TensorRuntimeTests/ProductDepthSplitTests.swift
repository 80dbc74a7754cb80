import Foundation
import Testing
@testable import TensorRuntime

/// One-row products (a decoder's one-token step) on several threads split
/// the depth of their weights: each thread streams a contiguous block of
/// rows into its own partial sums, which are added with the bias, the
/// activation and the residual after. Against float64 at 1, 2 and 3
/// threads, with GELU and with a residual, over packed weights and over a
/// large product's blocks of columns.
@Suite("One-row products split by depth")
struct ProductDepthSplitTests {
    static let (k, n) = (200, 136)

    /// `x · w + b`, then GELU (tanh) or plus `x · v` (a residual the fusion pass gives the product), for `x` of `[1, 1, k]`.
    static func weight(_ n: Int) -> [Float] { (0..<(k * n)).map { Float(($0 * 29) % 37) * 0.01 - 0.18 } }
    static func other(_ n: Int) -> [Float] { (0..<(k * n)).map { Float(($0 * 13) % 31) * 0.01 - 0.15 } }
    static func bias(_ n: Int) -> [Float] { (0..<n).map { Float($0 % 11) * 0.05 - 0.25 } }

    static func function(columns n: Int, residual: Bool, rows: Int = 1) -> GraphFunction {
        let weight = weight(n), other = other(n), bias = bias(n)
        let shape = [1, rows, n]
        var operations = [
            GraphOperation(type: "matmul", arguments: ["x": [.value("x")], "y": [.value("w")]], outputs: [ConvolutionThreadingTests.value("m", shape)], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("m")], "y": [.value("b")]], outputs: [ConvolutionThreadingTests.value("a", shape)], blocks: []),
        ]
        if residual {
            operations.insert(GraphOperation(type: "matmul", arguments: ["x": [.value("x")], "y": [.value("v")]],
                                             outputs: [ConvolutionThreadingTests.value("r", shape)], blocks: []), at: 0)
            operations.append(GraphOperation(type: "add", arguments: ["x": [.value("a")], "y": [.value("r")]], outputs: [ConvolutionThreadingTests.value("out", shape)],
                                             blocks: []))
        } else {
            operations.append(GraphOperation(type: "gelu", arguments: ["x": [.value("a")],
                                                                      "mode": [.constant(Tensor(type: .string, shape: [], storage: .strings(["TANH_APPROXIMATION"])))]],
                                             outputs: [ConvolutionThreadingTests.value("out", shape)], blocks: []))
        }
        let block = GraphBlock(operations: operations, outputs: ["out"], constants: [
            "w": Tensor(floats: weight, shape: [k, n]), "v": Tensor(floats: other, shape: [k, n]), "b": Tensor(floats: bias, shape: [n]),
        ])
        var function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [1, rows, k])], block: block)
        function.block = FusionPass.run(function.block)
        return function
    }

    /// The same in float64.
    static func reference(input: [Float], columns n: Int, residual: Bool, rows: Int = 1) -> [Double] {
        let weight = weight(n), other = other(n), bias = bias(n)
        return (0..<(rows * n)).map { element in
            let row = element / n, column = element % n
            var sum = Double(bias[column]), extra = 0.0
            for index in 0..<k {
                sum += Double(input[row * k + index]) * Double(weight[index * n + column])
                extra += Double(input[row * k + index]) * Double(other[index * n + column])
            }
            return residual ? sum + extra : 0.5 * sum * (1 + tanh((2 / Double.pi).squareRoot() * (sum + 0.044715 * sum * sum * sum)))
        }
    }

    static func check(columns n: Int, residual: Bool, threads: Int, expectedSplit: String?, rows: Int = 1) throws {
        let function = Self.function(columns: n, residual: residual, rows: rows)
        let input = (0..<(rows * k)).map { Float(($0 * 17) % 23) * 0.1 - 1.1 }
        let run = try WorkSplit.$minimumPerThread.withValue(1) { try PlannedRun(function, input: input, shape: [1, rows, k], threads: threads) }
        // The product that makes the output, its bias and GELU or residual fused.
        let out = try #require(run.plan.outputs["out"])
        let product = try #require(run.plan.steps.first { $0.outputs.contains(out) })
        #expect(product.kind == "fused_linear")
        #expect(product.split == expectedSplit, "\(threads) threads")
        let got = try run.floats("out")
        let want = Self.reference(input: input, columns: n, residual: residual, rows: rows)
        #expect(got.count == want.count)
        let worst = zip(got, want).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? .infinity
        #expect(worst <= 1e-5, "\(threads) threads, residual \(residual): worst difference \(worst)")
    }

    @Test("a one-row product + bias + GELU, or + a residual, equals float64's; split by depth (plain rows) or by blocks of whole columns (blocked) at 2 and 3 threads",
          arguments: [1, 2, 3])
    func packedWeights(threads: Int) throws {
        let plainRows = try DNNLPrimitiveTests.packsPlainRows()
        for residual in [false, true] {
            let expected = try WorkSplit.$minimumPerThread.withValue(1) {
                try threads == 1 ? nil : plainRows ? "\(threads) depth blocks" : Self.blockedColumnSplit(threads: threads, columns: Self.n)
            }
            try Self.check(columns: Self.n, residual: residual, threads: threads, expectedSplit: expected)
        }
    }

    /// The split of a one-row product whose weights oneDNN packs in blocks of
    /// whole columns (AVX-512): a block of columns per thread where oneDNN
    /// gives every block a kernel reading the packed weights in place, else none.
    static func blockedColumnSplit(threads: Int, depth k: Int = k, columns n: Int) throws -> String? {
        let weights = (0..<(k * n)).map { Float(($0 * 29) % 37) * 0.01 - 0.18 }
        let packed = try weights.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([1, k]), weights: .init([k, n]), destination: .init([1, n]), constantWeights: values,
                                   bias: nil, activation: nil, residual: nil, threads: 1)
        }
        guard let blocks = ColumnBlocks(parts: WorkSplit.workers(threads: threads, work: k * n, items: n / 64), n: n) else { return nil }
        for block in blocks.blocks {
            guard try DNNLKernels.columnBlock(of: packed, first: block.first, width: block.width, rows: 1, n: n, bias: nil, activation: nil,
                                              accumulate: false) != nil else { return nil }
        }
        return "\(blocks.blocks.count) column blocks"
    }

    @Test("a one-row product large enough for blocks of columns splits the depth of every block", arguments: [2, 3])
    func columnBlocksSplitByDepth(threads: Int) throws {
        // 300 columns: blocks of 128 (3 threads) or 192 (2 threads) and the rest, each packed on its own. Their depth
        // splits where oneDNN reads every block's weights as plain rows (AVX2, and on AVX-512 where it chooses so).
        let blocks = try #require(ColumnBlocks(parts: threads, n: 300))
        let plainRows = try blocks.blocks.allSatisfy { try DNNLPrimitiveTests.packsPlainRows(columnBlockOf: Self.k, 300, width: $0.width) }
        try ColumnBlocks.$minimumWeights.withValue(1) {
            try Self.check(columns: 300, residual: false, threads: threads, expectedSplit: plainRows ? "\(threads) depth blocks" : "\(threads) column blocks")
            // Four rows keep the blocks of columns: each packed from a strided block of the [k, n] weights
            // (refused before, when the packing counted every row's full stride).
            try Self.check(columns: 300, residual: false, threads: threads, expectedSplit: "\(threads) column blocks", rows: 4)
        }
    }
}
