import FixtureSupport
import Foundation
import ModelFeatures
@testable import ModelRuntime
import Testing
@testable import TensorRuntime

/// Llama-shaped decoders in Apple's documented stateful form (inputIds,
/// causalMask, keyCache / valueCache states, logits; Fixtures/llama_decoder.py)
/// stored as fp16, int4 per block of 32 and int8 per channel: a prefill and
/// one-token steps on one state give PyTorch float64's logits of the full
/// forward on the weights as stored, greedy generation gives its tokens, and
/// every way a caller can get generation wrong is refused naming the fault.
@Suite("Generating tokens with a decoder")
struct TextGenerationTests {
    struct Reference {
        var tolerance: Double
        var context: Int
        var vocabulary: Int
        var prompt: [Int]
        var greedy: [Int]
        /// Each prediction's first position, its tokens and the logits of its positions.
        var predictions: [(begin: Int, tokens: [Int], logits: [Double])]
    }

    static let variants = ["FP16", "Int4", "Int8"]

    static func reference(_ variant: String) throws -> Reference {
        let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/LlamaDecoder\(variant).json")))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var predictions: [(Int, [Int], [Double])] = []
        for entry in try #require(document["predictions"] as? [[String: Any]]) {
            let inputs = try #require(entry["inputs"] as? [String: Any])
            let ids = try #require((inputs["inputIds"] as? [[Int]])?.first)
            let logits = Self.numbers(entry["logits"] as Any)
            predictions.append((try #require(entry["begin"] as? Int), ids, logits))
        }
        return Reference(tolerance: try #require(document["tolerance"] as? Double), context: try #require(document["context"] as? Int),
                         vocabulary: try #require(document["vocab"] as? Int), prompt: try #require(document["prompt"] as? [Int]),
                         greedy: try #require(document["greedy"] as? [Int]), predictions: predictions)
    }

    /// A nested JSON array's numbers in order.
    static func numbers(_ value: Any) -> [Double] {
        guard let array = value as? [Any] else { return [(value as? NSNumber)?.doubleValue ?? .nan] }
        return array.flatMap(numbers)
    }

    /// The tokens `generator` generates greedily from the reference's prompt, as many as the reference has.
    static func greedyTokens(_ generator: TextGenerator, _ reference: Reference) throws -> [Int] {
        var tokens: [Int] = []
        try generator.generate(prompt: reference.prompt, options: GenerationOptions(maxNewTokens: reference.greedy.count)) { step in
            tokens.append(step.token)
            return true
        }
        return tokens
    }

    static func model(_ variant: String, threads: Int = 1) throws -> Model {
        try Model(contentsOf: Fixtures.path("Models/LlamaDecoder\(variant).mlpackage"), configuration: ModelConfiguration(threads: threads))
    }

    @Test("a prefill and one-token steps on one state equal PyTorch's full forward in float64", arguments: variants, [1, 2])
    func stepsOnOneState(variant: String, threads: Int) throws {
        let reference = try Self.reference(variant)
        let model = try Self.model(variant, threads: threads)
        let state = try #require(model.makeState())
        for prediction in reference.predictions {
            let length = prediction.tokens.count, end = prediction.begin + length
            var mask = [Double](repeating: 0, count: length * end)
            for row in 0..<length { for column in (prediction.begin + row + 1)..<end { mask[row * end + column] = -.infinity } }
            let outputs = try model.prediction(from: [
                "inputIds": .multiArray(MultiArray(prediction.tokens.map(Double.init), shape: [1, length], dataType: .int32)),
                "causalMask": .multiArray(MultiArray(mask, shape: [1, 1, length, end], dataType: .float16)),
            ], using: state)
            guard case .multiArray(let logits)? = outputs["logits"] else { Issue.record("no logits"); return }
            #expect(logits.shape == [1, length, reference.vocabulary])
            let worst = zip(logits.doubles, prediction.logits).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? .infinity
            #expect(worst <= reference.tolerance, "\(variant), positions \(prediction.begin)..<\(end): worst \(worst)")
        }
    }

    @Test("greedy generation gives PyTorch's tokens", arguments: variants)
    func greedy(variant: String) throws {
        let reference = try Self.reference(variant)
        let generator = try TextGenerator(model: try Self.model(variant, threads: 2))
        #expect(generator.tokenInput == "inputIds" && generator.maskInput == "causalMask" && generator.logitsOutput == "logits")
        #expect(generator.context == reference.context)
        #expect(try Self.greedyTokens(generator, reference) == reference.greedy)
        // Stopping early: the callback's false ends the loop.
        var first: [Int] = []
        try generator.generate(prompt: reference.prompt, options: GenerationOptions(maxNewTokens: 5)) { step in
            first.append(step.token)
            return first.count < 2
        }
        #expect(first == Array(reference.greedy.prefix(2)))
    }

    @Test("a step's plan made ahead on another core is made once however many ask, and the steps use it", arguments: variants)
    func plansAhead(variant: String) throws {
        let reference = try Self.reference(variant)
        let model = try Self.model(variant, threads: 1)
        let generator = try TextGenerator(model: model)
        #expect(generator.plansAhead == (ProcessInfo.processInfo.activeProcessorCount > 1))
        // Greedy tokens with every next step planned in the background (on a machine of more than one core).
        #expect(try Self.greedyTokens(generator, reference) == reference.greedy)
        // Eight threads preparing one new shape at once make one plan; a prediction with it makes none.
        let engine = try #require(model.engine as? TensorEngine)
        let end = reference.prompt.count + 1
        DispatchQueue.concurrentPerform(iterations: 8) { _ in model.preparePrediction(shapes: ["inputIds": [1, end], "causalMask": [1, 1, end, end]]) }
        let planned = engine.keptPlanCount
        let state = try #require(model.makeState())
        let mask = (0..<(end * end)).map { $0 % end > $0 / end ? -Double.infinity : 0 }
        _ = try model.prediction(from: [
            "inputIds": .multiArray(MultiArray((0..<end).map { Double($0 % 50) }, shape: [1, end], dataType: .int32)),
            "causalMask": .multiArray(MultiArray(mask, shape: [1, 1, end, end], dataType: .float16)),
        ], using: state)
        #expect(engine.keptPlanCount == planned)
    }

    @Test("each step's state goes back to the pool once the step is done: no plan of the prompt or a step keeps one", arguments: variants)
    func stepsLeaveNoState(variant: String) throws {
        let reference = try Self.reference(variant)
        let model = try Self.model(variant, threads: 1)
        let generator = try TextGenerator(model: model)
        #expect(try Self.greedyTokens(generator, reference) == reference.greedy)
        let engine = try #require(model.engine as? TensorEngine)
        // The prompt's shapes, then each step's: one token, the mask a position longer each time.
        let prompt = reference.prompt.count
        var steps = [["inputIds": [1, prompt], "causalMask": [1, 1, prompt, prompt]]]
        for end in (prompt + 1)..<(prompt + reference.greedy.count) { steps.append(["inputIds": [1, 1], "causalMask": [1, 1, 1, end]]) }
        for shapes in steps {
            let idle = try #require(engine.idleStateCount(shapes: shapes, lastRowOf: "logits"), "no plan kept for \(shapes)")
            #expect(idle == 0, "\(shapes)")
        }
    }

    @Test("a prediction giving the logits' last row only computes that row alone, and gives the whole prediction's last row", arguments: variants)
    func lastRowOnly(variant: String) throws {
        let reference = try Self.reference(variant)
        let model = try Self.model(variant)
        let length = reference.prompt.count
        let mask = (0..<(length * length)).map { $0 % length > $0 / length ? -Double.infinity : 0 }
        let inputs: [String: FeatureValue] = [
            "inputIds": .multiArray(MultiArray(reference.prompt.map(Double.init), shape: [1, length], dataType: .int32)),
            "causalMask": .multiArray(MultiArray(mask, shape: [1, 1, length, length], dataType: .float16)),
        ]
        let state = try #require(model.makeState())
        let whole = try #require(try model.prediction(from: inputs, using: state)["logits"]?.multiArrayValue)
        let last = try #require(try model.prediction(from: inputs, using: model.makeState(), lastRowOf: "logits")["logits"]?.multiArrayValue)
        #expect(whole.shape == [1, length, reference.vocabulary])
        #expect(last.shape == [1, 1, reference.vocabulary])
        #expect(last.dataType == whole.dataType)
        // The LM head runs on one row (a vector product, not a tiled one): equal within the references' tolerance.
        let worst = zip(last.floats(0..<last.count), whole.floats((whole.count - last.count)..<whole.count))
            .map { abs(Double($0) - Double($1)) / max(1, abs(Double($1))) }.max() ?? .infinity
        #expect(worst <= reference.tolerance, "worst relative difference \(worst)")
        // Its plan computes the logits of one row (the whole plan's: every row).
        let engine = try #require(model.engine as? TensorEngine)
        let shapes = ["inputIds": [1, length], "causalMask": [1, 1, length, length]]
        let rowPlan = try engine.plan(for: shapes, lastRowOf: "logits"), wholePlan = try engine.plan(for: shapes)
        #expect(rowPlan.outputs["logits"].map { rowPlan.values[$0].shape } == [1, 1, reference.vocabulary])
        #expect(wholePlan.outputs["logits"].map { wholePlan.values[$0].shape } == [1, length, reference.vocabulary])
        // Without a state the engine makes one of the prediction's own: the same row.
        let stateless = try #require(try model.prediction(from: inputs, using: nil, lastRowOf: "logits")["logits"]?.multiArrayValue)
        #expect(stateless.floats(0..<stateless.count) == last.floats(0..<last.count))
        // A value with an axis above 1 before its last two is given whole.
        var elements = (0..<24).map(Float.init)
        try elements.withUnsafeMutableBytes { raw in
            let base = try #require(raw.baseAddress)
            let batched = TensorEngine.lastRow(PlanValue(id: 0, type: .float32, shape: [2, 3, 4], constant: nil), at: base)
            #expect(batched.shape == [2, 3, 4] && batched.floats(0..<24) == (0..<24).map(Float.init))
            let row = TensorEngine.lastRow(PlanValue(id: 0, type: .float32, shape: [1, 6, 4], constant: nil), at: base)
            #expect(row.shape == [1, 1, 4] && row.floats(0..<4) == [20, 21, 22, 23])
        }
    }

    @Test("sampling is reproducible from its seed, stays within the top k, and differs between seeds")
    func sampling() throws {
        let generator = try TextGenerator(model: try Self.model("Int4"))
        func run(_ seed: UInt64, topK: Int = 0) throws -> [Int] {
            var tokens: [Int] = []
            try generator.generate(prompt: [5, 6, 7], options: GenerationOptions(maxNewTokens: 12, temperature: 1.5, topK: topK, seed: seed)) { step in
                tokens.append(step.token)
                return true
            }
            return tokens
        }
        #expect(try run(3) == run(3))
        #expect(try run(3) != run(4))
        // A top-1 draw is the greedy choice.
        var greedy: [Int] = []
        try generator.generate(prompt: [5, 6, 7], options: GenerationOptions(maxNewTokens: 12)) { step in
            greedy.append(step.token)
            return true
        }
        #expect(try run(9, topK: 1) == greedy)
    }

    @Test("bad prompts and models are refused naming the fault, before anything is generated")
    func refusals() throws {
        let generator = try TextGenerator(model: try Self.model("Int4"))
        func expectError(_ expected: GenerationError, prompt: [Int], newTokens: Int) {
            var called = false
            #expect(throws: expected) {
                try generator.generate(prompt: prompt, options: GenerationOptions(maxNewTokens: newTokens)) { _ in
                    called = true
                    return true
                }
            }
            #expect(!called)
        }
        // 96 ids; a program that narrows ids to uint16 before its embedding must not read another row.
        expectError(.tokenOutsideVocabulary(token: 96, vocabulary: 96), prompt: [1, 96], newTokens: 2)
        expectError(.tokenOutsideVocabulary(token: 65_536 + 5, vocabulary: 96), prompt: [65_536 + 5], newTokens: 2)
        expectError(.tokenOutsideVocabulary(token: -1, vocabulary: 96), prompt: [-1], newTokens: 2)
        expectError(.contextExceeded(tokens: 34, context: 32), prompt: [1, 2], newTokens: 32)
        expectError(.emptyPrompt, prompt: [], newTokens: 2)
        // 31 + 2 tokens fill the 32 positions exactly (the last one is never fed back).
        var count = 0
        try generator.generate(prompt: Array(repeating: 3, count: 31), options: GenerationOptions(maxNewTokens: 2)) { _ in
            count += 1
            return true
        }
        #expect(count == 2)
        let classifier = try Model(contentsOf: Fixtures.path("Models/ImageClassifier.mlmodel"))
        #expect(throws: GenerationError.notADecoder(reason: "the model has no int32 multi-array input for token ids (inputs: image)")) {
            try TextGenerator(model: classifier)
        }
    }

