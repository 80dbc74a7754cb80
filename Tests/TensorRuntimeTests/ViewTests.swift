import Testing
@testable import TensorRuntime

/// Copies that are one contiguous run of their input are planned as views
/// into it (no step runs for them): a transpose moving only axes of one
/// element, a slice of whole inner axes. Other slices still copy, and what
/// every output holds is the input's elements as the operation picks them.
@Suite("Views")
struct ViewTests {
    static func operation(_ type: String, _ output: String, _ shape: [Int], _ arguments: [String: [GraphArgument]]) -> GraphOperation {
        GraphOperation(type: type, arguments: arguments, outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    static func ints(_ values: [Int32]) -> GraphArgument { .constant(Tensor(ints: values, shape: [values.count])) }

    @Test("a unit-axis transpose and a slice of whole rows are views; a slice of columns copies; values as NumPy picks them")
    func viewsAndCopies() throws {
        let shape = [1, 3, 4]
        let block = GraphBlock(operations: [
            Self.operation("transpose", "t", [3, 1, 4], ["x": [.value("x")], "perm": [Self.ints([1, 0, 2])]]),
            Self.operation("slice_by_index", "row", [1, 1, 4], ["x": [.value("x")], "begin": [Self.ints([0, 1, 0])], "end": [Self.ints([1, 2, 4])]]),
            Self.operation("slice_by_index", "columns", [1, 3, 2], ["x": [.value("x")], "begin": [Self.ints([0, 0, 1])], "end": [Self.ints([1, 3, 3])]]),
            // Read through a view of a view: the last row of the transposed value.
            Self.operation("slice_by_index", "last", [1, 1, 4], ["x": [.value("t")], "begin": [Self.ints([2, 0, 0])], "end": [Self.ints([3, 1, 4])]]),
            Self.operation("relu", "r", [1, 1, 4], ["x": [.value("last")]]),
        ], outputs: ["t", "row", "columns", "r"], constants: [:])
        let function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", shape)], block: block)
        let input: [Float] = (0..<12).map { Float($0) - 8 }
        let run = try PlannedRun(function, input: input, shape: shape, threads: 1)
        #expect(run.plan.steps.map(\.kind) == ["slice_by_index", "relu"], "only the columns are copied: \(run.plan.steps.map(\.operation))")
        #expect(try run.floats("t") == input)
        #expect(try run.floats("row") == Array(input[4..<8]))
        #expect(try run.floats("columns") == [input[1], input[2], input[5], input[6], input[9], input[10]])
        #expect(try run.floats("r") == input[8..<12].map { max($0, 0) })
    }
}
