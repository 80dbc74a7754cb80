import Foundation
import Testing
@testable import TensorRuntime

/// softmax and layer_norm along the last axis and GELU split their rows
/// between threads (`RowSplitKernel`): at 1, 2 and 3 threads they give
/// what a float64 loop gives (1e-5), over shapes where the rows divide
/// evenly and where the last block is shorter.
@Suite("Row kernels split between threads")
struct RowSplitTests {
    static func run(_ op: GraphOperation, constants: [String: Tensor] = [:], shape: [Int], threads: Int) throws -> ([Float], [Float]) {
        let type = ValueType(element: .float32, shape: shape.map { $0 })
        let function = GraphFunction(name: "main", inputs: [("x", type)],
                                     block: GraphBlock(operations: [op], outputs: ["y"], constants: constants))
        let plan = try Planner.plan(function, shapes: ["x": shape], threads: threads)
        let state = TensorState(plan: plan)
        let count = shape.reduce(1, *)
        let input = (0..<count).map { Float(($0 * 7919) % 1000) / 250 - 2 }
        let x = try #require(plan.inputs["x"]), y = try #require(plan.outputs["y"])
        for index in 0..<count { state.buffers.floats(x)[index] = input[index] }
        try state.run()
        return (input, Array(UnsafeBufferPointer(start: state.buffers.floats(y), count: count)))
    }

    static func close(_ a: [Float], _ b: [Double]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { abs(Double($0) - $1) <= 1e-5 * max(1, abs($1)) }
    }

    @Test("softmax, layer_norm and GELU rows", arguments: [[37, 512], [2, 100, 256]], [1, 2, 3])
    func rows(shape: [Int], threads: Int) throws {
        let width = shape.last ?? 1
        let output = [("y", ValueType(element: .float32, shape: shape.map { $0 }))]
        let softmax = GraphOperation(type: "softmax", arguments: ["x": [.value("x")], "axis": [.constant(Tensor(ints: [-1], shape: []))]],
                                     outputs: output, blocks: [])
        let (input, soft) = try Self.run(softmax, shape: shape, threads: threads)
        var expected: [Double] = []
        for row in stride(from: 0, to: input.count, by: width) {
            let line = input[row..<(row + width)].map(Double.init)
            let top = line.max() ?? 0, sum = line.reduce(0) { $0 + exp($1 - top) }
            expected += line.map { exp($0 - top) / sum }
        }
        #expect(Self.close(soft, expected), "softmax")

        let gamma = Tensor(floats: (0..<width).map { Float($0 % 5) * 0.25 + 0.5 }, shape: [width])
        let beta = Tensor(floats: (0..<width).map { Float($0 % 3) * 0.1 }, shape: [width])
        let norm = GraphOperation(type: "layer_norm", arguments: ["x": [.value("x")], "axes": [.constant(Tensor(ints: [-1], shape: [1]))],
                                                                  "gamma": [.value("g")], "beta": [.value("b")],
                                                                  "epsilon": [.constant(Tensor(floats: [1e-5], shape: []))]],
                                  outputs: output, blocks: [])
        let (_, normalized) = try Self.run(norm, constants: ["g": gamma, "b": beta], shape: shape, threads: threads)
        expected = []
        for row in stride(from: 0, to: input.count, by: width) {
            let line = input[row..<(row + width)].map(Double.init)
            let mean = line.reduce(0, +) / Double(width)
            let variance = line.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(width)
            expected += line.enumerated().map { (($1 - mean) / (variance + 1e-5).squareRoot()) * Double(gamma.floats[$0]) + Double(beta.floats[$0]) }
        }
        #expect(Self.close(normalized, expected), "layer_norm")

        let gelu = GraphOperation(type: "gelu", arguments: ["x": [.value("x")]], outputs: output, blocks: [])
        let (_, activated) = try Self.run(gelu, shape: shape, threads: threads)
        #expect(Self.close(activated, input.map { x in 0.5 * Double(x) * (1 + erf(Double(x) / 2.0.squareRoot())) }), "gelu")
    }
}
