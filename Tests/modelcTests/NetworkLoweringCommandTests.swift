import FixtureSupport
import Foundation
import Testing

/// `modelc predict` on networks lowered onto the tensor engine (the only
/// engine): layers the removed layer engine refused, a CNN it ran (with and
/// without `--engine tensor`, the same engine now), and a layer the lowering
/// refuses, with exit 94 naming it.
@Suite struct NetworkLoweringCommandTests {
    /// `modelc predict MODEL --inputs FILE --json [extra]` on the first case of a parity file; its outputs and the reference's.
    private func predictFirstCase(_ file: String, _ extra: [String] = []) throws -> (ModelcProcess.Result, [String: Any]) {
        let path = Fixtures.path("Parity/\(file).json")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        let model = try #require(document["model"] as? String)
        let first = try #require((document["cases"] as? [[String: Any]])?.first)
        let directory = try Fixtures.temporaryDirectory("lowering-predict")
        let inputs = directory.appendingPathComponent("inputs.json")
        try JSONSerialization.data(withJSONObject: try #require(first["inputs"])).write(to: inputs)
        let folder = (path as NSString).deletingLastPathComponent
        let result = try ModelcProcess.run(["predict", "\(folder)/\(model)", "--inputs", inputs.path, "--json"] + extra,
                                           environment: ["MODELC_CACHE": directory.appendingPathComponent("cache").path])
        return (result, try #require(first["outputs"] as? [String: Any]))
    }

    private static func flat(_ json: Any?) -> [Double] {
        if let array = json as? [Any] { return array.flatMap { flat($0) } }
        return (json as? NSNumber).map { [$0.doubleValue] } ?? []
    }

    @Test("networks predict through the lowering, with or without --engine tensor", arguments: [
        ("Lowering/nn_lstm", [String]()), ("Lowering/nn_indexing", []), ("Networks/mobilenet_block", []),
        ("Networks/mobilenet_block", ["--engine", "tensor"]),
    ])
    func predicts(_ file: String, _ extra: [String]) throws {
        let (result, expected) = try predictFirstCase(file, extra)
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").first)
        let outputs = try #require((Fixtures.parseJSON(String(line)) as? [String: Any])?["outputs"] as? [String: Any])
        for (name, want) in expected {
            let got = Self.flat(outputs[name]), reference = Self.flat(want)
            #expect(got.count == reference.count, "output \(name)")
            for (a, b) in zip(got, reference) { #expect(abs(a - b) <= 1e-4 * max(1, abs(b)), "output \(name): \(a) against \(b)") }
        }
    }

    @Test("an unseeded random layer exits 94 naming the layer")
    func refused() throws {
        let directory = try Fixtures.temporaryDirectory("lowering-refused")
        let result = try ModelcProcess.run(["predict", Fixtures.path("Parity/Lowering/Refused/nn_random_unseeded.mlmodel"), "--input", "x=[1,2]"],
                                           environment: ["MODELC_CACHE": directory.path])
        #expect(result.status == 94)
        #expect(result.standardError.contains("layer \"noise\" (randomNormalLike): random sampling without a seed"), "\(result.standardError)")
        #expect(result.standardError.split(separator: "\n").count == 1)
    }

    /// `modelc inspect` judges a network by the lowering, with its message.
    @Test("inspect reports a layer the lowering has no rule for, and a lowered network as running")
    func inspectSupport() throws {
        let directory = try Fixtures.temporaryDirectory("lowering-inspect")
        let refused = try ModelcProcess.run(["inspect", Fixtures.path("Parity/Regressions/Unsupported/nn_custom_layer.mlmodel")],
                                            environment: ["MODELC_CACHE": directory.path])
        #expect(refused.status == 0, "\(refused.standardError)")
        #expect(refused.standardOutput.hasSuffix("""
              runs here               no
                layer "scale" (custom): the tensor engine's lowering has no rule for this layer kind yet

            """), "\(refused.standardOutput)")
        let lowered = try ModelcProcess.run(["inspect", Fixtures.path("Parity/Lowering/nn_lstm.mlmodel"), "--json"],
                                            environment: ["MODELC_CACHE": directory.path])
        #expect(lowered.status == 0, "\(lowered.standardError)")
        #expect(lowered.standardOutput.contains("\"runs\" : true"), "\(lowered.standardOutput)")
    }
}
