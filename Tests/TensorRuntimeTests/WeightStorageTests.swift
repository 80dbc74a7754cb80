import CoreMLSchema
import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import ModelSpec
import Testing
@testable import TensorRuntime

/// Where the tensor engine keeps a program's weights: float weights stay
/// where the weight file is mapped (no decoded copy beside the packed one),
/// kernels that read a float32 weight by address read it there, a product's
/// packed weights are shared by the plans of every input shape, and a plan
/// made after the weights' pages were released (shape A, then B, then A
/// again) still computes the references.
@Suite("Weights of the tensor engine")
struct WeightStorageTests {
    static func engine(_ path: String) throws -> TensorEngine {
        let file = try ModelFile.open(Fixtures.path(path))
        return try withExtendedLifetime(file) {
            try TensorEngine(program: file.specification.root, interface: ModelInterface(ModelSummary(file)),
                             modelDirectory: file.modelDirectory)
        }
    }

    /// The plan's constants with at least `minimum` elements.
    static func weights(_ plan: TensorPlan, minimum: Int = 1024) -> [Tensor] {
        plan.values.compactMap(\.constant).filter { $0.count >= minimum && $0.type.isFloat }
    }

    @Test("float weights are read where the weight file is mapped, not decoded",
          arguments: ["bert_fp32", "gpt2_fp32", "bert_fp16", "gpt2_fp16"])
    func weightsStayMapped(model: String) throws {
        let engine = try Self.engine("Parity/Zoo/\(model).mlpackage")
        let plan = try engine.plan(for: ["input_ids": [1, 7]])
        let weights = Self.weights(plan)
        #expect(weights.count >= 8)
        let decoded = weights.filter { if case .mapped = $0.storage { false } else { true } }
        #expect(decoded.isEmpty, "\(decoded.count) of \(weights.count) weights decoded into arrays")
        let mappedHalf = weights.contains { if case .mapped(let values) = $0.storage { values.half } else { false } }
        #expect(mappedHalf == model.hasSuffix("fp16"))
    }

    @Test("compressed matrices stay as stored (codes with scales or tables) and no plan copies them as floats",
          arguments: [("bert_int4b", "input_ids", [1, 9], 14), ("bert_lut4g", "input_ids", [1, 1], 14), ("bert_int8", "input_ids", [1, 9], 1),
                      ("bert_pal4", "input_ids", [1, 1], 1), ("llama_int4b", "x", [1, 11], 12), ("llama_lut4g", "x", [1, 11], 12),
                      ("llama_pal6", "x", [1, 11], 2)])
    func compressedWeightsStayPacked(model: String, input: String, shape: [Int], decompressions: Int) throws {
        // Every matrix a constexpr_* operation decompresses (the program's count of them) stays packed.
        let engine = try Self.engine("Parity/Zoo/\(model).mlpackage")
        let plan = try engine.plan(for: [input: shape])
        let packed = plan.values.filter { if case .packed(let weights)? = $0.constant?.storage { weights.decoding != .codes } else { false } }
        #expect(packed.count >= decompressions, "\(model): \(packed.count) packed matrices")
        let stored = packed.reduce(0) { total, value in
            if case .packed(let weights)? = value.constant?.storage { total + weights.storedBytes } else { total }
        }
        #expect(stored < packed.reduce(0) { $0 + $1.count * 4 }, "\(model): stored bytes are no fewer than float32's")
        let copied = packed.filter { plan.constantAddresses[$0.id] != nil }
        #expect(copied.isEmpty, "\(model): \(copied.count) packed matrices copied into the plan as floats")
    }

    @Test("kernels read float32 weights where the weight file is mapped, not from a copy", arguments: ["bert_fp32", "gpt2_fp32"])
    func planCopiesNoWeights(model: String) throws {
        let engine = try Self.engine("Parity/Zoo/\(model).mlpackage")
        let plan = try engine.plan(for: ["input_ids": [1, 9]])
        // The embeddings a `gather` reads, the biases and norms that are not packed: their addresses are the file's.
        var inPlace = 0
        for (id, address) in plan.constantAddresses {
            guard case .mapped(let values)? = plan.values[id].constant?.storage, let direct = values.direct?.baseAddress else { continue }
            #expect(address.pointer == UnsafeMutableRawPointer(mutating: direct), "value \(id) was copied")
            inPlace += 1
        }
        #expect(inPlace >= 2)
    }

