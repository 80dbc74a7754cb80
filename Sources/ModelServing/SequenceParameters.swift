/// A request parameter as the protocol carries it, whatever the transport: the REST form's JSON
/// values (numbers arrive as `.number`) and the gRPC form's `InferParameter` (`bool_param`,
/// `int64_param`, `uint64_param`, `double_param`, `string_param`).
public enum RequestParameter: Sendable, Equatable {
    case bool(Bool)
    case int64(Int64)
    case uint64(UInt64)
    case number(Double)
    case string(String)
    /// A JSON value that is none of the above (null, an array, an object).
    case other(String)

    /// The value as a person would write it, for messages.
    var text: String {
        switch self {
        case .bool(let flag): String(flag)
        case .int64(let value): String(value)
        case .uint64(let value): String(value)
        case .number(let value): JSONValue.text(value)
        case .string(let text): "\"\(text)\""
        case .other(let text): text
        }
    }
}

/// A sequence's correlation id: Triton's `sequence_id`, a uint64 or a string.
public enum SequenceID: Sendable, Hashable, CustomStringConvertible {
    case number(UInt64)
    case string(String)

    /// `7`, or a string id quoted: `"session-4"`.
    public var description: String {
        switch self {
        case .number(let value): String(value)
        case .string(let text): "\"\(text)\""
        }
    }
}

/// Triton's sequence extension as one request asks for it: `sequence_id`, `sequence_start`,
/// `sequence_end` from the request's `parameters`. Transport-free: the REST and gRPC paths
/// both hand their parameters to `init(parameters:)`.
public struct SequenceParameters: Sendable, Equatable {
    /// Nil: the request is not part of a sequence (no id, or Triton's 0 or "").
    public var id: SequenceID?
    public var start = false
    public var end = false

    public init(id: SequenceID?, start: Bool = false, end: Bool = false) {
        self.id = id
        self.start = start
        self.end = end
    }

    /// The longest string id taken, in UTF-8 bytes.
    public static let maxStringIDBytes = 256
    /// 2^53: numeric ids in JSON must be below it. From there on a JSON number does not hold every
    /// whole number (9007199254740993 reads as 2^53), so two ids could be taken for one.
    static let firstInexactJSONInteger = 9_007_199_254_740_992.0

    /// The three parameters' names.
    public static let names = ["sequence_id", "sequence_start", "sequence_end"]

    /// Reads the sequence parameters out of a request's parameters (others are ignored).
    ///
    /// - Returns: nil when none of the three is present.
    /// - Throws: `RequestError.badRequest` naming the parameter: an id that is not a whole number
    ///   from 0 or a string (or a string over 256 bytes), a flag that is not true or false, a flag
    ///   set without an id.
    public init?(parameters: [String: RequestParameter]) throws(RequestError) {
        guard Self.names.contains(where: { parameters[$0] != nil }) else { return nil }
        switch parameters["sequence_id"] {
        case nil:
            id = nil
        case .uint64(let value)?:
            id = value == 0 ? nil : .number(value)
        case .int64(let value)? where value >= 0:
            id = value == 0 ? nil : .number(UInt64(value))
        case .number(let value)? where value >= 0 && value == value.rounded() && value < Self.firstInexactJSONInteger:
            id = value == 0 ? nil : .number(UInt64(value))
        case .number(let value)? where value == value.rounded() && value >= Self.firstInexactJSONInteger:
            let text = value < 1.8e19 ? String(UInt64(value)) : JSONValue.text(value)
            throw .badRequest("'parameters.sequence_id' \(text) is not below 2^53, where JSON numbers stop holding every whole number: send it as a string")
        case .string(let text)?:
            guard text.utf8.count <= Self.maxStringIDBytes else {
                throw .badRequest("'parameters.sequence_id' is \(text.utf8.count) bytes long; at most \(Self.maxStringIDBytes)")
            }
            id = text.isEmpty ? nil : .string(text)
        case let other?:
            throw .badRequest("'parameters.sequence_id' must be a whole number from 0 or a string, not \(other.text)")
        }
        start = try Self.flag("sequence_start", parameters)
        end = try Self.flag("sequence_end", parameters)
        if id == nil, start || end {
            throw .badRequest("'parameters.\(start ? "sequence_start" : "sequence_end")' is true but the request has no 'sequence_id' (or 0 or \"\", which are no sequence)")
        }
    }

    private static func flag(_ name: String, _ parameters: [String: RequestParameter]) throws(RequestError) -> Bool {
        switch parameters[name] {
        case nil: return false
        case .bool(let flag)?: return flag
        case let other?: throw .badRequest("'parameters.\(name)' must be true or false, not \(other.text)")
        }
    }

    /// The first parameter present with a value that asks for a sequence (an id, a true flag), for
    /// refusing them on a model without states; nil when they all say "no sequence".
    var firstMeaningful: String? {
        if id != nil { return "sequence_id" }
        if start { return "sequence_start" }
        if end { return "sequence_end" }
        return nil
    }
}

extension SequenceParameters {
    /// Reads them from the REST request's `parameters` object.
    static func fromJSON(_ parameters: JSONValue) throws(RequestError) -> SequenceParameters? {
        var found: [String: RequestParameter] = [:]
        for name in names {
            guard let value = parameters[name] else { continue }
            found[name] = switch value {
            case .bool(let flag): .bool(flag)
            case .number(let number): .number(number)
            case .string(let text): .string(text)
            default: .other(value.text)
            }
        }
        return try SequenceParameters(parameters: found)
    }
}
