import JSONText

/// A JSON value as `JSONReader` reads it. Arrays of numbers only are kept as
/// `[Double]` (a tensor's `data` of 150,000 pixels is one allocation, not 150,000 boxed values).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case numbers([Double])
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { members[key] } else { nil }
    }

    /// The elements of an array (numbers as `.number` values).
    public var elements: [JSONValue]? {
        switch self {
        case .array(let values): values
        case .numbers(let numbers): numbers.map { .number($0) }
        default: nil
        }
    }

    /// The value as it would be written, for messages.
    public var text: String {
        switch self {
        case .null: "null"
        case .bool(let flag): String(flag)
        case .number(let number): Self.text(number)
        case .string(let string): "\"\(string)\""
        case .numbers, .array: "an array"
        case .object: "an object"
        }
    }

    static func text(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
    }

    /// A number that is a whole number within `Int`.
    public var integer: Int? {
        guard case .number(let value) = self, value == value.rounded(), abs(value) < 9.0e15 else { return nil }
        return Int(value)
    }
}

/// Reads JSON (RFC 8259) from bytes: the request bodies of the protocol, whose
/// number arrays Foundation's `JSONSerialization` turns into one object per
/// element (about 20 times slower for a 224×224×3 image). Strict: one value,
/// nothing after it but white space, at most 64 levels of nesting. The grammar is
/// `JSONText`'s; this keeps number arrays flat and the last of two equal keys.
public enum JSONReader {
    /// Why the text is not JSON: what was found and at which byte.
    public typealias Failure = JSONSyntaxError

    static let maxDepth = 64

    /// Reads the JSON value `bytes` hold.
    public static func read(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> JSONValue {
        value(of: try JSONParser.parse(bytes, options: JSONParser.Options(maximumDepth: maxDepth)))
    }

    private static func value(of node: JSONNode) -> JSONValue {
        switch node {
        case .null: return .null
        case .bool(let flag): return .bool(flag)
        case .number(let number): return .number(number.double)
        case .string(let text): return .string(text)
        case .array(let elements): return .array(elements.map(value(of:)))
        case .numbers(let numbers): return .numbers(numbers.map(\.double))
        case .object(let members):
            return .object(Dictionary(members.map { ($0.name, value(of: $0.value)) }, uniquingKeysWith: { $1 }))
        }
    }
}
