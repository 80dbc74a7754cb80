import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import ModelSpec
import Testing

/// Every neural-network fixture run on the tensor engine through the
/// lowering, the only way networks run: NumPy float64 and onnxruntime
/// references, with their tolerances and shape checks.
@Suite("Neural networks lowered onto the tensor engine agree with NumPy and onnxruntime")
struct NetworkLoweringTests {
    /// The neural networks (and pipelines holding them) of Fixtures/Parity/Networks.
    static let networks = ParityFile.all(in: "Networks").filter { !$0.name.hasPrefix("Networks/program_") }
    /// The neural-network regressions of Fixtures/Parity/Regressions (shapes checked exactly).
    static let regressions = ParityFile.all(in: "Regressions").filter { $0.name.hasPrefix("Regressions/nn_") }
    /// Layers only the lowering runs (Fixtures/network_lowering.py), shapes checked exactly.
    static let lowered = ParityFile.all(in: "Lowering")

    @Test("the network fixtures are there")
    func fixturesExist() {
        #expect(Self.networks.count >= 20)
        #expect(Self.regressions.count >= 8)
    }

    @Test("network fixtures, from the source model", arguments: networks)
    func sourceNetwork(_ file: ParityFile) throws {
        try file.check()
    }

    @Test("network fixtures, from the compiled bundle, two predictions at once", arguments: networks)
    func compiled(_ file: ParityFile) throws {
        try file.check(compiled: true, concurrently: 2)
    }

    @Test("regression fixtures keep their shapes", arguments: regressions)
    func regression(_ file: ParityFile) throws {
        try file.check(exactShapes: true)
    }

    @Test("layers only the lowering ran before the layer engine was removed", arguments: lowered)
    func loweredLayer(_ file: ParityFile) throws {
        try file.check(exactShapes: true)
        try file.check(compiled: true, exactShapes: true)
    }

