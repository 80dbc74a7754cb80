import FixtureSupport
import Foundation
import ModelSpec
import ModelValidation
import Testing

/// The validator over the committed fixtures: no complaint about a valid
/// model, and exactly the planted defect in each readable broken one.
@Suite struct FixtureValidationTests {
    func diagnostics(_ relative: String) throws -> [Diagnostic] {
        ModelValidator.validate(try ModelFile.open(Fixtures.path(relative)))
    }

    @Test(arguments: Fixtures.models.map(\.file))
    func validFixtureHasNoErrors(file: String) throws {
        let found = try diagnostics(file)
        #expect(found.filter { $0.severity == .error }.map(\.description) == [])
        #expect(found.map(\.description) == [])
    }

    @Test(arguments: [
        ("Broken/wrong-weight-count.mlmodel", "nn.weights.count",
         "layer 0 \"conv1\" (convolution): weights hold 215 values, expected 216 = 8 output channels × 3 kernel channels × 3 × 3"),
        ("Broken/undefined-layer-input.mlmodel", "nn.layer.input.undefined",
         "layer 8 \"fc\" (innerProduct): input \"nonexistent_blob\" is neither a model input nor an output of an earlier layer"),
        ("Broken/duplicate-output.mlmodel", "nn.blob.duplicate",
         "layer 1 \"dense_b\" (innerProduct): output \"hidden\" is already produced by layer 0 \"dense_a\""),
    ])
    func brokenFixtureHasExactlyItsDefect(file: String, rule: String, description: String) throws {
        let found = try diagnostics(file)
        #expect(found.map(\.description) == [description])
        #expect(found.map(\.rule) == [rule])
        #expect(found.map(\.severity) == [.error])
    }
}

/// Hostile input: every single-byte corruption of a fixture that still
/// unpacks must validate without crashing (sizes and counts lie freely).
@Suite struct CorruptedModelTests {
    @Test(arguments: ["Models/ImageClassifierInt8.mlmodel", "Models/TreeEnsembleClassifier.mlmodel",
                      "Models/PipelineClassifier.mlmodel", "Models/UpdatableClassifier.mlmodel"])
    func corruptedBytesNeverCrash(file: String) throws {
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Fixtures.path(file))))
        let directory = try Fixtures.temporaryDirectory("corrupt")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("model.mlmodel").path
        var validated = 0
        for position in stride(from: 0, to: original.count, by: max(1, original.count / 300)) {
            for value: UInt8 in [0x00, 0x7F, 0xFF] {
                var bytes = original
                bytes[position] = value
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                guard let model = try? ModelFile.open(path) else { continue }
                _ = ModelValidator.validate(model)
                validated += 1
            }
        }
        #expect(validated > 0)
    }
}
