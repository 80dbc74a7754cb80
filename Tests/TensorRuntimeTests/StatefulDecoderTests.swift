import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// A tiny GPT-2-shaped decoder whose key/value caches are Core ML states
/// (Fixtures/Models/StatefulDecoder, made by Fixtures/stateful_decoder.py):
/// a prefill and one-token steps on one state give the logits of PyTorch's
/// full forward over every token so far, in float64.
@Suite("A decoder with its key/value caches in states")
struct StatefulDecoderTests {
    struct Prediction {
        var inputs: [String: FeatureValue]
        var logits: [Double]
        var shape: [Int]
    }

    static func load() throws -> (predictions: [Prediction], tolerance: Double) {
        let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/StatefulDecoder.json")))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let tolerance = try #require(document["tolerance"] as? Double)
        let cases = try #require(document["predictions"] as? [[String: Any]])
        var predictions: [Prediction] = []
        for entry in cases {
            let given = try #require(entry["inputs"] as? [String: Any])
            var inputs: [String: FeatureValue] = [:]
            for (name, value) in given {
                let (values, shape) = flatten(value)
                inputs[name] = .multiArray(MultiArray(values, shape: shape, dataType: name == "causal_mask" ? .float32 : .int32))
            }
            let (logits, shape) = flatten(entry["logits"] as Any)
            predictions.append(Prediction(inputs: inputs, logits: logits, shape: shape))
        }
        return (predictions, tolerance)
    }

    /// A nested JSON array as its numbers in order and its shape.
    static func flatten(_ value: Any) -> ([Double], [Int]) {
        guard let array = value as? [Any] else { return ([(value as? NSNumber)?.doubleValue ?? .nan], []) }
        var values: [Double] = []
        var inner: [Int] = []
        for element in array {
            let (elementValues, elementShape) = flatten(element)
            values += elementValues
            inner = elementShape
        }
        return (values, [array.count] + inner)
    }

    @Test("a prefill and one-token steps on one state give the full forward's logits", arguments: [1, 2])
    func stepsEqualFullForward(threads: Int) throws {
        let (predictions, tolerance) = try Self.load()
        #expect(predictions.count == 3)
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulDecoder.mlpackage"), configuration: ModelConfiguration(threads: threads))
        let state = try #require(model.makeState())
        #expect(state.names.count == 4)
        for (index, prediction) in predictions.enumerated() {
            let logits = try #require(try model.prediction(from: prediction.inputs, using: state)["logits"]?.multiArrayValue)
            #expect(logits.shape == prediction.shape, "prediction \(index)")
            let worst = zip(logits.doubles, prediction.logits).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? .infinity
            #expect(worst <= tolerance, "prediction \(index): relative difference \(worst)")
        }
    }

    @Test("a step on a fresh state is not the step after the prefix")
    func stateMatters() throws {
        let (predictions, tolerance) = try Self.load()
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulDecoder.mlpackage"), configuration: ModelConfiguration(threads: 1))
        let fresh = try #require(model.makeState())
        let logits = try #require(try model.prediction(from: predictions[1].inputs, using: fresh)["logits"]?.multiArrayValue)
        let worst = zip(logits.doubles, predictions[1].logits).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? 0
        #expect(worst > tolerance)
    }
}
