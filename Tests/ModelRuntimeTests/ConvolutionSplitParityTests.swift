import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// The CNNs of the zoo on the tensor engine at 2 and 3 threads, where
/// convolutions and pooling run as blocks of output rows on Dispatch's
/// threads, against the same model at one thread (one primitive per
/// convolution): every output within 1e-5 relative to max(1, |x|).
@Suite("Convolutions split between threads compute what one thread does")
struct ConvolutionSplitParityTests {
    static let models = ["convnext_tiny_fp32", "densenet121_fp32", "efficientnet_b0_fp32", "lraspp_mobilenet_v3_fp32",
                         "mobilenet_v3_small_fp32", "regnet_fp32"]

    @Test("zoo CNNs at 2 and 3 threads equal 1 thread", arguments: models, [2, 3])
    func matchesOneThread(_ name: String, threads: Int) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/Zoo/\(name).json")))) as? [String: Any])
        let modelName = try #require(document["model"] as? String)
        let cases = try #require(document["cases"] as? [[String: Any]])
        let path = Fixtures.path("Parity/Zoo/\(modelName)")
        let one = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
        let split = try Model(contentsOf: path, configuration: ModelConfiguration(threads: threads))
        for testCase in cases {
            let inputs = try PredictionInputs(model: one).parse(object: try #require(testCase["inputs"]))
            let want = try one.prediction(from: inputs), got = try split.prediction(from: inputs)
            #expect(Set(want.keys) == Set(got.keys))
            for (output, value) in want {
                let a = try #require(value.multiArrayValue), b = try #require(got[output]?.multiArrayValue)
                #expect(a.shape == b.shape)
                let x = a.floats, y = b.floats
                let worst = zip(x, y).map { abs(Double($0) - Double($1)) / max(1, abs(Double($0))) }.max() ?? 0
                #expect(worst <= 1e-5, "\(name) output \(output) at \(threads) threads differs by \(worst)")
            }
        }
    }
}