    /// Random sampling runs with a seed (the same numbers at every
    /// prediction); without one it is refused at load, naming the layer,
    /// unless its distribution has a single value.
    @Test("an unseeded random layer is refused at load, a seeded or single-valued one runs reproducibly")
    func randomLayers() throws {
        #expect(throws: ModelError.runtime(.unsupportedLayer(
            layer: "noise", kind: "randomNormalLike",
            reason: "random sampling without a seed cannot be reproduced; modelc runs it only with a seed"))) {
            _ = try Model(contentsOf: Fixtures.path("Parity/Lowering/Refused/nn_random_unseeded.mlmodel"))
        }
        let model = try Model(contentsOf: Fixtures.path("Parity/Lowering/nn_random_seeded.mlmodel"))
        let input: [String: FeatureValue] = ["x": .multiArray(MultiArray([Float](repeating: 0, count: 6), shape: [2, 3]))]
        let first = try model.prediction(from: input), second = try model.prediction(from: input)
        guard case .multiArray(let a)? = first["y"], case .multiArray(let b)? = second["y"] else {
            Issue.record("no output y")
            return
        }
        #expect(a.shape == [2, 3])
        #expect(a.doubles == b.doubles)
        #expect(Set(a.doubles).count == 6)
        // No seed, but a probability of 1: every draw is 1.
        let coin = try Model(contentsOf: Fixtures.path("Parity/Lowering/nn_random_single_value.mlmodel"))
        let ones = try coin.prediction(from: ["x": .multiArray(MultiArray([Float(0)], shape: [1]))])
        guard case .multiArray(let drawn)? = ones["y"] else {
            Issue.record("no output y")
            return
        }
        #expect(drawn.shape == [2, 3])
        #expect(drawn.doubles == [Double](repeating: 1, count: 6))
    }

    /// A random layer whose shape is its input's values runs with a seed —
    /// planned at prediction, the shape following the values, the same
    /// numbers at every prediction of the same shape — and without one is
    /// refused at load.
    @Test("a seeded dynamic random layer takes its shape from its input at prediction; an unseeded one is refused")
    func dynamicRandomLayers() throws {
        #expect(throws: ModelError.runtime(.unsupportedLayer(
            layer: "noise", kind: "randomNormalDynamic",
            reason: "random sampling without a seed cannot be reproduced; modelc runs it only with a seed"))) {
            _ = try Model(contentsOf: Fixtures.path("Parity/Lowering/Refused/nn_random_dynamic_unseeded.mlmodel"))
        }
        let model = try Model(contentsOf: Fixtures.path("Parity/Lowering/nn_random_dynamic_seeded.mlmodel"))
        for shape in [[3, 4], [1, 7], [5, 2], [3, 4]] {
            let input: [String: FeatureValue] = ["shape": .multiArray(MultiArray(shape.map(Double.init), shape: [2]))]
            let first = try model.prediction(from: input), second = try model.prediction(from: input)
            guard case .multiArray(let a)? = first["y"], case .multiArray(let b)? = second["y"] else {
                Issue.record("no output y for shape \(shape)")
                return
            }
            #expect(a.shape == shape)
            #expect(a.doubles == b.doubles)
            #expect(a.doubles.allSatisfy { $0 >= -1 && $0 < 3 }, "uniform in [-1, 3): \(a.doubles)")
            #expect(Set(a.doubles).count == shape.reduce(1, *))
        }
    }

    /// A layer kind the lowering has no rule for is refused at load, naming it
    /// (exit 94 in the CLI); the support check (`modelc inspect`) names it with
    /// the same message.
    @Test("a layer the lowering has no rule for is refused at load and reported by the support check, naming it")
    func refusal() throws {
        let refusal = RuntimeError.unsupportedLayer(
            layer: "scale", kind: "custom", reason: "the tensor engine's lowering has no rule for this layer kind yet")
        let path = Fixtures.path("Parity/Regressions/Unsupported/nn_custom_layer.mlmodel")
        #expect(throws: ModelError.runtime(refusal)) {
            _ = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
        }
        let support = RuntimeSupport(try ModelFile.open(path).specification)
        #expect(support.problems == [refusal.description])
        // A parameter the lowering cannot honour shows when the network is prepared.
        let unseeded = RuntimeSupport(try ModelFile.open(Fixtures.path("Parity/Lowering/Refused/nn_random_unseeded.mlmodel")).specification)
        #expect(unseeded.problems == [RuntimeError.unsupportedLayer(
            layer: "noise", kind: "randomNormalLike",
            reason: "random sampling without a seed cannot be reproduced; modelc runs it only with a seed").description])
        // Layers the layer engine refused run: the check is the lowering's.
        for file in Self.lowered {
            let document = try #require(try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/\(file.name).json")))) as? [String: Any])
            let model = try #require(document["model"] as? String)
            #expect(RuntimeSupport(try ModelFile.open(Fixtures.path("\(file.folder)/\(model)")).specification).runs, "\(file.name)")
        }
    }

    /// The neural networks of Fixtures/Models (and pipelines holding one).
    static let models: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: Fixtures.path("Models"))) ?? []
        let kinds: Set<String> = ["neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor"]
        return names.filter { $0.hasSuffix(".mlmodel") }.sorted().filter { name in
            guard let model = try? Model(contentsOf: Fixtures.path("Models/\(name)"), configuration: ModelConfiguration(threads: 1)) else { return false }
            let summary = model.summary
            return kinds.contains(summary.modelType ?? "") || (summary.pipeline ?? []).contains { kinds.contains($0.modelType ?? "") }
        }
    }()

    /// References for the networks of Fixtures/Models (Fixtures/model_references.py).
    static let modelReferences = ParityFile.all(in: "Models")

    /// Networks of Fixtures/Models whose reference lives elsewhere: copies with
    /// onnxruntime references in Parity/Networks (Fixtures/network_parity.py),
    /// and the image-to-image inverter, checked pixel by pixel below.
    static let referencedElsewhere: Set<String> = [
        "ImageClassifier.mlmodel", "ImageClassifierFP16.mlmodel", "ImageClassifierInt8.mlmodel",
        "ImageClassifierFlexible.mlmodel", "ImageInverter.mlmodel",
    ]

    @Test("every network of Fixtures/Models has an independent reference")
    func everyModelHasAReference() {
        let referenced = Set(Self.modelReferences.map { String($0.name.dropFirst("Models/".count)) + ".mlmodel" })
        #expect(Self.models.count >= 15)
        for name in Self.models {
            #expect(referenced.contains(name) || Self.referencedElsewhere.contains(name), "\(name) has no reference")
        }
    }

    /// The networks of Fixtures/Models against NumPy float64 and onnxruntime,
    /// on the tensor engine and on the default engine from the compiled bundle.
    @Test("the networks of Fixtures/Models agree with NumPy and onnxruntime", arguments: modelReferences)
    func modelNetwork(_ file: ParityFile) throws {
        try file.check()
        try file.check(compiled: true, concurrently: 2)
    }

    /// ImageInverter's output is an image: 255 - every input byte, exactly.
    @Test("the image inverter gives 255 minus every pixel")
    func imageInverter() throws {
        let model = try Model(contentsOf: Fixtures.path("Models/ImageInverter.mlmodel"), configuration: ModelConfiguration(threads: 1))
        var random = SplitMix(seed: 2027)
        let pixels = (0..<(32 * 32 * 3)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let image = try #require(PixelBuffer(width: 32, height: 32, pixelFormat: .rgb, bytes: pixels))
        guard case .image(let inverted)? = try model.prediction(from: ["image": .image(image)])["inverted"] else {
            Issue.record("no image output \"inverted\"")
            return
        }
        #expect(inverted.width == 32 && inverted.height == 32)
        let (r, g, b) = inverted.pixelFormat.rgbOffsets
        let step = inverted.pixelFormat.bytesPerPixel
        var wrong = 0
        for y in 0..<32 {
            for x in 0..<32 {
                let at = y * inverted.bytesPerRow + x * step, source = (y * 32 + x) * 3
                for (offset, channel) in [(r, 0), (g, 1), (b, 2)] where inverted.bytes[at + offset] != 255 - pixels[source + channel] {
                    wrong += 1
                }
            }
        }
        #expect(wrong == 0)
    }
}
