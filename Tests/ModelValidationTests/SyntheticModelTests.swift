import FixtureSupport
import Foundation
import ModelSpec
import ModelValidation
import Testing

/// One defect planted in a small hand-encoded model per test, with the exact
/// line the validator must print for it.
@Suite struct SyntheticModelTests {
    func validate(_ bytes: [UInt8]) throws -> [String] {
        let directory = try Fixtures.temporaryDirectory("validation")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("model.mlmodel").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return ModelValidator.validate(try ModelFile.open(path)).map(\.description)
    }

    func rules(_ bytes: [UInt8]) throws -> [String] {
        let directory = try Fixtures.temporaryDirectory("validation")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("model.mlmodel").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return ModelValidator.validate(try ModelFile.open(path)).map(\.rule)
    }

    @Test func baseModelIsValid() throws {
        #expect(try validate(Build.dense()) == [])
        #expect(try validate(Build.dense(bias: Build.weights([1, 2]))) == [])
    }

    @Test(arguments: [0, 11, 100] as [UInt64])
    func specificationVersionOutOfRange(version: UInt64) throws {
        #expect(try validate(Build.dense(version: version)) == ["specification version \(version) is outside 1...10"])
    }

    @Test func modelTypeUnset() throws {
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [2]))], body: [])
        #expect(try rules(bytes) == ["model.type.unset"])
    }

    @Test func noOutputs() throws {
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))], outputs: [],
                                body: Build.network([Build.relu("r", input: "x", output: "y")]))
        #expect(try validate(bytes) == ["the model has no outputs; every model needs at least one"])
    }

    @Test func duplicateAndEmptyInputNames() throws {
        let array = Build.arrayType(shape: [4])
        let bytes = Build.model(inputs: [Build.feature("x", array), Build.feature("x", array), Build.feature("", array)],
                                outputs: [Build.feature("y", Build.arrayType(shape: [2]))],
                                body: Build.network([Build.innerProduct("fc", input: "x", output: "y", inputs: 4, outputs: 2,
                                                                        weights: Build.weights(Array(repeating: 0, count: 8)))]))
        #expect(try validate(bytes) == [
            "input \"x\": the name is already used by input 0; input names must be unique",
            "input 2: the name is empty",
        ])
    }

    @Test func optionalOutput() throws {
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [2]), optional: true)],
                                body: Build.network([Build.innerProduct("fc", input: "x", output: "y", inputs: 4, outputs: 2,
                                                                        weights: Build.weights(Array(repeating: 0, count: 8)))]))
        #expect(try validate(bytes) == ["output \"y\": the output is marked optional; outputs never are"])
    }

    @Test func multiArrayShapes() throws {
        let missing = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: []))],
                                  outputs: [Build.feature("y", Build.arrayType(shape: [4]))],
                                  body: Build.network([Build.relu("r", input: "x", output: "y")]))
        #expect(try validate(missing) == ["input \"x\": the multi-array input has neither a shape nor a flexible shape"])
        let negative = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4, -3]))],
                                   outputs: [Build.feature("y", Build.arrayType(shape: [4]))],
                                   body: Build.network([Build.relu("r", input: "x", output: "y")]))
        #expect(try validate(negative) == ["input \"x\": shape dimension 1 is -3; dimensions must be ≥ 0"])
    }

    @Test(arguments: [1, 4, 6] as [UInt64])
    func float16ArraysNeedVersion7(version: UInt64) throws {
        let bytes = Build.model(version: version, inputs: [Build.feature("x", Build.arrayType(shape: [4], dataType: Build.float16))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [4]))],
                                body: Build.network([Build.relu("r", input: "x", output: "y")]))
        #expect(try validate(bytes) == ["input \"x\": FLOAT16 multi-arrays need specification version 7, the model has \(version)"])
    }

    @Test func imageSizeAndColorSpace() throws {
        let bytes = Build.model(inputs: [Build.feature("image", Build.imageType(width: 0, height: 16, colorSpace: 0))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [4]))],
                                body: Build.network([Build.relu("r", input: "image", output: "y")]))
        #expect(try validate(bytes) == [
            "input \"image\": the width is 0; it must be > 0 (or come from a flexible size)",
            "input \"image\": the color space is INVALID_COLOR_SPACE; it must be RGB, BGR, GRAYSCALE or GRAYSCALE_FLOAT16",
        ])
    }

    @Test func networkWithoutLayers() throws {
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [4]))], body: Build.network([]))
        #expect(try validate(bytes) == ["the neural network has no layers"])
    }

    @Test func outputNoLayerProduces() throws {
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                outputs: [Build.feature("y", Build.arrayType(shape: [4])), Build.feature("z", Build.arrayType(shape: [4]))],
                                body: Build.network([Build.relu("r", input: "x", output: "y")]))
        #expect(try validate(bytes) == ["output \"z\": no layer produces this output"])
    }

    /// Every wrong weight count around the right one (8 = 4 × 2) is reported with both numbers.
    @Test(arguments: [1, 2, 7, 9, 16, 100])
    func innerProductWeightCount(count: Int) throws {
        let bytes = Build.dense(weights: Build.weights(Array(repeating: 0.1, count: count)))
        #expect(try validate(bytes) == [
            "layer 0 \"fc\" (innerProduct): weights hold \(count) value\(count == 1 ? "" : "s"), expected 8 = 4 input channels × 2 output channels",
        ])
    }

    @Test func missingWeightsAndBiasCount() throws {
        #expect(try validate(Build.dense(weights: [])) == [
            "layer 0 \"fc\" (innerProduct): weights hold no values, expected 8 = 4 input channels × 2 output channels",
        ])
        #expect(try validate(Build.dense(bias: Build.weights([1, 2, 3]))) == [
            "layer 0 \"fc\" (innerProduct): bias holds 3 values, expected 2 = 2 output channels",
        ])
    }

    @Test func twoStorageFormsAndMixedPrecision() throws {
        let both = Build.weights(Array(repeating: 0, count: 8)) + Wire.field(2, bytes: Array(repeating: 0, count: 16))
        #expect(try validate(Build.dense(weights: both)) == [
            "layer 0 \"fc\" (innerProduct): weights stores values in 2 forms at once (floatValue, float16Value); exactly one must be set",
        ])
        let half = Wire.field(2, bytes: Array(repeating: 0, count: 4))
        #expect(try validate(Build.dense(bias: half)) == [
            "layer 0 \"fc\" (innerProduct): the layer mixes float32 (weights) and float16 (bias) weights; use one precision per layer",
        ])
        // A bias the layer declares unused (hasBias false) is ignored, as Core ML does.
        #expect(try validate(Build.dense(bias: half, hasBias: false)) == [])
    }

    func quantized(bits: UInt64, bytes: Int, table: Int? = nil, scales: Int = 1, biases: Int? = nil) -> [UInt8] {
        let biasValues = Array(repeating: Float(0), count: biases ?? scales)
        let kind: [UInt8] = if let table {
            Wire.field(102, bytes: Wire.field(1, floats: Array(repeating: 0, count: table)))
        } else {
            Wire.field(101, bytes: Wire.field(1, floats: Array(repeating: 1, count: scales))
                + (biasValues.isEmpty ? [] : Wire.field(2, floats: biasValues)))
        }
        return Wire.field(30, bytes: Array(repeating: 0, count: bytes)) + Wire.field(40, bytes: Wire.field(1, varint: bits) + kind)
    }

    @Test func quantization() throws {
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 8))) == [])
        #expect(try validate(Build.dense(weights: quantized(bits: 4, bytes: 4, table: 16))) == [])
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 8, scales: 2))) == [])
        #expect(try validate(Build.dense(weights: quantized(bits: 9, bytes: 8))) == [
            "layer 0 \"fc\" (innerProduct): weights numberOfBits is 9, expected 1...8",
        ])
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 7))) == [
            "layer 0 \"fc\" (innerProduct): weights rawValue holds 7 bytes, expected 8 = ⌈8 values × 8 bits / 8⌉",
        ])
        #expect(try validate(Build.dense(weights: quantized(bits: 2, bytes: 2, table: 3))) == [
            "layer 0 \"fc\" (innerProduct): weights lookup table has 3 entries, expected 4 = 2^2",
        ])
        // Core ML's rule: one scale or one per output channel; no bias or one per scale.
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 8, scales: 2, biases: 0))) == [])
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 8, scales: 3))) == [
            "layer 0 \"fc\" (innerProduct): weights linear quantization has 3 scales, expected 1 or 2 (one per output channel)",
        ])
        #expect(try validate(Build.dense(weights: quantized(bits: 8, bytes: 8, scales: 1, biases: 2))) == [
            "layer 0 \"fc\" (innerProduct): weights linear quantization has 2 bias values, expected none or 1 (one per scale)",
        ])
    }

    /// A tree ensemble regressor: node 0 branches to 1 and `falseChild`.
    func tree(falseChild: UInt64, leafBack: Bool = false) -> [UInt8] {
        let leafInfo = Wire.field(20, bytes: Wire.field(1, varint: 0) + [0x11] + Array(repeating: 0, count: 8))
        let root = Wire.field(2, varint: 0) + Wire.field(3, varint: 0) + Wire.field(12, varint: 1) + Wire.field(13, varint: falseChild)
        let one = leafBack
            ? Wire.field(2, varint: 1) + Wire.field(3, varint: 0) + Wire.field(12, varint: 0) + Wire.field(13, varint: 2)
            : Wire.field(2, varint: 1) + Wire.field(3, varint: 6) + leafInfo
        let two = Wire.field(2, varint: 2) + Wire.field(3, varint: 6) + leafInfo
        let ensemble = [root, one, two].flatMap { Wire.field(1, bytes: $0) } + Wire.field(2, varint: 1)
        let description = Build.description(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                            outputs: [Build.feature("y", [0x12, 0x00])])
        return Wire.field(1, varint: 1) + Wire.field(2, bytes: description + Wire.field(11, string: "y"))
            + Wire.field(302, bytes: Wire.field(1, bytes: ensemble))
    }

    @Test func treeEnsembleLinks() throws {
        #expect(try validate(tree(falseChild: 2)) == [])
        #expect(try validate(tree(falseChild: 7)) == [
            "tree node 0 (tree 0, node 0): the false child node id 7 does not exist in tree 0",
        ])
        #expect(try validate(tree(falseChild: 2, leafBack: true)) == [
            "tree 0 has a cycle through node id 0; trees must not loop",
        ])
    }

    @Test func pipelineStageInputAndNestedLocation() throws {
        let first = Build.dense()
        let badStage = Build.model(inputs: [Build.feature("missing", Build.arrayType(shape: [2]))],
                                   outputs: [Build.feature("z", Build.arrayType(shape: [2]))],
                                   body: Build.network([Build.relu("r", input: "nothing", output: "z")]))
        let pipeline = Wire.field(202, bytes: Wire.field(1, bytes: first) + Wire.field(1, bytes: badStage))
        let bytes = Build.model(inputs: [Build.feature("x", Build.arrayType(shape: [4]))],
                                outputs: [Build.feature("z", Build.arrayType(shape: [2]))], body: pipeline)
        #expect(try validate(bytes) == [
            "pipeline model 1: layer 0 \"r\" (activation): input \"nothing\" is neither a model input nor an output of an earlier layer",
            "pipeline model 1: input \"missing\": neither a pipeline input nor an output of an earlier model",
        ])
    }

    @Test func oneHotEncoderWithoutCategories() throws {
        let bytes = Build.model(version: 1, inputs: [Build.feature("x", [0x0A, 0x00])],
                                outputs: [Build.feature("y", Build.arrayType(shape: [3]))],
                                body: Wire.field(600, bytes: Wire.field(1, bytes: [])))
        #expect(try validate(bytes) == ["the one-hot encoder has no categories"])
    }
}
