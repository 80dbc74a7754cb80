import Testing
@testable import TensorRuntime

/// `GraphFunction.lastRowOnly(of:)`: an output a product computes row by row, computed for its last row alone.
@Suite("Last row of an output")
struct LastRowFunctionTests {
    /// `x` → `op` (with a constant weight [4, 3] where it takes one) → `cast` → output "y".
    static func function(_ type: String, x shape: [Int?], arguments: [String: [GraphArgument]] = [:]) -> GraphFunction {
        var given = arguments
        given["x"] = [.value("x")]
        if type == "linear" || type == "fused_linear" { given["weight"] = [.constant(Tensor(floats: Array(repeating: 1, count: 12), shape: [4, 3]))] }
        let output = shape.dropLast() + [4]
        let op = GraphOperation(type: type, arguments: given, outputs: [("product", ValueType(element: .float32, shape: Array(output)))], blocks: [])
        let cast = GraphOperation(type: "cast", arguments: ["x": [.value("product")], "dtype": [.constant(Tensor(type: .string, shape: [1], storage: .strings(["fp16"])))]],
                                  outputs: [("y", ValueType(element: .float16, shape: Array(output)))], blocks: [])
        return GraphFunction(name: "main", inputs: [("x", ValueType(element: .float32, shape: shape))],
                             block: GraphBlock(operations: [op, cast], outputs: ["y"], constants: [:]))
    }

    @Test("a linear layer's input is sliced to its last row, and the outputs have one row", arguments: ["linear", "fused_linear"])
    func product(type: String) throws {
        let made = try #require(Self.function(type, x: [1, nil, 3]).lastRowOnly(of: "y"))
        #expect(made.block.operations.map(\.type) == ["slice_by_size", type, "cast"])
        #expect(made.block.operations[0].outputs[0].type.shape == [1, 1, 3])
        #expect(made.block.operations.dropFirst().allSatisfy { $0.outputs[0].type.shape == [1, 1, 4] })
        guard case .value(let row)? = made.block.operations[1].arguments["x"]?.first else { Issue.record("x is not a value"); return }
        #expect(row == made.block.operations[0].name)
        #expect(made.name != "main")
        let plan = try Planner.plan(made, shapes: ["x": [1, 6, 3]])
        #expect(plan.outputs["y"].map { plan.values[$0].shape } == [1, 1, 4])
    }

    @Test("outputs not computed row by row, or with rows in several matrices, are left whole")
    func refused() {
        #expect(Self.function("relu", x: [1, nil, 3]).lastRowOnly(of: "y") == nil)
        #expect(Self.function("linear", x: [2, nil, 3]).lastRowOnly(of: "y") == nil)
        #expect(Self.function("linear", x: [nil, nil, 3]).lastRowOnly(of: "y") == nil)
        #expect(Self.function("linear", x: [1, nil, 3]).lastRowOnly(of: "x") == nil)
        let residual: [String: [GraphArgument]] = ["residual": [.value("x")]]
        #expect(Self.function("fused_linear", x: [1, nil, 3], arguments: residual).lastRowOnly(of: "y") == nil)
        let transposed: [String: [GraphArgument]] = ["transpose_x": [.constant(Tensor(ints: [1], shape: [1], type: .bool))], "y": [.value("x")]]
        #expect(Self.function("matmul", x: [1, nil, 3], arguments: transposed).lastRowOnly(of: "y") == nil)
    }
}
