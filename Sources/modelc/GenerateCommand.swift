import ArgumentParsing
import ExitCodes
import Foundation
import ModelRuntime

/// `modelc generate MODEL --input-ids 1,2,3 --max-new-tokens N [--temperature T] [--top-k K]
/// [--seed S] [--json] [--threads N]`.
enum GenerateCommand {
    static let spec = CommandSpec(
        name: "generate",
        abstract: "Generate tokens with a decoder model: the prompt's ids in, new token ids out, one per line.",
        discussion: """
            MODEL is a decoder: an ML program with an int32 token input (inputIds [1, q]) and a logits
            output ([1, q, vocabulary]). In Apple's stateful form — a causal mask input [1, 1, q, end]
            and the key/value caches as states — the prompt runs once (the prefill), then one token per
            prediction on one state; a decoder without states gets the whole sequence at every step.
            A position_ids input, where there is one, gets the positions.
            Tokens are printed as they are chosen, one id per line (with --json one object per token,
            {"index": I, "token": ID, "ms": T}, then a summary). The prompt's and each token's time go to
            standard error. Greedy by default; --temperature T > 0 samples, from the --top-k K likeliest
            tokens if given, with the generator seeded by --seed S (default 0): the same seed gives the
            same tokens.
            """,
        arguments: [PositionalSpec(name: "MODEL", help: "A compiled bundle, .mlmodel or .mlpackage.")],
        options: [
            OptionSpec(name: "input-ids", valueName: "IDS", help: "The prompt's token ids, comma-separated (1,2,3)."),
            OptionSpec(name: "max-new-tokens", valueName: "N", help: "Tokens to generate after the prompt."),
            OptionSpec(name: "temperature", valueName: "T", help: "0 (default): the likeliest token; above 0: sample."),
            OptionSpec(name: "top-k", valueName: "K", help: "When sampling, only the K likeliest tokens."),
            OptionSpec(name: "seed", valueName: "S", help: "The sampler's seed (default 0)."),
            OptionSpec(name: "json", help: "One JSON object per token, then a summary object."),
            OptionSpec(name: "threads", valueName: "N", help: "Threads one prediction may use (default: every core)."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "MODEL"] else { return .usage }
        let usage = Modelc.usageLine(for: spec)
        var configuration = ModelConfiguration()
        let prompt: [Int], options: GenerationOptions
        do throws(UsageError) {
            configuration.threads = try arguments.positiveInteger("threads") ?? configuration.threads
            guard let ids = arguments.value("input-ids") else { throw .missingArgument(name: "--input-ids IDS", command: "generate") }
            prompt = try ids.split(separator: ",", omittingEmptySubsequences: false).map { text throws(UsageError) in
                guard let id = Int(text.trimmingCharacters(in: .whitespaces)) else {
                    throw .invalidValue(option: "input-ids", value: ids, reason: "expected token ids separated by commas")
                }
                return id
            }
            guard let count = try arguments.positiveInteger("max-new-tokens") else {
                throw .missingArgument(name: "--max-new-tokens N", command: "generate")
            }
            var chosen = GenerationOptions(maxNewTokens: count)
            if let text = arguments.value("temperature") {
                guard let value = Double(text), value >= 0, value.isFinite else {
                    throw .invalidValue(option: "temperature", value: text, reason: "expected a number of 0 or more")
                }
                chosen.temperature = value
            }
            chosen.topK = try arguments.positiveInteger("top-k") ?? 0
            if let text = arguments.value("seed") {
                guard let value = UInt64(text) else { throw .invalidValue(option: "seed", value: text, reason: "expected a non-negative integer") }
                chosen.seed = value
            }
            options = chosen
        } catch {
            return Modelc.usageFailure(error, usage: usage)
        }

        let loadStart = DispatchTime.now().uptimeNanoseconds
        let model: Model
        switch PredictCommand.open(path, configuration: configuration) {
        case .opened(let opened): model = opened
        case .failed(let code): return code
        }
        let loadMilliseconds = Double(DispatchTime.now().uptimeNanoseconds - loadStart) / 1e6
        let json = arguments.has("json")
        var tokens: [Int] = [], decodeMilliseconds = 0.0
        do throws(GenerationError) {
            let generator = try TextGenerator(model: model)
            let prefill = try generator.generate(prompt: prompt, options: options) { step in
                if tokens.isEmpty {
                    Output.error(String(format: "prompt: %d tokens in %.1f ms (%.1f tokens/s)\n", prompt.count, step.milliseconds,
                                        Double(prompt.count) / max(step.milliseconds, 1e-9) * 1000))
                } else {
                    decodeMilliseconds += step.milliseconds
                    Output.error(String(format: "token %d: %.2f ms\n", tokens.count + 1, step.milliseconds))
                }
                Output.print(json ? String(format: "{\"index\": %d, \"token\": %d, \"ms\": %.3f}\n", tokens.count, step.token, step.milliseconds)
                                  : "\(step.token)\n")
                tokens.append(step.token)
                return true
            }
            let rate = tokens.count > 1 ? Double(tokens.count - 1) / decodeMilliseconds * 1000 : 0
            Output.error(String(format: "generated %d tokens; decode %.1f tokens/s; load %.0f ms\n", tokens.count, rate, loadMilliseconds))
            if json {
                let list = tokens.map(String.init).joined(separator: ", ")
                Output.print("{\"tokens\": [\(list)], " + String(format: "\"prompt_tokens\": %d, \"load_ms\": %.1f, \"prefill_ms\": %.3f, "
                                    + "\"decode_ms\": %.3f, \"decode_tokens_per_second\": %.2f}\n",
                                    prompt.count, loadMilliseconds, prefill, decodeMilliseconds, rate))
            }
            return .success
        } catch {
            Output.error("\(Modelc.toolName): error: \(path): \(error)\n")
            return ExitCode(error)
        }
    }
}
