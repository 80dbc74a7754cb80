/// A strict, small JSON reader for the bundle's own documents, much faster
/// than Foundation's on Linux (opening a bundle must not cost more for a
/// model with more tensors than the checks themselves do).
///
/// Reads objects, arrays, strings (with all escapes), integers, `true`,
/// `false` and `null`; fractions and exponents, which bundle documents never
/// hold, are refused. Nesting is bounded.
enum JSONScanner {
    /// Recursive through arrays, so no case needs a box of its own.
    enum Value: Equatable {
        case object([(String, Value)])
        case array([Value])
        case string(String)
        case integer(Int64)
        case bool(Bool)
        case null

        static func == (left: Value, right: Value) -> Bool {
            switch (left, right) {
            case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            case (.array(let a), .array(let b)): a == b
            case (.string(let a), .string(let b)): a == b
            case (.integer(let a), .integer(let b)): a == b
            case (.bool(let a), .bool(let b)): a == b
            case (.null, .null): true
            default: false
            }
        }

        subscript(key: String) -> Value? {
            guard case .object(let members) = self else { return nil }
            return members.first { $0.0 == key }?.1
        }

        var string: String? { if case .string(let value) = self { value } else { nil } }
        var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
        var array: [Value]? { if case .array(let values) = self { values } else { nil } }
    }

    struct Failure: Error, Equatable {
        let offset: Int
        let reason: String
    }

    static let maximumDepth = 32

    static func parse(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> Value {
        var reader = Reader(bytes: bytes)
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.index == bytes.count else { throw Failure(offset: reader.index, reason: "text after the document") }
        return value
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        func fail(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

        mutating func value(depth: Int) throws(Failure) -> Value {
            guard depth < JSONScanner.maximumDepth else { throw fail("nested too deeply") }
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [(String, Value)] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                while true {
                    skipWhitespace()
                    let keyOffset = index
                    let key = try string()
                    // Readers disagree on which of two equal keys wins; refuse them.
                    guard !members.contains(where: { $0.0 == key }) else {
                        throw Failure(offset: keyOffset, reason: "key \"\(key)\" appears twice")
                    }
                    skipWhitespace()
                    try expect(UInt8(ascii: ":"))
                    members.append((key, try value(depth: depth + 1)))
                    skipWhitespace()
                    if try separatorEnds(UInt8(ascii: "}")) { return .object(members) }
                }
            case UInt8(ascii: "["):
                index += 1
                var values: [Value] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(values) }
                while true {
                    values.append(try value(depth: depth + 1))
                    skipWhitespace()
                    if try separatorEnds(UInt8(ascii: "]")) { return .array(values) }
                }
            case UInt8(ascii: "\""):
                return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            default:
                return .integer(try integer())
            }
        }

        /// After a member or element: `,` goes on, `close` ends.
        mutating func separatorEnds(_ close: UInt8) throws(Failure) -> Bool {
            guard index < bytes.count else { throw fail("unexpected end") }
            let byte = bytes[index]
            index += 1
            if byte == close { return true }
            guard byte == UInt8(ascii: ",") else { throw fail("expected ',' or '\(Character(Unicode.Scalar(close)))'") }
            return false
        }

        mutating func expect(_ byte: UInt8) throws(Failure) {
            guard index < bytes.count, bytes[index] == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
            index += 1
        }

        mutating func literal(_ word: String) throws(Failure) {
            for byte in word.utf8 { try expect(byte) }
        }

        mutating func integer() throws(Failure) -> Int64 {
            let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            let start = index
            var magnitude: Int64 = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                let (times, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
                guard !overflowTimes, !overflowSum else { throw fail("number too large") }
                magnitude = sum
                index += 1
            }
            guard index > start else { throw fail("unexpected character") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") || bytes[index] | 0x20 == UInt8(ascii: "e") {
                throw fail("only integers are expected")
            }
            return negative ? -magnitude : magnitude
        }

        mutating func string() throws(Failure) -> String {
            try expect(UInt8(ascii: "\""))
            // Most strings have no escapes: find the closing quote and decode
            // the bytes in place.
            var end = index
            while end < bytes.count {
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") {
                    let text = UnsafeRawBufferPointer(rebasing: bytes[index..<end])
                    // ASCII is valid UTF-8 and decodes on the fast path.
                    let value = text.allSatisfy { $0 < 0x80 }
                        ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
                    guard let value else { throw fail("string is not UTF-8") }
                    index = end + 1
                    return value
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                end += 1
            }
            var utf8: [UInt8] = []
            utf8.reserveCapacity(32)
            while true {
                guard index < bytes.count else { throw fail("unterminated string") }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: utf8, as: UTF8.self) else { throw fail("string is not UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            try literal("\\u")
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let value = Unicode.Scalar(scalar) else { throw fail("invalid escape") }
                        utf8.append(contentsOf: Array(String(Character(value)).utf8))
                    default:
                        throw fail("invalid escape")
                    }
                case 0..<0x20:
                    throw fail("control character in string")
                default:
                    utf8.append(byte)
                }
            }
        }

        mutating func hex4() throws(Failure) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard index < bytes.count, let digit = hexDigit(bytes[index]) else { throw fail("invalid \\u escape") }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        func hexDigit(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
            }
        }
    }
}
