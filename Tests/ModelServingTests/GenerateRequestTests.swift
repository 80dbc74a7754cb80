import Testing
@testable import ModelServing

/// The generate extension's request body: what is read, and every fault refused naming it.
@Suite struct GenerateRequestTests {
    static func decode(_ json: String) throws(RequestError) -> GenerateRequest {
        try GenerateRequest.decode(body: Array(json.utf8))
    }

    static func fault(_ json: String) -> String? {
        do {
            _ = try decode(json)
            return nil
        } catch {
            guard case .badRequest(let message) = error else { return "not a bad request: \(error)" }
            #expect(error.status == 400)
            return message
        }
    }

    @Test func readsTheInputsAndTheParametersAtTheTopOrNested() throws {
        let top = try Self.decode(#"{"input_ids":[50,87,60],"max_tokens":6,"temperature":0.7,"top_k":5,"seed":42,"id":"r1"}"#)
        #expect(top.inputIDs == [50, 87, 60] && top.id == "r1")
        #expect(top.options == .init(maxNewTokens: 6, temperature: 0.7, topK: 5, seed: 42))
        let nested = try Self.decode(#"{"input_ids":[50,87,60],"parameters":{"max_tokens":6,"temperature":0.7,"top_k":5,"seed":42}}"#)
        #expect(nested.options == top.options && nested.id == nil)
        let greedy = try Self.decode(#"{"input_ids":[1],"max_tokens":1}"#)
        #expect(greedy.options == .init(maxNewTokens: 1))
        let mixed = try Self.decode(#"{"input_ids":[1.0],"max_tokens":2,"parameters":{"seed":7}}"#)
        #expect(mixed.inputIDs == [1] && mixed.options.seed == 7)
        #expect(try Self.decode(#"{"input_ids":[1],"max_tokens":\#(GenerateRequest.maxTokensLimit)}"#).options.maxNewTokens == 4096)
    }

    @Test(arguments: [
        ("not json", "not valid JSON"),
        ("[1,2]", "must be a JSON object"),
        (#"{"max_tokens":3}"#, "no 'input_ids'"),
        (#"{"input_ids":"50 87","max_tokens":3}"#, "'input_ids' must be a list"),
        (#"{"input_ids":[],"max_tokens":3}"#, "'input_ids' is empty"),
        (#"{"input_ids":[50,1.5],"max_tokens":3}"#, "'input_ids'[1] is 1.5"),
        (#"{"input_ids":[50,-1],"max_tokens":3}"#, "'input_ids'[1] is -1"),
        (#"{"input_ids":[50,"a"],"max_tokens":3}"#, "'input_ids'[1] is \"a\""),
        (#"{"input_ids":[[50,87]],"max_tokens":3}"#, "'input_ids'[0] is an array"),
        (#"{"input_ids":[50]}"#, "no 'max_tokens'"),
        (#"{"input_ids":[50],"max_tokens":0}"#, "'max_tokens' is 0"),
        (#"{"input_ids":[50],"max_tokens":4097}"#, "'max_tokens' is 4097; it must be a whole number from 1 to 4096"),
        (#"{"input_ids":[50],"max_tokens":2.5}"#, "'max_tokens' is 2.5"),
        (#"{"input_ids":[50],"max_tokens":"3"}"#, "'max_tokens' is \"3\""),
        (#"{"input_ids":[50],"max_tokens":3,"temperature":-1}"#, "'temperature' is -1"),
        (#"{"input_ids":[50],"max_tokens":3,"temperature":"hot"}"#, "'temperature' is \"hot\""),
        (#"{"input_ids":[50],"max_tokens":3,"top_k":-2}"#, "'top_k' is -2"),
        (#"{"input_ids":[50],"max_tokens":3,"seed":-1}"#, "'seed' is -1"),
        (#"{"input_ids":[50],"max_tokens":3,"seed":1.5}"#, "'seed' is 1.5"),
        (#"{"input_ids":[50],"max_tokens":3,"id":7}"#, "'id' must be a string"),
        (#"{"input_ids":[50],"max_tokens":3,"text_input":"hi"}"#, "unknown key 'text_input'"),
        (#"{"input_ids":[50],"max_tokens":3,"parameters":[]}"#, "'parameters' must be an object"),
        (#"{"input_ids":[50],"max_tokens":3,"parameters":{"top_p":0.9}}"#, "unknown parameter 'top_p'"),
        (#"{"input_ids":[50],"max_tokens":3,"parameters":{"max_tokens":4}}"#, "'max_tokens' is given both"),
    ])
    func faultsAreRefusedNamingThem(json: String, expected: String) {
        let message = Self.fault(json)
        #expect(message?.contains(expected) == true, "\(message ?? "accepted")")
    }

    @Test func aPromptOverTheLimitIsRefused() {
        let ids = [String](repeating: "1", count: GenerateRequest.maxPromptTokens + 1).joined(separator: ",")
        #expect(Self.fault(#"{"input_ids":[\#(ids)],"max_tokens":1}"#)?.contains("at most 65536") == true)
    }
}
