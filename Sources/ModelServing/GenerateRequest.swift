import ModelRuntime

/// A request of Triton's generate extension (`POST …/generate`, `…/generate_stream`) to a
/// decoder: the prompt's token ids and how to choose the new tokens.
///
/// The body is one JSON object whose keys are the model's inputs and the parameters:
/// `input_ids` (a non-empty list of token ids), `max_tokens`, and optionally `temperature`,
/// `top_k`, `seed`, `id`. As in Triton, the parameters may also sit in a `parameters` object
/// (a key given both ways is refused).
public struct GenerateRequest: Sendable, Equatable {
    /// Echoed in the answer.
    public var id: String?
    /// The prompt.
    public var inputIDs: [Int]
    public var options: GenerationOptions

    /// New tokens one request may ask for at most.
    public static let maxTokensLimit = 4096
    /// Prompt tokens one request may hold at most.
    public static let maxPromptTokens = 65536

    static let parameterKeys: Set<String> = ["max_tokens", "temperature", "top_k", "seed"]

    /// Reads a request body.
    ///
    /// - Throws: `RequestError.badRequest` naming the fault: invalid JSON, not an object, an
    ///   unknown key, no `input_ids`, a token that is not a whole number from 0, no `max_tokens` or
    ///   one outside 1…`maxTokensLimit`, a negative or non-finite `temperature`, a negative `top_k`
    ///   or `seed`.
    public static func decode(body: [UInt8]) throws(RequestError) -> GenerateRequest {
        let root: JSONValue
        do {
            root = try body.withUnsafeBytes { buffer throws(JSONReader.Failure) in try JSONReader.read(buffer) }
        } catch {
            throw .badRequest("the request is not valid JSON: \(error)")
        }
        guard case .object(let members) = root else { throw .badRequest("the request must be a JSON object") }
        var values: [String: JSONValue] = [:]
        for (key, value) in members where key != "id" && key != "parameters" {
            guard key == "input_ids" || parameterKeys.contains(key) else {
                throw .badRequest("unknown key '\(key)' (a decoder takes input_ids, max_tokens, temperature, top_k, seed, id, parameters)")
            }
            values[key] = value
        }
        if let parameters = members["parameters"] {
            guard case .object(let nested) = parameters else { throw .badRequest("'parameters' must be an object") }
            for (key, value) in nested {
                guard parameterKeys.contains(key) else {
                    throw .badRequest("unknown parameter '\(key)' (the parameters are max_tokens, temperature, top_k, seed)")
                }
                guard values[key] == nil else { throw .badRequest("'\(key)' is given both in the request and in its parameters") }
                values[key] = value
            }
        }
        var id: String?
        if let given = members["id"] {
            guard case .string(let text) = given else { throw .badRequest("'id' must be a string") }
            id = text
        }
        guard let tokens = values["input_ids"] else { throw .badRequest("the request has no 'input_ids' (the prompt's token ids)") }
        guard let elements = tokens.elements else { throw .badRequest("'input_ids' must be a list of token ids") }
        guard !elements.isEmpty else { throw .badRequest("'input_ids' is empty: the prompt needs at least one token") }
        guard elements.count <= maxPromptTokens else {
            throw .badRequest("'input_ids' holds \(elements.count) tokens; at most \(maxPromptTokens)")
        }
        var inputIDs: [Int] = []
        inputIDs.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard let token = element.integer, token >= 0 else {
                throw .badRequest("'input_ids'[\(index)] is \(element.text), not a token id (a whole number from 0)")
            }
            inputIDs.append(token)
        }
        guard let maxTokensValue = values["max_tokens"] else { throw .badRequest("the request has no 'max_tokens' (how many tokens to generate)") }
        guard let maxTokens = maxTokensValue.integer, (1...maxTokensLimit).contains(maxTokens) else {
            throw .badRequest("'max_tokens' is \(maxTokensValue.text); it must be a whole number from 1 to \(maxTokensLimit)")
        }
        var options = GenerationOptions(maxNewTokens: maxTokens)
        if let value = values["temperature"] {
            guard case .number(let temperature) = value, temperature.isFinite, temperature >= 0 else {
                throw .badRequest("'temperature' is \(value.text); it must be a number from 0 (0: greedy)")
            }
            options.temperature = temperature
        }
        if let value = values["top_k"] {
            guard let topK = value.integer, topK >= 0 else { throw .badRequest("'top_k' is \(value.text); it must be a whole number from 0 (0: every token)") }
            options.topK = topK
        }
        if let value = values["seed"] {
            guard let seed = value.integer, seed >= 0 else { throw .badRequest("'seed' is \(value.text); it must be a whole number from 0") }
            options.seed = UInt64(seed)
        }
        return GenerateRequest(id: id, inputIDs: inputIDs, options: options)
    }
}
