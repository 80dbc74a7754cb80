import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// A prediction is stopped through its `PredictionCancellation`: the tensor engine
/// looks before each operation, so a cancelled prediction ends with
/// `RuntimeError.cancelled` and leaves the model able to predict again.
@Suite struct PredictionCancellationTests {
    /// Zeros of the declared shape for every multi-array input.
    static func zeros(for model: Model) throws -> [String: FeatureValue] {
        var inputs: [String: FeatureValue] = [:]
        for input in model.summary.inputs {
            guard case .multiArray(let array) = input.type else { continue }
            let shape = array.shape.map { Int(max($0, 1)) }
            inputs[input.name] = .multiArray(MultiArray([Double](repeating: 0, count: shape.reduce(1, *)), shape: shape))
        }
        return inputs
    }

    @Test func aCancelledPredictionStopsAndTheModelStillPredicts() throws {
        let model = try Model(contentsOf: Fixtures.path("Models/Int8PerChannelProgram.mlpackage"))
        let inputs = try Self.zeros(for: model)
        let expected = try model.prediction(from: inputs)
        let cancellation = PredictionCancellation()
        #expect(try model.prediction(from: inputs, cancellation: cancellation) == expected)
        cancellation.cancel()
        #expect(throws: RuntimeError.cancelled) { try model.prediction(from: inputs, cancellation: cancellation) }
        #expect(try model.prediction(from: inputs, cancellation: PredictionCancellation()) == expected)
        #expect(RuntimeError.cancelled.description == "the prediction was cancelled")
    }
}
