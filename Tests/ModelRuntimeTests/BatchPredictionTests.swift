import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// `Model.predictions(from:)` gives, in order, what one `prediction(from:)`
/// per set gives, whatever the thread count and with failures in their
/// places (tree ensembles evaluate a batch tree by tree, in blocks of rows).
@Suite("Batch predictions equal single predictions")
struct BatchPredictionTests {
    static let files = ["forest_classifier_multiclass", "forest_regressor", "xgboost_classifier_binary",
                        "gradient_boosting_classifier_multiclass", "pipeline_imputer_scaler_forest", "svc_rbf_multiclass",
                        "glm_binary_string_labels", "tree_classifier_binary"]

    @Test(arguments: files)
    func batchEqualsSingle(file: String) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/\(file).json")))) as? [String: Any])
        let cases = try #require(document["cases"] as? [[String: Any]])
        let path = Fixtures.path("Parity/\(file).mlmodel")
        let reference = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
        let parser = PredictionInputs(model: reference)
        var batch = try cases.map { try parser.parse(object: try #require($0["inputs"])) }
        // More rows than one block, and a set that fails in the middle.
        batch = batch + batch + batch + batch + batch
        let bad = batch.count / 2
        let name = try #require(reference.summary.inputs.first?.name)
        batch[bad] = [name: .string("not numbers")]
        let expected = batch.map { inputs in Result { () throws(RuntimeError) in try reference.prediction(from: inputs) } }
        for threads in [1, 2, 3, 7] {
            let model = try Model(contentsOf: path, configuration: ModelConfiguration(threads: threads))
            let results = model.predictions(from: batch)
            #expect(results.count == batch.count)
            for (index, (got, want)) in zip(results, expected).enumerated() {
                #expect(got == want, "threads \(threads), set \(index)")
            }
            if case .success = results[bad] { Issue.record("set \(bad) should have failed") }
        }
    }
}
