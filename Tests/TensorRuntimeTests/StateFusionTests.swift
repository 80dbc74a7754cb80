import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// The state rewrites (Fusion/StateFusion.swift) on the converted decoder
/// with key/value caches in states (Fixtures/Models/StatefulDecoder): each
/// cache update becomes one in-place `update_state_slice`, each read after
/// the last write a view; what the steps compute is StatefulDecoderTests'.
@Suite("State fusion")
struct StateFusionTests {
    static func decoder() async throws -> GraphFunction {
        try await AttentionFusionTests.graph("Models/StatefulDecoder.mlpackage")
    }

    @Test("a converted decoder's cache updates are written in place and read as views")
    func decoderCaches() async throws {
        let function = try await Self.decoder()
        let before = function.block.operations.map(\.type)
        #expect(before.filter { $0 == "write_state" }.count == 4)
        let fused = FusionPass.run(function.block).operations.map(\.type)
        #expect(fused.filter { $0 == "update_state_slice" }.count == 4)
        #expect(fused.filter { $0 == "read_state_view" }.count == 4)
        #expect(!fused.contains("write_state") && !fused.contains("read_state") && !fused.contains("slice_update"))
    }

    /// read_state(s) → slice_update(x, update) → write_state(s), then
    /// read_state(s), with `between` placed after the first read.
    static func block(between: [GraphOperation] = [], begin: GraphArgument = .constant(Tensor(ints: [0, 1], shape: [2])),
                      end: GraphArgument = .constant(Tensor(ints: [2, 2], shape: [2]))) -> GraphBlock {
        let type = ValueType(element: .float32, shape: [2, 4])
        let operations = [
            GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("r", type)], blocks: []),
        ] + between + [
            GraphOperation(type: "slice_update", arguments: [
                "x": [.value("r")], "update": [.value("u")],
                "begin": [begin], "end": [end],
            ], outputs: [("a", type)], blocks: []),
            GraphOperation(type: "write_state", arguments: ["input": [.value("s")], "data": [.value("a")]], outputs: [], blocks: []),
            GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("o", type)], blocks: []),
        ]
        return GraphBlock(operations: operations, outputs: ["o"], constants: [:])
    }

    @Test("an update is fused unless another write of the state comes in between; a copy others read stays a copy")
    func nearMisses() throws {
        #expect(FusionPass.run(Self.block()).operations.map(\.type) == ["update_state_slice", "read_state_view"])
        // The copy read before the update is also returned: it stays a copy, keeping the old values (inPlaceEqualsCopies).
        var returned = Self.block()
        returned.outputs.append("r")
        #expect(FusionPass.run(returned).operations.map(\.type) == ["read_state", "update_state_slice", "read_state_view"])
        // Another write of the state between the read and the write.
        let other = GraphOperation(type: "write_state", arguments: ["input": [.value("s")], "data": [.value("u2")]], outputs: [], blocks: [])
        let interleaved = FusionPass.run(Self.block(between: [other])).operations.map(\.type)
        #expect(interleaved == ["read_state", "write_state", "slice_update", "write_state", "read_state_view"])
    }

    /// Apple's converted decoders: each layer updates the cache the layer before updated (its read of the state
    /// after the write), and reads its slice of it before the next layer's write. Outputs: each layer's slice.
    static func layers() -> GraphBlock {
        let type = ValueType(element: .float32, shape: [2, 4]), row = ValueType(element: .float32, shape: [1, 4])
        func update(_ layer: Int, from source: String) -> [GraphOperation] {
            [
                GraphOperation(type: "slice_update", arguments: [
                    "x": [.value(source)], "update": [.value("u")],
                    "begin": [.constant(Tensor(ints: [0, Int32(layer)], shape: [2]))], "end": [.constant(Tensor(ints: [2, Int32(layer + 1)], shape: [2]))],
                ], outputs: [("a\(layer)", type)], blocks: []),
                GraphOperation(type: "write_state", arguments: ["input": [.value("s")], "data": [.value("a\(layer)")]], outputs: [], blocks: []),
                GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("o\(layer)", type)], blocks: []),
                GraphOperation(type: "slice_by_index", arguments: [
                    "x": [.value("o\(layer)")], "begin": [.constant(Tensor(ints: [Int32(layer % 2), 0], shape: [2]))],
                    "end": [.constant(Tensor(ints: [Int32(layer % 2 + 1), 4], shape: [2]))],
                ], outputs: [("l\(layer)", row)], blocks: []),
            ]
        }
        let read = GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("r", type)], blocks: [])
        return GraphBlock(operations: [read] + update(0, from: "r") + update(1, from: "o0") + update(2, from: "o1"),
                          outputs: ["l0", "l1", "l2"], constants: [:])
    }

    @Test("a chain of layers' updates is written in place and each layer's read is a view, computing what the copies do")
    func layerChain() throws {
        let fused = FusionPass.run(Self.layers()).operations.map(\.type)
        #expect(fused == ["update_state_slice", "read_state_view", "slice_by_index", "update_state_slice", "read_state_view", "slice_by_index",
                          "update_state_slice", "read_state_view", "slice_by_index"])
        let function = GraphFunction(name: "main", inputs: [("s", ValueType(element: .float32, shape: [2, 4], isState: true)),
                                                           ("u", ValueType(element: .float32, shape: [2, 1]))], block: Self.layers())
        let fusedRun = try Self.twoSteps(function, FusionPass.run(function.block), outputs: ["l0", "l1", "l2"])
        let copies = try Self.twoSteps(function, FusionPass.run(function.block, rules: FusionPass.rules.filter { !$0.name.hasPrefix("state") }),
                                       outputs: ["l0", "l1", "l2"])
        #expect(fusedRun.0 == copies.0)
        #expect(fusedRun.1 == copies.1)
        #expect(fusedRun.1 == [1.1, 1.1, 1.1, 0, -1.2, -1.2, -1.2, 0])
    }

    /// Two steps of `function` with `block` on one state bound into the plan as TensorEngine binds it:
    /// the `outputs` of each step in order, then the state.
    static func twoSteps(_ function: GraphFunction, _ block: GraphBlock, outputs names: [String]) throws -> ([Float], [Float]) {
        var function = function
        function.block = block
        let plan = try Planner.plan(function, shapes: ["u": [2, 1]])
        let state = TensorState(plan: plan)
        var stored = [Float](repeating: 0, count: 8)
        var outputs: [Float] = []
        let s = try #require(plan.states["s"]), u = try #require(plan.inputs["u"])
        try stored.withUnsafeMutableBytes { bytes in
            let base = try #require(bytes.baseAddress)
            state.table[s] = base
            for view in plan.stateViews["s"] ?? [] { state.table[view] = base }
            for step in 0..<2 {
                state.buffers.floats(u)[0] = Float(step) + 0.1
                state.buffers.floats(u)[1] = -Float(step) - 0.2
                try state.run()
                for name in names {
                    let id = try #require(plan.outputs[name])
                    outputs += Array(UnsafeBufferPointer(start: state.buffers.floats(id), count: plan.values[id].count))
                }
            }
        }
        return (outputs, stored)
    }

    @Test("the fused update and view compute what the unfused program does, on a state bound in place")
    func inPlaceEqualsCopies() throws {
        let function = GraphFunction(name: "main", inputs: [("s", ValueType(element: .float32, shape: [2, 4], isState: true)),
                                                           ("u", ValueType(element: .float32, shape: [2, 1]))], block: Self.block())
        // The copy read before the update returned too: it keeps the values from before the update.
        var returned = function
        returned.block.outputs.append("r")
        let fusedReturned = try Self.twoSteps(returned, FusionPass.run(returned.block), outputs: ["o", "r"])
        let copiesReturned = try Self.twoSteps(returned, FusionPass.run(returned.block, rules: FusionPass.rules.filter { !$0.name.hasPrefix("state") }),
                                               outputs: ["o", "r"])
        #expect(fusedReturned.0 == copiesReturned.0)
        #expect(Array(fusedReturned.0[24..<32]) == [0, 0.1, 0, 0, 0, -0.2, 0, 0])
        func run(_ block: GraphBlock) throws -> ([Float], [Float]) { try Self.twoSteps(function, block, outputs: ["o"]) }
        let fused = try run(FusionPass.run(function.block))
        let unfused = try run(FusionPass.run(function.block, rules: FusionPass.rules.filter { !$0.name.hasPrefix("state") }))
        #expect(fused.0.count == 16)
        #expect(fused.0 == unfused.0)
        #expect(fused.1 == unfused.1)
        #expect(fused.1 == [0, 1.1, 0, 0, 0, -1.2, 0, 0])
    }

    /// A decoder's step: the cache update's position is a constant folded from the mask's shape, another at each
    /// step. The plan memo takes the update as the last plan made it (its position is read at run time), and it
    /// writes where this plan's constant says.
    @Test("a cache update at a constant position is taken from the last plan and writes at this plan's position; a position selecting the wrong size fails naming the update")
    func constantPositionFromTheMemo() throws {
        let memo = PlanMemo()
        // The position from the shape of an input "m" [1, end], as a decoder's from its mask: begin [0, end - width], end [2, end].
        let integers = ValueType(element: .int32, shape: [2])
        let arithmetic = [
            GraphOperation(type: "shape", arguments: ["x": [.value("m")]], outputs: [("sh", integers)], blocks: []),
            GraphOperation(type: "sub", arguments: ["x": [.value("sh")], "y": [.value("w")]], outputs: [("b", integers)], blocks: []),
            GraphOperation(type: "mul", arguments: ["x": [.value("sh")], "y": [.constant(Tensor(ints: [2, 1], shape: [2]))]],
                           outputs: [("e", integers)], blocks: []),
        ]
        var block = FusionPass.run(Self.block(begin: .value("b"), end: .value("e")))
        block.operations.insert(contentsOf: arithmetic, at: 0)
        func run(column: Int32, width: Int32 = 1, memo: PlanMemo?) throws -> (outputs: [Float], reused: Int) {
            var block = block
            block.constants["w"] = Tensor(ints: [1, width], shape: [2])
            let function = GraphFunction(name: width == 1 ? "main" : "wide", inputs: [("s", ValueType(element: .float32, shape: [2, 4], isState: true)),
                                                               ("u", ValueType(element: .float32, shape: [2, 1])),
                                                               ("m", ValueType(element: .float32, shape: nil))], block: block)
            let plan = try Planner.plan(function, shapes: ["u": [2, 1], "m": [1, Int(column + width)]], memo: memo)
            let state = TensorState(plan: plan)
            let u = try #require(plan.inputs["u"]), o = try #require(plan.outputs["o"])
            state.buffers.floats(u)[0] = Float(column) + 0.5
            state.buffers.floats(u)[1] = -Float(column)
            try state.run()
            return (Array(UnsafeBufferPointer(start: state.buffers.floats(o), count: 8)), plan.reusedOperations)
        }
        #expect(try run(column: 1, memo: memo).reused == 0)
        for column: Int32 in [3, 0, 2] {
            let taken = try run(column: column, memo: memo), fresh = try run(column: column, memo: nil)
            // Both operations (the update and the view after it) from the memo, and what a fresh plan computes.
            #expect(taken.reused == 2 && fresh.reused == 0)
            #expect(taken.outputs == fresh.outputs)
            var expected = [Float](repeating: 0, count: 8)
            expected[Int(column)] = Float(column) + 0.5
            expected[4 + Int(column)] = -Float(column)
            #expect(taken.outputs == expected, "column \(column)")
        }
        // Two columns for an update of one: refused when the step runs, naming the update.
        let wide = PlanMemo()
        _ = try? run(column: 0, width: 2, memo: wide)
        do {
            _ = try run(column: 1, width: 2, memo: wide)
            Issue.record("a slice of 4 values took an update of 2")
        } catch {
            #expect("\(error)".contains("the update has 2 values"), "\(error)")
        }
    }

    @Test("a slice position given as an input is found per prediction, not by staging the plan")
    func runTimePosition() throws {
        let integers = ValueType(element: .int32, shape: [2])
        let function = GraphFunction(name: "main", inputs: [("s", ValueType(element: .float32, shape: [2, 4], isState: true)),
                                                           ("u", ValueType(element: .float32, shape: [2, 1])), ("b", integers), ("e", integers)],
                                     block: Self.block(begin: .value("b"), end: .value("e")))
        func run(_ block: GraphBlock) throws -> [Float] {
            var function = function
            function.block = block
            let plan = try Planner.plan(function, shapes: ["u": [2, 1], "b": [2], "e": [2]])
            #expect(plan.continuation == nil)
            let state = TensorState(plan: plan)
            var outputs: [Float] = []
            let u = try #require(plan.inputs["u"]), b = try #require(plan.inputs["b"]), e = try #require(plan.inputs["e"])
            let o = try #require(plan.outputs["o"])
            for position in [3, 0, 2] {
                state.buffers.floats(u)[0] = Float(position) + 0.5
                state.buffers.floats(u)[1] = -Float(position)
                state.buffers.ints(b)[0] = 0
                state.buffers.ints(b)[1] = Int32(position)
                state.buffers.ints(e)[0] = 2
                state.buffers.ints(e)[1] = Int32(position + 1)
                try state.run()
                outputs += Array(UnsafeBufferPointer(start: state.buffers.floats(o), count: 8))
            }
            return outputs
        }
        let fused = FusionPass.run(function.block)
        #expect(fused.operations.map(\.type) == ["update_state_slice", "read_state_view"])
        let expected = try run(FusionPass.run(function.block, rules: FusionPass.rules.filter { !$0.name.hasPrefix("state") }))
        #expect(try run(fused) == expected)
        #expect(Array(expected.suffix(8)) == [0.5, 0, 2.5, 3.5, 0, 0, -2, -3])
    }
}
