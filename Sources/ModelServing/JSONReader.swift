import Foundation

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
/// nothing after it but white space, at most 64 levels of nesting.
public struct JSONReader {
    /// Why the text is not JSON: what was found and at which byte.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let reason: String
        public let offset: Int
        public var description: String { "\(reason) at byte \(offset)" }
    }

    static let maxDepth = 64

    /// Reads the JSON value `bytes` hold.
    public static func read(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> JSONValue {
        var reader = JSONReader(bytes: bytes)
        reader.skipSpace()
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.position == bytes.count else { throw reader.failure("unexpected text after the JSON value") }
        return value
    }

    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    private init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private func failure(_ reason: String) -> Failure { Failure(reason: reason, offset: position) }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    private mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(Failure) -> JSONValue {
        let text = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard bytes.count - position >= text.count, text.elementsEqual(bytes[position..<(position + text.count)]) else {
            throw failure("unexpected character")
        }
        position += text.count
        return value
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth < Self.maxDepth else { throw failure("nesting deeper than \(Self.maxDepth) levels") }
        guard let byte = current else { throw failure("unexpected end of the JSON text") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw failure("unexpected character '\(Character(Unicode.Scalar(byte)))'")
        }
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        position += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if current == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let key = try string()
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':'") }
            position += 1
            skipSpace()
            members[key] = try value(depth: depth + 1)
            skipSpace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        position += 1
        skipSpace()
        if current == UInt8(ascii: "]") {
            position += 1
            return .array([])
        }
        // Numbers only, as long as it lasts.
        var numbers: [Double] = []
        while let byte = current, byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            numbers.append(try number())
            skipSpace()
            switch current {
            case UInt8(ascii: ","):
                position += 1
                skipSpace()
            case UInt8(ascii: "]"):
                position += 1
                return .numbers(numbers)
            default: throw failure("expected ',' or ']'")
            }
        }
        var values = numbers.map { JSONValue.number($0) }
        while true {
            values.append(try value(depth: depth + 1))
            skipSpace()
            switch current {
            case UInt8(ascii: ","):
                position += 1
                skipSpace()
            case UInt8(ascii: "]"):
                position += 1
                return .array(values)
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func number() throws(Failure) -> Double {
        let start = position
        var negative = false
        if current == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw failure("expected a digit") }
        var integer: UInt64 = 0
        var digits = 0
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            integer = integer &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
            digits += 1
            position += 1
        }
        if digits > 1, first == UInt8(ascii: "0") { throw Failure(reason: "a number with a leading zero", offset: start) }
        let fraction = current == UInt8(ascii: ".") || current == UInt8(ascii: "e") || current == UInt8(ascii: "E")
        if !fraction, digits <= 15 {
            let value = Double(integer)
            return negative ? -value : value
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { throw failure("expected a digit after '.'") }
            while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { throw failure("expected an exponent") }
            while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
        }
        guard position - start < 256 else { throw Failure(reason: "a number of more than 255 characters", offset: start) }
        // strtod on a NUL-terminated copy: the body is not terminated.
        var text = [CChar](repeating: 0, count: position - start + 1)
        for index in start..<position { text[index - start] = CChar(bitPattern: bytes[index]) }
        return strtod(text, nil)
    }

    private mutating func string() throws(Failure) -> String {
        position += 1
        let start = position
        // Fast path: no escapes.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { position += 1 }
        if current == UInt8(ascii: "\"") {
            defer { position += 1 }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        }
        var utf8 = Array(bytes[start..<position])
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return String(decoding: utf8, as: UTF8.self)
            case UInt8(ascii: "\\"):
                position += 1
                guard let escaped = current else { throw failure("unterminated string") }
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escaped)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                            throw failure("a lone surrogate in \\u escapes")
                        }
                        position += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate in \\u escapes") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw failure("an invalid \\u escape") }
                    utf8.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw failure("an invalid escape '\\\(Character(Unicode.Scalar(escaped)))'")
                }
            default:
                guard byte >= 0x20 else { throw failure("a control character in a string") }
                utf8.append(byte)
                position += 1
            }
        }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - position >= 4 else { throw failure("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Character(Unicode.Scalar(bytes[position])).hexDigitValue else { throw failure("a non-hex digit in a \\u escape") }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}
