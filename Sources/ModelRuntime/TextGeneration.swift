import Foundation
import ModelFeatures
import ModelSpec
import TensorRuntime

/// How a decoder's next tokens are chosen.
public struct GenerationOptions: Sendable, Equatable {
    /// Tokens to generate after the prompt.
    public var maxNewTokens: Int
    /// 0 (the default) picks the likeliest token (greedy); above 0 samples
    /// from the logits divided by it.
    public var temperature: Double
    /// When sampling, only the `topK` likeliest tokens (0: all of them).
    public var topK: Int
    /// The seed of the sampler's generator: the same seed, prompt and model give the same tokens.
    public var seed: UInt64

    public init(maxNewTokens: Int, temperature: Double = 0, topK: Int = 0, seed: UInt64 = 0) {
        self.maxNewTokens = maxNewTokens
        self.temperature = temperature
        self.topK = topK
        self.seed = seed
    }
}

/// Why a model cannot generate tokens from a prompt.
public enum GenerationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The model is not a decoder modelc can drive: no integer token input, or no logits output.
    case notADecoder(reason: String)
    /// The prompt is empty, or no new token was asked for.
    case emptyPrompt
    /// A prompt token is not an id of the model's vocabulary.
    case tokenOutsideVocabulary(token: Int, vocabulary: Int)
    /// The prompt and the new tokens need more positions than the model takes.
    case contextExceeded(tokens: Int, context: Int)
    /// A prediction failed.
    case prediction(RuntimeError)

    public var description: String {
        switch self {
        case .notADecoder(let reason): "not a decoder: \(reason)"
        case .emptyPrompt: "the prompt has no tokens"
        case .tokenOutsideVocabulary(let token, let vocabulary): "token \(token) is outside the model's vocabulary of \(vocabulary) ids (0...\(vocabulary - 1))"
        case .contextExceeded(let tokens, let context): "\(tokens) tokens (prompt and new tokens) exceed the model's context of \(context) positions"
        case .prediction(let error): error.description
        }
    }
}

/// The time one step of a generation took.
public struct GenerationStep: Sendable, Equatable {
    /// The token chosen.
    public var token: Int
    /// Milliseconds the prediction and the choice took (the prefill's for the first token).
    public var milliseconds: Double
}

/// Runs a decoder token by token, as Core ML apps drive one.
///
/// Two forms are driven. A stateful ML program in Apple's documented form —
/// an int32 token input `[1, q]` (`inputIds`), a causal mask `[1, 1, q, end]`
/// (0 where a position may be attended, −∞ where not), the key/value caches
/// as states and a `logits` output `[1, q, vocabulary]` — gets the prompt
/// once (the prefill), then one token per prediction on one `ModelState`;
/// an int32 `position_ids` input, where the model has one, gets the
/// positions. A decoder without states gets the whole sequence at every
/// step, and its last position's logits choose the token.
///
/// Not thread-safe: one generation at a time per generator.
public final class TextGenerator {
    public let model: Model
    /// The token input's name.
    public let tokenInput: String
    /// The mask input's name, if the model has one.
    public let maskInput: String?
    /// The positions input's name, if the model has one.
    public let positionInput: String?
    /// The logits output's name.
    public let logitsOutput: String
    /// The most positions the model takes (prompt and new tokens), if it says.
    public let context: Int?
    /// The vocabulary's size, where the logits output declares it.
    public private(set) var vocabulary: Int?
    private let maskType: MultiArray.DataType

