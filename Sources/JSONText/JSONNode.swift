/// A number as its JSON literal gives it: always as a `Double`, and also as an
/// exact `Int64` when the literal is an integer (no fraction, no exponent) that fits.
/// Sixteen bytes, so an array of them stays close to an array of `Double`.
public struct JSONNumber: Sendable, Hashable {
    private enum Storage: Sendable, Hashable {
        case integer(Int64)
        /// `-0`: the integer 0 whose `Double` is negative zero.
        case negativeZero
        case double(Double)
    }

    private let storage: Storage

    /// A number with the given readings: `int64` when the literal was an integer that fits
    /// (then `double` is taken as its nearest `Double`, or `-0.0` for `-0`), else `double` alone.
    public init(double: Double, int64: Int64?) {
        if let int64 {
            storage = int64 == 0 && double.sign == .minus ? .negativeZero : .integer(int64)
        } else {
            storage = .double(double)
        }
    }

    /// The nearest `Double` (`-0` stays negative zero).
    public var double: Double {
        switch storage {
        case .integer(let value): Double(value)
        case .negativeZero: -0.0
        case .double(let value): value
        }
    }

    /// The exact value of an integer literal within `Int64`, else `nil`
    /// (`1.0`, `1e3` and `9223372036854775808` have none).
    public var int64: Int64? {
        switch storage {
        case .integer(let value): value
        case .negativeZero: 0
        case .double: nil
        }
    }
}

/// A JSON value as `JSONParser` reads it. Object members keep their order in
/// the text, so a caller can tell duplicates and write them back unchanged.
/// A non-empty array of numbers only comes as `.numbers` (a tensor of 150,000
/// values is one flat allocation, not 150,000 nodes); `elements` reads either form,
/// and `==` holds between the two forms of the same array.
public enum JSONNode: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONNode])
    case numbers([JSONNumber])
    case object([(name: String, value: JSONNode)])

    public static func == (left: JSONNode, right: JSONNode) -> Bool {
        switch (left, right) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.numbers(let a), .numbers(let b)): a == b
        case (.numbers, .array), (.array, .numbers): left.elements == right.elements
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.name == $1.name && $0.value == $1.value }
        default: false
        }
    }

    /// The elements of an array in either form, else `nil`.
    public var elements: [JSONNode]? {
        switch self {
        case .array(let values): values
        case .numbers(let numbers): numbers.map { .number($0) }
        default: nil
        }
    }

    /// The value of the first member named `key`, if this is an object that has one.
    public subscript(key: String) -> JSONNode? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name == key }?.value
    }
}

/// Why a text is not JSON: what was expected or found, and the byte (from 0) where.
public struct JSONSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong, for a person: `expected ',' or ']'`, `a lone surrogate in \u escapes`.
    public let reason: String
    /// The byte offset in the text at which the fault was found.
    public let offset: Int

    public init(reason: String, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    /// `<reason> at byte <offset>`.
    public var description: String { "\(reason) at byte \(offset)" }
}
