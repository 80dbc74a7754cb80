import FixtureSupport
import ModelFeatures
import ModelRuntime
import Testing

/// Multi-function programs by name, and stateful programs keeping their
/// state between predictions (Fixtures/Models, made by Fixtures/generate.py).
@Suite("Program functions and states on the tensor engine")
struct ProgramFunctionTests {
    static let input: [String: FeatureValue] = {
        let values = (0..<(32 * 4 * 4)).map { Double($0 % 7) * 0.1 - 0.3 }
        return ["x": .multiArray(MultiArray(values, shape: [1, 32, 4, 4], dataType: .float32))]
    }()

    @Test("each function of MultiFunctionProgram runs by name", arguments: ["main", "palettized"])
    func functionByName(_ name: String) throws {
        let model = try Model(contentsOf: Fixtures.path("Models/MultiFunctionProgram.mlpackage"),
                              configuration: ModelConfiguration(threads: 1, functionName: name))
        #expect(model.summary.inputs.map(\.name) == ["x"])
        let outputs = try model.prediction(from: Self.input)
        let probabilities = try #require(outputs["probs"]?.multiArrayValue)
        #expect(probabilities.shape == [1, 16])
        #expect(abs(probabilities.doubles.reduce(0, +) - 1) < 1e-5)
    }

    @Test("the default function is the description's")
    func defaultFunction() throws {
        let model = try Model(contentsOf: Fixtures.path("Models/MultiFunctionProgram.mlpackage"), configuration: ModelConfiguration(threads: 1))
        let named = try Model(contentsOf: Fixtures.path("Models/MultiFunctionProgram.mlpackage"),
                              configuration: ModelConfiguration(threads: 1, functionName: "main"))
        #expect(try model.prediction(from: Self.input) == (try named.prediction(from: Self.input)))
    }

    @Test("an unknown function is refused naming the functions there are")
    func unknownFunction() throws {
        #expect(throws: ModelError.runtime(.unknownFunction(name: "nope", available: ["main", "palettized"]))) {
            _ = try Model(contentsOf: Fixtures.path("Models/MultiFunctionProgram.mlpackage"),
                          configuration: ModelConfiguration(threads: 1, functionName: "nope"))
        }
        #expect(throws: ModelError.runtime(.unknownFunction(name: "other", available: ["main"]))) {
            _ = try Model(contentsOf: Fixtures.path("Models/MLProgram.mlpackage"), configuration: ModelConfiguration(functionName: "other"))
        }
    }

    /// StatefulProgram: total = state × decay + x (fp16), y = total / 2, state ← total.
    @Test("a stateful program accumulates in its state, and a new state starts at zero")
    func statefulProgram() throws {
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulProgram.mlpackage"), configuration: ModelConfiguration(threads: 1))
        let state = try #require(model.makeState())
        #expect(state.names == ["accumulator"])
        let x: [String: FeatureValue] = ["x": .multiArray(MultiArray([Double](repeating: 1, count: 16), shape: [1, 16], dataType: .float32))]
        let first = try #require(try model.prediction(from: x, using: state)["y"]?.multiArrayValue)
        #expect(first.doubles.allSatisfy { $0 == 0.5 })
        let second = try #require(try model.prediction(from: x, using: state)["y"]?.multiArrayValue)
        // 0.5 × (decay + 1) with decay in [0.5, 1): between 0.75 and 1.
        #expect(second.doubles.allSatisfy { $0 >= 0.74 && $0 < 1.0 })
        let fresh = try #require(model.makeState())
        #expect(try model.prediction(from: x, using: fresh)["y"]?.multiArrayValue == first)
    }
}