    /// Finds the decoder's inputs and output.
    ///
    /// - Throws: `.notADecoder` naming what is missing.
    public init(model: Model) throws(GenerationError) {
        self.model = model
        let inputs = model.summary.inputs
        func arrays(_ features: [FeatureDescription]) -> [(FeatureDescription, MultiArrayType)] {
            features.compactMap { feature in if case .multiArray(let array) = feature.type { (feature, array) } else { nil } }
        }
        let integers = arrays(inputs).filter { $0.1.dataType == "INT32" }
        let floats = arrays(inputs).filter { $0.1.dataType != "INT32" }
        func named(_ candidates: [(FeatureDescription, MultiArrayType)], _ words: [String]) -> (FeatureDescription, MultiArrayType)? {
            candidates.first { candidate in words.contains { candidate.0.name.lowercased().contains($0) } }
        }
        let positions = named(integers, ["position"])
        // The token input: named so (not the positions, whose name may end in "ids" too), else the other int32 input.
        let candidates = integers.filter { $0.0.name != positions?.0.name }
        guard let tokens = named(candidates, ["inputids", "input_ids", "token", "ids"]) ?? candidates.first else {
            throw .notADecoder(reason: "the model has no int32 multi-array input for token ids (inputs: \(inputs.map(\.name).joined(separator: ", ")))")
        }
        let mask = named(floats, ["mask"])
        let others = inputs.filter { ![tokens.0.name, mask?.0.name, positions?.0.name].contains($0.name) && !$0.isOptional }
        guard others.isEmpty else {
            throw .notADecoder(reason: "input \"\(others[0].name)\" is neither token ids, a causal mask nor positions")
        }
        let outputs = arrays(model.summary.outputs)
        guard let logits = outputs.first(where: { $0.0.name.lowercased().contains("logit") }) ?? (outputs.count == 1 ? outputs.first : nil) else {
            throw .notADecoder(reason: "the model has no logits output (outputs: \(model.summary.outputs.map(\.name).joined(separator: ", ")))")
        }
        tokenInput = tokens.0.name
        maskInput = mask?.0.name
        positionInput = positions?.0.name
        logitsOutput = logits.0.name
        maskType = mask.flatMap { MultiArray.DataType(schemaName: $0.1.dataType) } ?? .float32
        // The context: the largest sequence the token input or the mask's key axis takes.
        let bounds = [Self.upperBound(tokens.1, axis: 1), mask.flatMap { Self.upperBound($0.1, axis: 3) }].compactMap { $0 }
        context = bounds.max()
        vocabulary = logits.1.shape.last.flatMap { $0 > 0 && logits.1.shape.count == 3 ? Int($0) : nil }
    }

    /// The largest size `axis` of an input may take; `nil` when unbounded or unknown.
    private static func upperBound(_ array: MultiArrayType, axis: Int) -> Int? {
        switch array.shapeFlexibility {
        case .ranges(let ranges)?:
            guard axis < ranges.count, ranges[axis].upperBound > 0 else { return nil }
            return Int(ranges[axis].upperBound)
        case .enumerated(let shapes)?:
            return shapes.compactMap { axis < $0.count ? Int($0[axis]) : nil }.max()
        case nil:
            return axis < array.shape.count && array.shape[axis] > 0 ? Int(array.shape[axis]) : nil
        }
    }

    /// Starts a generation of up to `options.maxNewTokens` tokens after
    /// `prompt`: checks the prompt and makes the generation's state; nothing
    /// runs until `Generation.next()`.
    ///
    /// - Throws: `GenerationError`: an empty prompt, a token outside the
    ///   vocabulary, more tokens than the context holds.
    public func start(prompt: [Int], options: GenerationOptions) throws(GenerationError) -> Generation {
        guard !prompt.isEmpty, options.maxNewTokens > 0 else { throw .emptyPrompt }
        // Checked before anything runs: a program may narrow ids (to uint16) before its embedding, and read another row.
        let vocabulary: Int
        if let known = self.vocabulary { vocabulary = known } else { vocabulary = try probedVocabulary() }
        if let bad = prompt.first(where: { $0 < 0 || $0 >= vocabulary }) { throw .tokenOutsideVocabulary(token: bad, vocabulary: vocabulary) }
        // The last new token is never fed back: the sequence reaches prompt + new − 1 positions.
        if let context, prompt.count + options.maxNewTokens - 1 > context {
            throw .contextExceeded(tokens: prompt.count + options.maxNewTokens, context: context)
        }
        return Generation(generator: self, prompt: prompt, options: options)
    }

