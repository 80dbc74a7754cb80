import Foundation
import Testing
@testable import TensorRuntime

/// Products whose row blocks would be small (GPT-2's 64-token forward at 2
/// threads: blocks of 32 rows) split by columns instead; GELU's tanh form
/// then runs in the vectorized loop on each block's columns. Which split
/// the bench models' shapes get, and a 64-row product + bias + GELU against
/// float64 at 1 and 2 threads.
@Suite("Products split by columns when their row blocks would be small")
struct ProductColumnSplitTests {
    @Test("the split chosen for the bench models' row counts at 1, 2 and 4 threads")
    func chosenSplit() {
        // A one-token step: columns at 2 threads (the row split leaves a thread idle).
        #expect(LinearAlgebraOperations.prefersColumns(rows: 1, threads: 2))
        // GPT-2's 64 tokens: blocks of 32 rows at 2 threads, 16 at 4.
        #expect(LinearAlgebraOperations.prefersColumns(rows: 64, threads: 2))
        #expect(LinearAlgebraOperations.prefersColumns(rows: 64, threads: 4))
        // BERT's 128 and ViT's 197 tokens: blocks of 64 and 99 rows at 2 threads.
        #expect(!LinearAlgebraOperations.prefersColumns(rows: 128, threads: 2))
        #expect(!LinearAlgebraOperations.prefersColumns(rows: 197, threads: 2))
        // One thread never splits.
        #expect(!LinearAlgebraOperations.prefersColumns(rows: 64, threads: 1))
        #expect(!LinearAlgebraOperations.prefersColumns(rows: 1, threads: 1))
    }

    @Test("a 64-row product + bias + GELU (tanh) equals float64's at 1 and 2 threads, by columns at 2", arguments: [1, 2])
    func geluProductMatchesFloat64(threads: Int) throws {
        let (rows, k, n) = (64, 96, 256)
        let weight = (0..<(k * n)).map { Float(($0 * 29) % 37) * 0.01 - 0.18 }
        let bias = (0..<n).map { Float($0 % 11) * 0.05 - 0.25 }
        let block = GraphBlock(operations: [
            GraphOperation(type: "matmul", arguments: ["x": [.value("x")], "y": [.value("w")]], outputs: [ConvolutionThreadingTests.value("m", [1, rows, n])], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("m")], "y": [.value("b")]], outputs: [ConvolutionThreadingTests.value("a", [1, rows, n])], blocks: []),
            GraphOperation(type: "gelu", arguments: ["x": [.value("a")],
                                                     "mode": [.constant(Tensor(type: .string, shape: [], storage: .strings(["TANH_APPROXIMATION"])))]],
                           outputs: [ConvolutionThreadingTests.value("g", [1, rows, n])], blocks: []),
        ], outputs: ["g"], constants: ["w": Tensor(floats: weight, shape: [k, n]), "b": Tensor(floats: bias, shape: [n])])
        var function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [1, rows, k])], block: block)
        function.block = FusionPass.run(function.block)
        #expect(function.block.operations.map(\.type) == ["fused_linear"])
        let input = (0..<(rows * k)).map { Float(($0 * 17) % 23) * 0.1 - 1.1 }
        let run = try PlannedRun(function, input: input, shape: [1, rows, k], threads: threads)
        let product = try #require(run.plan.steps.first { $0.kind == "fused_linear" })
        let plainRows = try DNNLPrimitiveTests.packsPlainRows()
        #expect(product.split == (threads == 2 && plainRows ? "2 column blocks" : nil))
        let got = try run.floats("g")
        var worst = 0.0
        for row in 0..<rows {
            for column in 0..<n {
                var sum = Double(bias[column])
                for index in 0..<k { sum += Double(input[row * k + index]) * Double(weight[index * n + column]) }
                let want = 0.5 * sum * (1 + tanh((2 / Double.pi).squareRoot() * (sum + 0.044715 * sum * sum * sum)))
                worst = max(worst, abs(Double(got[row * n + column]) - want) / max(1, abs(want)))
            }
        }
        #expect(worst <= 1e-5, "\(threads) threads: worst difference \(worst)")
    }
}
