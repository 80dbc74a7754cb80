import Foundation
import Testing
@testable import TensorRuntime

/// A function planned again for other input shapes takes the operations
/// whose inputs did not change from its last plan (`PlanMemo`): a
/// decoder's products and norms between two steps. An operation reading a
/// constant that changed with the shapes (a length folded from `shape`) is
/// planned anew, and every output is what a plan made without the memo gives.
@Suite("Plan memo")
struct PlanMemoTests {
    static func op(_ type: String, _ output: String, _ shape: [Int], _ arguments: [String: [GraphArgument]]) -> GraphOperation {
        GraphOperation(type: type, arguments: arguments, outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    /// x [1, 8] scaled and rectified (the same at every length); y [1, n] summed; x times n (a constant folded from y's shape).
    static let function: GraphFunction = {
        let scale = GraphArgument.constant(Tensor(floats: (0..<8).map { Float($0) * 0.5 - 1 }, shape: [8]))
        let block = GraphBlock(operations: [
            op("mul", "scaled", [1, 8], ["x": [.value("x")], "y": [scale]]),
            op("relu", "rectified", [1, 8], ["x": [.value("scaled")]]),
            op("reduce_sum", "total", [1, 1], ["x": [.value("y")], "axes": [.constant(Tensor(ints: [1], shape: [1]))], "keep_dims": [.constant(Tensor(ints: [1], shape: []))]]),
            op("shape", "length", [2], ["x": [.value("y")]]),
            op("cast", "lengths", [2], ["x": [.value("length")], "dtype": [.constant(Tensor(type: .string, shape: [], storage: .strings(["fp32"])))]]),
            op("slice_by_index", "n", [1], ["x": [.value("lengths")], "begin": [.constant(Tensor(ints: [1], shape: [1]))], "end": [.constant(Tensor(ints: [2], shape: [1]))]]),
            op("mul", "stretched", [1, 8], ["x": [.value("rectified")], "y": [.value("n")]]),
        ], outputs: ["rectified", "total", "stretched"], constants: [:])
        return GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [1, 8]), ConvolutionThreadingTests.value("y", [1, 3])], block: block)
    }()

    static func run(_ plan: TensorPlan, x: [Float], y: [Float]) throws -> [String: [Float]] {
        let state = TensorState(plan: plan)
        for (name, data) in [("x", x), ("y", y)] {
            let id = try #require(plan.inputs[name])
            data.withUnsafeBytes { state.table[id].copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        try state.run()
        var outputs: [String: [Float]] = [:]
        for (name, id) in plan.outputs { outputs[name] = Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count)) }
        return outputs
    }

    @Test("a second length reuses the operations of x, plans those of y and the folded length anew, and computes what a fresh plan does")
    func reusesUnchangedOperations() throws {
        let memo = PlanMemo()
        let x = (0..<8).map { Float($0) - 3 }
        let first = try Planner.plan(Self.function, shapes: ["x": [1, 8], "y": [1, 3]], memo: memo)
        #expect(first.reusedOperations == 0)
        for length in [4, 7, 4] {
            let y = (0..<length).map { Float($0) + 0.25 }
            let memoized = try Planner.plan(Self.function, shapes: ["x": [1, 8], "y": [1, length]], memo: memo)
            let fresh = try Planner.plan(Self.function, shapes: ["x": [1, 8], "y": [1, length]])
            // scaled and rectified are the same; reduce_sum, shape, cast, slice and the last mul see other inputs.
            #expect(memoized.reusedOperations == 2)
            #expect(fresh.reusedOperations == 0)
            let got = try Self.run(memoized, x: x, y: y), want = try Self.run(fresh, x: x, y: y)
            #expect(got == want)
            #expect(got["stretched"] == x.enumerated().map { max(0, $0.element * (Float($0.offset) * 0.5 - 1)) * Float(length) })
        }
    }

    /// relu(x) [1, 4] rotated by rows of cos and sin tables [8, 4] gathered at y's length (a decoder's position).
    static let rotaryFunction: GraphFunction = {
        let table = { (phase: Double) in GraphArgument.constant(Tensor(floats: (0..<32).map { Float(sin(Double($0) * 0.37 + phase)) }, shape: [8, 4])) }
        let position: [String: [GraphArgument]] = ["indices": [.value("n")], "axis": [.constant(Tensor(ints: [0], shape: []))]]
        let block = GraphBlock(operations: [
            op("relu", "rectified", [1, 4], ["x": [.value("x")]]),
            GraphOperation(type: "shape", arguments: ["x": [.value("y")]], outputs: [("length", ValueType(element: .int32, shape: [2]))], blocks: []),
            GraphOperation(type: "slice_by_index", arguments: ["x": [.value("length")], "begin": [.constant(Tensor(ints: [1], shape: [1]))],
                                                               "end": [.constant(Tensor(ints: [2], shape: [1]))]],
                           outputs: [("n", ValueType(element: .int32, shape: [1]))], blocks: []),
            op("gather", "cos", [1, 4], position.merging(["x": [table(1.1)]]) { first, _ in first }),
            op("gather", "sin", [1, 4], position.merging(["x": [table(0.2)]]) { first, _ in first }),
            op("rotary_embedding", "rotated", [1, 4], ["x": [.value("rectified")], "cos": [.value("cos")], "sin": [.value("sin")],
                                                        "half": [.constant(Tensor(ints: [2], shape: []))]]),
        ], outputs: ["rotated"], constants: [:])
        return GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [1, 4]), ConvolutionThreadingTests.value("y", [1, 3])], block: block)
    }()

    @Test("an operation reading constants only at run time (a rotary embedding's tables for another position) is taken from the memo and reads the new ones")
    func runTimeConstants() throws {
        let memo = PlanMemo()
        let x: [Float] = [0.5, -2, 1.5, 3]
        _ = try Planner.plan(Self.rotaryFunction, shapes: ["x": [1, 4], "y": [1, 2]], memo: memo)
        for length in [3, 6, 3] {
            let y = [Float](repeating: 1, count: length)
            let memoized = try Planner.plan(Self.rotaryFunction, shapes: ["x": [1, 4], "y": [1, length]], memo: memo)
            // relu and the rotary embedding are the same; shape, slice and the gathers fold other constants.
            #expect(memoized.reusedOperations == 2)
            let got = try Self.run(memoized, x: x, y: y)["rotated"]
            let fresh = try Self.run(try Planner.plan(Self.rotaryFunction, shapes: ["x": [1, 4], "y": [1, length]]), x: x, y: y)["rotated"]
            #expect(got == fresh)
            let c = (0..<4).map { Float(sin(Double(length * 4 + $0) * 0.37 + 1.1)) }, s = (0..<4).map { Float(sin(Double(length * 4 + $0) * 0.37 + 0.2)) }
            let r = x.map { max(0, $0) }
            let want = [r[0] * c[0] + (r[2] * -1) * s[0], r[1] * c[1] + (r[3] * -1) * s[1], r[2] * c[2] + r[0] * s[2], r[3] * c[3] + r[1] * s[3]]
            #expect(got == want, "position \(length)")
        }
    }

    /// `function` with its scale a named constant of the block; with `shadowing`, also a constant named like the input y.
    static func constantsFunction(shadowing: Bool) -> GraphFunction {
        var block = Self.function.block
        block.operations[0] = op("mul", "scaled", [1, 8], ["x": [.value("x")], "y": [.value("scale")]])
        block.constants = ["scale": Tensor(floats: (0..<8).map { Float($0) * 0.5 - 1 }, shape: [8])]
        if shadowing { block.constants["y"] = Tensor(floats: [9], shape: [1]) }
        return GraphFunction(name: "main", inputs: Self.function.inputs, block: block)
    }

    @Test("the block's constants are taken from the memo at the same ids, unless a name is both an input and a constant (then added again)")
    func constantsFromTheMemo() throws {
        let x = (0..<8).map { Float($0) - 3 }
        for shadowing in [false, true] {
            let function = Self.constantsFunction(shadowing: shadowing), memo = PlanMemo()
            let first = try Planner.plan(function, shapes: ["x": [1, 8], "y": [1, 3]], memo: memo)
            #expect((memo.start(of: "main") != nil) == !shadowing)
            for length in [5, 2] {
                let y = (0..<length).map { Float($0) + 0.25 }
                let memoized = try Planner.plan(function, shapes: ["x": [1, 8], "y": [1, length]], memo: memo)
                #expect(memoized.values.count == first.values.count)
                #expect(memoized.reusedOperations == 2)
                let fresh = try Planner.plan(function, shapes: ["x": [1, 8], "y": [1, length]])
                let got = try Self.run(memoized, x: x, y: y)
                #expect(got == (try Self.run(fresh, x: x, y: y)))
                #expect(got["stretched"] == x.enumerated().map { max(0, $0.element * (Float($0.offset) * 0.5 - 1)) * Float(length) })
            }
        }
    }

    /// `function` behind a `cond` on a constant (both branches rectify x): an operation with nested blocks is always
    /// planned and binds names of its own, so the memo matches what follows it by name again.
    static let branchedFunction: GraphFunction = {
        var block = Self.function.block
        let branch = { (name: String) in GraphBlock(operations: [op("relu", name, [1, 8], ["x": [.value("x")]])], outputs: [name], constants: [:]) }
        let cond = GraphOperation(type: "cond", arguments: ["pred": [.constant(Tensor(ints: [1], shape: []))]],
                                  outputs: [ConvolutionThreadingTests.value("branched", [1, 8])], blocks: [branch("taken"), branch("other")])
        block.operations[0] = op("mul", "scaled", [1, 8], ["x": [.value("branched")], "y": block.operations[0].arguments["y"]!])
        block.operations.insert(cond, at: 0)
        return GraphFunction(name: "main", inputs: Self.function.inputs, block: block)
    }()

    @Test("after an operation with nested blocks the memo matches the operations that follow by name, and takes the unchanged ones")
    func afterNestedBlocks() throws {
        let memo = PlanMemo(), x = (0..<8).map { Float($0) - 3 }
        _ = try Planner.plan(Self.branchedFunction, shapes: ["x": [1, 8], "y": [1, 3]], memo: memo)
        for length in [6, 2] {
            let y = (0..<length).map { Float($0) + 0.25 }
            let memoized = try Planner.plan(Self.branchedFunction, shapes: ["x": [1, 8], "y": [1, length]], memo: memo)
            // The cond is planned again; scaled and rectified are taken.
            #expect(memoized.reusedOperations == 2)
            let got = try Self.run(memoized, x: x, y: y)
            #expect(got == (try Self.run(try Planner.plan(Self.branchedFunction, shapes: ["x": [1, 8], "y": [1, length]]), x: x, y: y)))
            #expect(got["stretched"] == x.enumerated().map { max(0, max(0, $0.element) * (Float($0.offset) * 0.5 - 1)) * Float(length) })
        }
    }
}