    /// Generates up to `options.maxNewTokens` tokens after `prompt`, calling
    /// `onToken` with each as soon as it is chosen; `onToken` returns `false`
    /// to stop early. Returns the milliseconds of the prefill's prediction.
    ///
    /// - Throws: `GenerationError` as `start`, and a failed prediction.
    @discardableResult
    public func generate(prompt: [Int], options: GenerationOptions, onToken: (GenerationStep) -> Bool) throws(GenerationError) -> Double {
        let generation = try start(prompt: prompt, options: options)
        var prefill: Double?
        while let step = try generation.next() {
            prefill = prefill ?? step.milliseconds
            guard onToken(step) else { break }
        }
        return prefill ?? 0
    }

    /// The vocabulary's size where the logits output does not declare it:
    /// the width of the logits of token 0 alone, on a state of its own (once).
    private func probedVocabulary() throws(GenerationError) -> Int {
        let size = try predict(tokens: [0], begin: 0, state: model.makeState()).count
        vocabulary = size
        return size
    }

    /// Whether a step plans the next one on another core while it runs: the
    /// mask grows by a position each step, so every step has shapes of its own
    /// and a plan to make (a fifth of a 200M decoder's step on one thread).
    /// On a machine of more than one core, even where the prediction's threads
    /// take them all: measured on 2 cores with 2 threads, the 200M int4
    /// decoder went from 98–111 to 122–126 tokens/s, the 7B-shaped one was
    /// unchanged (7.6–8.5 against 7.8–8.3). While the plan is made, the
    /// step's operations leave its core to it (`ThreadTeam.reserving`, in
    /// `TensorEngine.prepare`): on 2 cores with 2 threads the 200M int4
    /// decoder went from 178–182 to 227–247 tokens/s.
    var plansAhead: Bool { ProcessInfo.processInfo.activeProcessorCount > 1 }

    /// The inputs' shapes of a step feeding `length` tokens at positions `begin ..< begin + length`.
    private func shapes(begin: Int, length: Int) -> [String: [Int]] {
        var shapes = [tokenInput: [1, length]]
        if let maskInput { shapes[maskInput] = [1, 1, length, begin + length] }
        if let positionInput { shapes[positionInput] = [1, length] }
        return shapes
    }

    /// Lets the next steps work in the memory of the step that fed `length`
    /// tokens at positions `begin ..< begin + length` when the next step's
    /// shapes differ (a mask grows by a position each step; the prompt's
    /// memory, the largest, is needed by no step after it).
    private func releaseStep(begin: Int, length: Int, stateful: Bool) {
        let current = shapes(begin: begin, length: length)
        let next = stateful ? shapes(begin: begin + length, length: 1) : shapes(begin: 0, length: begin + length + 1)
        if next != current { model.releasePredictionMemory(shapes: current, lastRowOf: logitsOutput) }
    }

    /// Plans, in the background, the step that feeds `length` tokens at positions `begin ..< begin + length`.
    fileprivate func prepareStep(begin: Int, length: Int) {
        let model = self.model, shapes = shapes(begin: begin, length: length), logits = logitsOutput
        DispatchQueue.global(qos: .userInitiated).async { model.preparePrediction(shapes: shapes, lastRowOf: logits) }
    }