    @Test("plans of other input shapes read the packed weights the first plan made", arguments: ["bert_fp32", "bert_fp16"])
    func packedWeightsShared(model: String) throws {
        let engine = try Self.engine("Parity/Zoo/\(model).mlpackage")
        // A linear layer's weight [n, k] is packed from its transpose: dims [k, n], strides [1, k]. The
        // product last made over it, and the bytes it packed itself (a shared copy counts nothing).
        func packedBytes(_ plan: TensorPlan) -> [(weights: Int, packed: Int)] {
            Self.weights(plan).filter { $0.shape.count == 2 }.compactMap { weight in
                weight.stableFloatAddress.flatMap { address in
                    let (n, k) = (weight.shape[0], weight.shape[1])
                    return DNNLKernels.product(packing: .init(address: address, count: weight.count, dims: [k, n], strides: [1, k]))
                }.map { (weight.count * 4, $0.constantBytes) }
            }
        }
        // The engine planned the declared shape when it opened, packing every weight: the plans
        // made since pack their biases only.
        for length in [5, 23] {
            let packed = packedBytes(try engine.plan(for: ["input_ids": [1, length]]))
            #expect(packed.count >= 6)
            #expect(packed.allSatisfy { $0.packed < $0.weights / 4 }, "length \(length): \(packed)")
        }
    }

    /// Input shapes planned in the order A, B, A, C, B on a fresh model: the
    /// later plans pack (or share) weights whose mapped pages the earlier
    /// ones released; every prediction equals PyTorch's float64 reference.
    @Test("plans made after others released the weights' pages compute the references",
          arguments: ["bert_fp32", "gpt2_fp32", "bert_fp16", "gpt2_fp16"], [1, 2])
    func shapesPlannedAgain(model: String, threads: Int) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/Zoo/\(model).json")))) as? [String: Any])
        let tolerance = try #require(document["tolerance"] as? Double)
        let cases = try #require(document["cases"] as? [[String: Any]])
        #expect(cases.count == 3)
        let loaded = try Model(contentsOf: Fixtures.path("Parity/Zoo/\(model).mlpackage"),
                               configuration: ModelConfiguration(threads: threads))
        let parser = PredictionInputs(model: loaded)
        for index in [0, 1, 0, 2, 1] {
            let inputs = try parser.parse(object: try #require(cases[index]["inputs"]))
            let expected = try #require(cases[index]["outputs"] as? [String: Any])
            let outputs = try loaded.prediction(from: inputs)
            for (name, want) in expected {
                let got = try #require(outputs[name]?.multiArrayValue, "case \(index): no output \(name)")
                let reference = Self.flatten(want)
                #expect(got.count == reference.count, "case \(index) \(name)")
                let worst = zip(got.doubles, reference).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? .infinity
                #expect(worst <= tolerance, "case \(index) \(name): relative difference \(worst)")
            }
        }
    }

    @Test("a decoder's prefill planned again after its steps gives the references")
    func decoderPrefillAgain() throws {
        let (predictions, tolerance) = try StatefulDecoderTests.load()
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulDecoder.mlpackage"), configuration: ModelConfiguration(threads: 1))
        // Prefill (shape A), step (B), then on a new state the prefill (A) and the step (B) again.
        for (round, order) in [[0, 1, 2], [0, 1]].enumerated() {
            let state = try #require(model.makeState())
            for index in order {
                let prediction = predictions[index]
                let logits = try #require(try model.prediction(from: prediction.inputs, using: state)["logits"]?.multiArrayValue)
                let worst = zip(logits.doubles, prediction.logits).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? .infinity
                #expect(logits.shape == prediction.shape && worst <= tolerance, "round \(round) prediction \(index): \(worst)")
            }
        }
    }

    @Test("mapped values equal the decoded ones, after their pages are released too; a misaligned blob is not mapped")
    func mappedValuesMatchDecoding() throws {
        let file = try MILBlobFile(path: Fixtures.path("Parity/Zoo/bert_fp32.mlpackage/Data/com.apple.CoreML/weights/weight.bin"))
        // The first blob's record follows the 64-byte header.
        let data = try file.data(at: UInt64(MILBlobFile.headerSize))
        let count = data.count / 4
        #expect(count >= 16)
        let decoded = try ConstantReader.decode(data, dataType: CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32, shape: [count], owner: "test")
        let mapped = try #require(MappedValues(file: file, bytes: data, count: count, half: false))
        #expect(mapped.floats == decoded.floats)
        mapped.releasePages()
        #expect(mapped.floats == decoded.floats)
        // The same bytes read as float16, from 2 bytes in: decoded when asked.
        let shifted = UnsafeRawBufferPointer(rebasing: data[2...])
        let halves = try #require(MappedValues(file: file, bytes: shifted, count: count, half: true))
        let decodedHalves = try ConstantReader.decode(shifted, dataType: CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16, shape: [count], owner: "test")
        #expect(halves.direct == nil)
        #expect(halves.floats.elementsEqual(decodedHalves.floats) { $0 == $1 || ($0.isNaN && $1.isNaN) })
        // Float32 values 2 bytes off a 4-byte boundary cannot be read in place; too few bytes neither.
        #expect(MappedValues(file: file, bytes: shifted, count: count / 2, half: false) == nil)
        #expect(MappedValues(file: file, bytes: data, count: count + 1, half: false) == nil)
    }

    static func flatten(_ json: Any) -> [Double] {
        if let array = json as? [Any] { return array.flatMap(flatten) }
        return [(json as? NSNumber)?.doubleValue ?? .nan]
    }
}
