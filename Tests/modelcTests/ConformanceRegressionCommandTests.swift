import FixtureSupport
import Foundation
import Testing

/// `modelc predict` on the regression fixtures of issue 25
/// (`Fixtures/Parity/Regressions`): models the runtime used to refuse as
/// invalid (exit 76) now predict (exit 0) with the reference's shapes, and
/// valid models it does not run are refused with exit 94 naming the layer.
@Suite struct ConformanceRegressionCommandTests {
    /// `modelc predict MODEL --inputs FILE --json` on the first case of `name`.json.
    private func predictFirstCase(_ name: String) throws -> (ModelcProcess.Result, [String: Any]) {
        let folder = Fixtures.path("Parity/Regressions")
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(name).json"))) as? [String: Any])
        let model = try #require(document["model"] as? String)
        let cases = try #require(document["cases"] as? [[String: Any]])
        let first = try #require(cases.first)
        let directory = try Fixtures.temporaryDirectory("regression-predict")
        let inputs = directory.appendingPathComponent("inputs.json")
        try JSONSerialization.data(withJSONObject: try #require(first["inputs"])).write(to: inputs)
        let result = try ModelcProcess.run(["predict", "\(folder)/\(model)", "--inputs", inputs.path, "--json"],
                                           environment: ["MODELC_CACHE": directory.appendingPathComponent("cache").path])
        return (result, try #require(first["outputs"] as? [String: Any]))
    }

    private static func shape(_ json: Any?) -> [Int] {
        guard let array = json as? [Any] else { return [] }
        return [array.count] + shape(array.first)
    }

    /// Defects 5 to 9 and the batched layers of defect 1 were refused with exit 76; a rank-1
    /// batched matmul operand and a convolution whose weights are its second input with exit 94
    /// (both now run through the tensor engine's lowering).
    @Test("once refused as invalid, now predicted with the reference's shapes", arguments: [
        "program_instance_norm_defaults", "nn_batchnorm_batch", "program_transpose_negative_axes",
        "program_matmul_batch_broadcast", "program_reshape_zero_dims", "nn_channel_layers_batch2", "nn_batched_matmul_rank1",
        "nn_convolution_weights_input",
    ])
    func predicts(_ name: String) throws {
        let (result, expected) = try predictFirstCase(name)
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").first)
        let outputs = try #require((Fixtures.parseJSON(String(line)) as? [String: Any])?["outputs"] as? [String: Any])
        for (output, want) in expected {
            #expect(Self.shape(outputs[output]) == Self.shape(want), "output \(output)")
        }
    }

    @Test("a valid network modelc does not run exits 94 naming the layer", arguments: [
        ("nn_custom_layer", "layer \"scale\" (custom): the tensor engine's lowering has no rule"),
        ("nn_rank_from_values_read", "layer \"fill\" (fillDynamic): the rank of its output depends on values computed at run time"),
    ])
    func refused(_ file: String, message: String) throws {
        let directory = try Fixtures.temporaryDirectory("regression-refused")
        let result = try ModelcProcess.run(["predict", Fixtures.path("Parity/Regressions/Unsupported/\(file).mlmodel"), "--input", "x=[1]"],
                                           environment: ["MODELC_CACHE": directory.path])
        #expect(result.status == 94)
        #expect(result.standardError.contains(message), "\(result.standardError)")
        #expect(result.standardError.split(separator: "\n").count == 1)
    }
}
