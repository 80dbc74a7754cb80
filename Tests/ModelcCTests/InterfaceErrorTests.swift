import FixtureSupport
import Foundation
import Testing
@testable import ModelcC

/// The C interface's error paths: every bad argument is a status and a
/// message, never a trap.
@Suite struct InterfaceErrorTests {
    private func lastError() -> String { modelc_last_error().map { String(cString: $0) } ?? "" }

    @Test func nullArgumentsAreUsageErrors() {
        var model: OpaquePointer?
        #expect(modelc_open(nil, 0, &model) == 64)
        #expect(lastError() == "path is NULL")
        #expect(model == nil)
        #expect(modelc_open("x", 0, nil) == 64)
        var outputs: OpaquePointer?
        #expect(modelc_predict(nil, nil, nil, &outputs) == 64)
        #expect(modelc_last_status() == 64)
    }

    @Test func missingFileIsCannotRead() {
        var model: OpaquePointer?
        let status = modelc_open("/nonexistent/model.mlmodel", 0, &model)
        #expect(status == 66)
        #expect(lastError().contains("/nonexistent/model.mlmodel"))
    }

    @Test func closedAppleKindIsUnsupported() throws {
        // A text classifier is refused at load (94), as the CLI's exit code says.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-not-a-model-\(getpid()).mlmodel").path
        try Data("not protobuf at all".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var model: OpaquePointer?
        let status = modelc_open(path, 0, &model)
        #expect(status == 65 || status == 69 || status == 68)
        #expect(!lastError().isEmpty)
    }

    @Test func badInputsNameTheInput() throws {
        var model: OpaquePointer?
        let path = Fixtures.path("Models/GLMClassifier.mlmodel")
        try #require(modelc_open(path, 1, &model) == 0)
        defer { modelc_close(model) }
        let inputs = modelc_features_new()
        defer { modelc_features_free(inputs) }
        var shape: [Int64] = [2]
        let values: [Double] = [1, 2]
        #expect(modelc_features_add_array(inputs, "features", 99, &shape, 1, values) == 64)
        #expect(lastError().contains("unknown data type 99"))
        #expect(modelc_features_add_array(inputs, "features", 3, &shape, 1, values) == 0)
        var outputs: OpaquePointer?
        #expect(modelc_predict(model, inputs, nil, &outputs) == 93)
        #expect(lastError() == "input \"features\" has shape 2, expected 4")
        #expect(outputs == nil)

        let empty = modelc_features_new()
        defer { modelc_features_free(empty) }
        #expect(modelc_predict(model, empty, nil, &outputs) == 93)
        #expect(lastError().hasPrefix("input \"features\" is missing"))

        var state: OpaquePointer?
        #expect(modelc_make_state(model, &state) == 93)
        #expect(lastError().hasSuffix("the model declares no state"))
    }

    @Test func aFailedRowKeepsItsErrorAndTheOthersRun() throws {
        var model: OpaquePointer?
        try #require(modelc_open(Fixtures.path("Models/GLMClassifier.mlmodel"), 2, &model) == 0)
        defer { modelc_close(model) }
        let good = modelc_features_new(), bad = modelc_features_new()
        defer { modelc_features_free(good); modelc_features_free(bad) }
        var four: [Int64] = [4], two: [Int64] = [2]
        _ = modelc_features_add_array(good, "features", 3, &four, 1, [1.0, 2, 3, 4])
        _ = modelc_features_add_array(bad, "features", 3, &two, 1, [1.0, 2])
        let rows: [OpaquePointer?] = [good, bad, good]
        var outputs = [OpaquePointer?](repeating: nil, count: 3)
        #expect(modelc_predict_many(model, rows, 3, &outputs) == 93)
        #expect(lastError().hasPrefix("row 1: "))
        #expect(modelc_features_status(outputs[0]) == 0)
        #expect(modelc_features_status(outputs[1]) == 93)
        #expect(modelc_features_count(outputs[2]) == 2)
        for output in outputs { modelc_features_free(output) }
    }
}
