import CoreMLSchema
import FixtureSupport
@testable import ModelCompiler
import ModelSpec
import Testing

/// Cutting hand-encoded ML programs: what is kept around nested blocks and
/// what the automatic choice walks through.
@Suite struct ProgramCutTests {
    static let vector = MILWire.tensorType(MILWire.DataType.float32, [1, 4])

    static func op(_ type: String, _ output: String, _ inputs: [(String, [MILWire.Binding])], blocks: [[UInt8]] = []) -> [UInt8] {
        MILWire.operation(type, inputs: inputs, outputs: [MILWire.named(output, vector)], blocks: blocks,
                          attributes: [("name", MILWire.stringValue(output))])
    }

    /// x → a = relu(x), dead = relu(x), c = sigmoid(x), p = const,
    /// b = cond(p) { a + c } { a }, y = linear(b), probs = softmax(y).
    static func program() -> [UInt8] {
        let inner = MILWire.block(outputs: ["t"], operations: [op("add", "t", [("x", [.name("a")]), ("y", [.name("c")])])])
        let other = MILWire.block(outputs: ["a"], operations: [])
        let operations = [
            op("relu", "a", [("x", [.name("x")])]),
            op("relu", "dead", [("x", [.name("x")])]),
            op("sigmoid", "c", [("x", [.name("x")])]),
            MILWire.operation("const", outputs: [MILWire.named("p", MILWire.tensorType(MILWire.DataType.bool, []))],
                              attributes: [("name", MILWire.stringValue("p")), ("val", MILWire.boolValue(true))]),
            op("cond", "b", [("pred", [.name("p")])], blocks: [inner, other]),
            op("linear", "y", [("x", [.name("b")]), ("weight", [.name("w")])]),
            op("softmax", "probs", [("x", [.name("y")])]),
        ]
        return MILWire.describedModel(inputs: [("x", [1, 4])], outputs: [("probs", [1, 4])], opset: "CoreML5",
                                      block: MILWire.block(outputs: ["probs"], operations: operations))
    }

    static func cut(_ featureOutput: String?) throws -> (names: [String], cut: ProgramCut, specification: Specification) {
        let bytes = program()
        let specification = try bytes.withUnsafeBytes { try Specification.unpack($0, path: "test.mlmodel") }
        let program = try #require(specification.root.pointee.mlprogram)
        let cut = try ProgramCut(program: program, featureOutput: featureOutput)
        let names = cut.operations.map { String(cString: $0.pointee.outputs[0]!.pointee.name) }
        return (names, cut, specification)
    }

    @Test func theAutomaticFeatureIsTheLinearsInputAndNestedBlocksKeepWhatTheyRead() throws {
        let (names, cut, specification) = try Self.cut(nil)
        withExtendedLifetime(specification) {
            #expect(cut.feature == "b")
            #expect(cut.consumer == "\"y\" (linear)")
            #expect(names == ["a", "c", "p", "b"])
            #expect(cut.keptOperations == 3 && cut.baseOperations == 6)
            #expect(cut.shape == [1, 4] && cut.float16Type == nil && cut.output == "b")
        }
    }

    @Test func aNamedVariableKeepsOnlyWhatItNeeds() throws {
        let (names, _, specification) = try Self.cut("c")
        withExtendedLifetime(specification) { #expect(names == ["c"]) }
        #expect(throws: CutRefusal(reason: "\"x\" is a model input, not an operation output")) {
            try Self.cut("x")
        }
    }
}
