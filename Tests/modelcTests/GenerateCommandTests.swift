import FixtureSupport
import Foundation
import Testing

/// `modelc generate` run as a user runs it on the Llama-shaped int4 decoder
/// (Fixtures/Models/LlamaDecoderInt4): PyTorch's greedy tokens one per
/// line, JSON lines, timings on standard error, and each bad input's one
/// line and exit code.
@Suite struct GenerateCommandTests {
    static let decoder = "Fixtures/Models/LlamaDecoderInt4.mlpackage"

    func generate(_ arguments: [String]) throws -> ModelcProcess.Result {
        let cache = try Fixtures.temporaryDirectory("generate-cache")
        return try ModelcProcess.run(["generate"] + arguments, environment: ["MODELC_CACHE": cache.path])
    }

    /// The prompt and greedy tokens PyTorch float64 computed (Fixtures/llama_decoder.py).
    func reference() throws -> (prompt: [Int], greedy: [Int]) {
        let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/LlamaDecoderInt4.json")))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (try #require(document["prompt"] as? [Int]), try #require(document["greedy"] as? [Int]))
    }

    @Test func greedyTokensOnePerLineWithTimingsOnStandardError() throws {
        let (prompt, greedy) = try reference()
        let result = try generate([Self.decoder, "--input-ids", prompt.map(String.init).joined(separator: ","), "--max-new-tokens", "\(greedy.count)"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == greedy.map { "\($0)\n" }.joined())
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.first?.hasPrefix("prompt: \(prompt.count) tokens in ") == true)
        #expect(lines.filter { $0.hasPrefix("token ") }.count == greedy.count - 1)
        #expect(lines.last?.hasPrefix("generated \(greedy.count) tokens; decode ") == true)
    }

    @Test func jsonLinesPerTokenThenASummary() throws {
        let (prompt, greedy) = try reference()
        let result = try generate([Self.decoder, "--input-ids", prompt.map(String.init).joined(separator: ", "), "--max-new-tokens", "3", "--json",
                                   "--threads", "2"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map { Fixtures.parseJSON(String($0)) as? [String: Any] }
        #expect(lines.count == 4)
        for (index, line) in lines.prefix(3).enumerated() {
            #expect(line?["index"] as? Int == index)
            #expect(line?["token"] as? Int == greedy[index])
            #expect((line?["ms"] as? Double).map { $0 > 0 } == true)
        }
        let summary = try #require(lines.last ?? nil)
        #expect(summary["tokens"] as? [Int] == Array(greedy.prefix(3)))
        #expect(summary["prompt_tokens"] as? Int == prompt.count)
        for key in ["load_ms", "prefill_ms", "decode_ms", "decode_tokens_per_second"] { #expect(summary[key] is Double, "\(key)") }
    }

    @Test func seededSamplingRepeats() throws {
        let arguments = [Self.decoder, "--input-ids", "5,6", "--max-new-tokens", "8", "--temperature", "0.9", "--top-k", "20", "--seed", "11"]
        let first = try generate(arguments), second = try generate(arguments)
        #expect(first.status == 0 && second.status == 0)
        #expect(first.standardOutput == second.standardOutput)
        #expect(first.standardOutput.split(separator: "\n").count == 8)
    }

    @Test("each bad input: one line naming it, a distinct exit code, nothing on standard output",
          arguments: [
              (["--input-ids", "1,96", "--max-new-tokens", "2"], Int32(108), "token 96 is outside the model's vocabulary of 96 ids"),
              (["--input-ids", "1,2", "--max-new-tokens", "40"], 109, "42 tokens (prompt and new tokens) exceed the model's context of 32 positions"),
              (["--input-ids", "1,x", "--max-new-tokens", "2"], 64, "invalid value '1,x' for '--input-ids'"),
              (["--input-ids", "1", "--max-new-tokens", "0"], 64, "invalid value '0' for '--max-new-tokens'"),
              (["--max-new-tokens", "2"], 64, "--input-ids"),
              (["--input-ids", "1", "--max-new-tokens", "2", "--temperature", "-1"], 64, "invalid value '-1' for '--temperature'"),
          ])
    func refusals(arguments: [String], status: Int32, message: String) throws {
        let result = try generate([Self.decoder] + arguments)
        #expect(result.status == status, "\(result.standardError)")
        #expect(result.standardError.contains(message), "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
    }

    @Test func aModelThatIsNotADecoderExits107() throws {
        let result = try generate(["Fixtures/Models/ImageClassifier.mlmodel", "--input-ids", "1", "--max-new-tokens", "2"])
        #expect(result.status == 107)
        #expect(result.standardError.contains("not a decoder: the model has no int32 multi-array input for token ids (inputs: image)"))
        #expect(result.standardError.split(separator: "\n").count == 1)
    }
}
