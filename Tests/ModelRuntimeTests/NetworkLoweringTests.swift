import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import ModelSpec
import Testing

/// Every neural-network fixture run on the tensor engine through the
/// lowering (`engine: .tensor`), with the tolerances and shape checks the
/// layer engine's tests use: NumPy float64 and onnxruntime references.
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
        try file.check(engine: .tensor)
    }

    @Test("network fixtures, from the compiled bundle, two predictions at once", arguments: networks)
    func compiled(_ file: ParityFile) throws {
        try file.check(compiled: true, concurrently: 2, engine: .tensor)
    }

    @Test("regression fixtures keep their shapes", arguments: regressions)
    func regression(_ file: ParityFile) throws {
        try file.check(exactShapes: true, engine: .tensor)
    }

    @Test("layers the layer engine refuses", arguments: lowered)
    func loweredLayer(_ file: ParityFile) throws {
        try file.check(exactShapes: true, engine: .tensor)
        // nn_sequence_views holds layers the layer engine takes at load, but not its
        // sequence of two steps at prediction: `auto` (which keeps the layer engine) is not asked.
        guard !file.name.hasSuffix("/nn_sequence_views") else { return }
        try file.check(compiled: true, exactShapes: true, engine: .automatic)
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

    /// A layer kind the lowering has no rule for is refused at load, naming it (exit 94 in the CLI).
    @Test("a network forced onto the tensor engine refuses what neither engine runs, naming the layer")
    func refusal() throws {
        #expect(throws: ModelError.runtime(.unsupportedLayer(
            layer: "scale", kind: "custom", reason: "the tensor engine's lowering has no rule for this layer kind yet"))) {
            _ = try Model(contentsOf: Fixtures.path("Parity/Regressions/Unsupported/nn_custom_layer.mlmodel"),
                          configuration: ModelConfiguration(threads: 1, programEngine: .tensor))
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

    /// The layer engine's tests are the spec of what must keep working: on
    /// the same seeded inputs, the lowering gives the layer engine's outputs.
    @Test("the networks of Fixtures/Models give the layer engine's outputs", arguments: models)
    func sameAsLayerEngine(_ name: String) throws {
        let path = Fixtures.path("Models/\(name)")
        let layer = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1, programEngine: .layer))
        let tensor = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1, programEngine: .tensor))
        var random = SplitMix(seed: 2026)
        var inputs: [String: FeatureValue] = [:]
        for input in layer.summary.inputs where !input.isOptional {
            switch input.type {
            case .image(let image):
                let (width, height) = (Int(image.width), Int(image.height))
                let pixels = (0..<(width * height * 3)).map { _ in UInt8.random(in: 0...255, using: &random) }
                inputs[input.name] = .image(try #require(PixelBuffer(width: width, height: height, pixelFormat: .rgb, bytes: pixels)))
            case .multiArray(let array):
                let shape = array.shape.map(Int.init)
                let values = (0..<shape.reduce(1, *)).map { _ in Double.random(in: -1...1, using: &random) }
                inputs[input.name] = .multiArray(MultiArray(values, shape: shape))
            case .double:
                inputs[input.name] = .double(0.5)
            default:
                Issue.record("input \(input.name) of \(name) has a type this test does not make")
                return
            }
        }
        let want = try layer.prediction(from: inputs), got = try tensor.prediction(from: inputs)
        #expect(Set(got.keys) == Set(want.keys))
        for (output, expected) in want {
            switch (expected, got[output]) {
            case (.multiArray(let a), .multiArray(let b)?):
                #expect(a.count == b.count, "\(name) \(output)")
                let (x, y) = (a.doubles, b.doubles)
                for index in 0..<min(x.count, y.count) where abs(x[index] - y[index]) > 1e-4 * max(1, abs(x[index])) {
                    Issue.record("\(name) \(output)[\(index)]: tensor \(y[index]), layer \(x[index])")
                    break
                }
            case (.dictionary(.strings(let a)), .dictionary(.strings(let b))?):
                #expect(Set(a.keys) == Set(b.keys), "\(name) \(output)")
                for (key, value) in a { #expect(abs(value - (b[key] ?? .nan)) <= 1e-4, "\(name) \(output)[\(key)]") }
            case (.dictionary(.int64s(let a)), .dictionary(.int64s(let b))?):
                #expect(Set(a.keys) == Set(b.keys), "\(name) \(output)")
                for (key, value) in a { #expect(abs(value - (b[key] ?? .nan)) <= 1e-4, "\(name) \(output)[\(key)]") }
            default:
                #expect(got[output] == expected, "\(name) \(output)")
            }
        }
    }
}