    /// The logits of the last of `tokens`, which stand at positions `begin ..< begin + tokens.count`.
    fileprivate func predict(tokens: [Int], begin: Int, state: ModelState?) throws(GenerationError) -> [Float] {
        let length = tokens.count, end = begin + length
        var inputs: [String: FeatureValue] = [tokenInput: .multiArray(MultiArray(tokens.map(Double.init), shape: [1, length], dataType: .int32))]
        if let maskInput {
            var mask = [Double](repeating: 0, count: length * end)
            for row in 0..<length {
                for column in (begin + row + 1)..<end { mask[row * end + column] = -.infinity }
            }
            inputs[maskInput] = .multiArray(MultiArray(mask, shape: [1, 1, length, end], dataType: maskType))
        }
        if let positionInput {
            inputs[positionInput] = .multiArray(MultiArray((begin..<end).map(Double.init), shape: [1, length], dataType: .int32))
        }
        let outputs: [String: FeatureValue]
        do throws(RuntimeError) {
            outputs = try model.prediction(from: inputs, using: state, lastRowOf: logitsOutput)
        } catch {
            throw .prediction(error)
        }
        releaseStep(begin: begin, length: length, stateful: state != nil)
        guard case .multiArray(let array)? = outputs[logitsOutput], let vocabulary = array.shape.last, vocabulary > 0,
              array.count % vocabulary == 0 else {
            throw .notADecoder(reason: "output \"\(logitsOutput)\" is not logits of shape [1, q, vocabulary]")
        }
        return array.widenedFloats((array.count - vocabulary)..<array.count)
    }
}

/// One generation in progress: each `next()` runs one prediction (the
/// prefill first) and chooses one token. Not thread-safe.
public final class Generation {
    private let generator: TextGenerator
    private let options: GenerationOptions
    private let state: ModelState?
    private var sampler: TokenSampler
    private var sequence: [Int]
    /// Tokens the state has seen.
    private var fed = 0
    /// The new tokens chosen so far.
    public private(set) var tokens: [Int] = []

    fileprivate init(generator: TextGenerator, prompt: [Int], options: GenerationOptions) {
        self.generator = generator
        self.options = options
        state = generator.model.makeState()
        sampler = TokenSampler(options: options)
        sequence = prompt
    }

    /// The next token, or `nil` once `maxNewTokens` were generated.
    ///
    /// - Throws: `GenerationError.prediction` when a prediction fails (the generation cannot go on).
    public func next() throws(GenerationError) -> GenerationStep? {
        guard tokens.count < options.maxNewTokens else { return nil }
        let start = DispatchTime.now().uptimeNanoseconds
        // Stateful: only the tokens the state has not seen; otherwise the whole sequence.
        let begin = state == nil ? 0 : fed
        // The next step's shapes are known already: its plan is made on another core while this step runs.
        if tokens.count + 1 < options.maxNewTokens, generator.plansAhead {
            // Stateful: one token after this step's; otherwise the whole sequence, a token longer.
            generator.prepareStep(begin: state == nil ? 0 : sequence.count, length: state == nil ? sequence.count + 1 : 1)
        }
        let logits = try generator.predict(tokens: Array(sequence[begin...]), begin: begin, state: state)
        fed = sequence.count
        let token = sampler.next(logits)
        sequence.append(token)
        tokens.append(token)
        return GenerationStep(token: token, milliseconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
}

/// Picks tokens from logits: the likeliest one, or a draw from the softmax
/// of the `topK` likeliest at a temperature, from a seeded SplitMix64 stream.
struct TokenSampler {
    let options: GenerationOptions
    private var state: UInt64

    init(options: GenerationOptions) {
        self.options = options
        state = options.seed
    }

    /// The next 64 random bits (SplitMix64).
    private mutating func bits() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next(_ logits: [Float]) -> Int {
        // Greedy: the first of the largest (NaN never wins).
        var best = 0
        for index in logits.indices where logits[index] > logits[best] || logits[best].isNaN { best = index }
        guard options.temperature > 0 else { return best }
        var ranked = logits.indices.filter { !logits[$0].isNaN }.sorted { logits[$0] > logits[$1] || (logits[$0] == logits[$1] && $0 < $1) }
        if options.topK > 0 { ranked = Array(ranked.prefix(options.topK)) }
        let top = Double(logits[ranked[0]])
        let weights = ranked.map { exp((Double(logits[$0]) - top) / options.temperature) }
        let total = weights.reduce(0, +)
        var draw = Double(bits() >> 11) / Double(1 << 53) * total
        for (index, weight) in zip(ranked, weights) {
            draw -= weight
            if draw < 0 { return index }
        }
        return ranked[ranked.count - 1]
    }
}