    @Test("a GPT-2-shaped decoder with position ids and a float32 mask generates what its stateless run of the whole sequence does")
    func positionsAndStatelessAgree() throws {
        let stateful = try TextGenerator(model: try Model(contentsOf: Fixtures.path("Models/StatefulDecoder.mlpackage")))
        #expect(stateful.positionInput == "position_ids")
        var steps: [Int] = []
        try stateful.generate(prompt: [4, 9, 1], options: GenerationOptions(maxNewTokens: 6)) { step in
            steps.append(step.token)
            return true
        }
        #expect(steps.count == 6)
        // The same decoder run on the whole sequence at every step, one prediction each, through the model's
        // plain prediction (no state): what TextGenerator does for decoders without states.
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulDecoder.mlpackage"))
        var sequence = [4, 9, 1]
        for _ in 0..<6 {
            let state = try #require(model.makeState())
            let length = sequence.count
            var mask = [Double](repeating: 0, count: length * length)
            for row in 0..<length { for column in (row + 1)..<length { mask[row * length + column] = -.infinity } }
            let outputs = try model.prediction(from: [
                "input_ids": .multiArray(MultiArray(sequence.map(Double.init), shape: [1, length], dataType: .int32)),
                "position_ids": .multiArray(MultiArray((0..<length).map(Double.init), shape: [1, length], dataType: .int32)),
                "causal_mask": .multiArray(MultiArray(mask, shape: [1, 1, length, length], dataType: .float32)),
            ], using: state)
            guard case .multiArray(let logits)? = outputs["logits"], let vocabulary = logits.shape.last else { Issue.record("no logits"); return }
            let last = Array(logits.floats.suffix(vocabulary))
            sequence.append(last.indices.max { last[$0] < last[$1] } ?? -1)
        }
        #expect(Array(sequence.dropFirst(3)) == steps)
    }
}
