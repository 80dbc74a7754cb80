/// Reads JSON text (RFC 8259) from bytes into a `JSONNode`: the one parser
/// behind the server's request bodies and the bundle's own documents.
///
/// Strict: one value with nothing after it but white space, UTF-8 only, no
/// leading zeros, every escape checked (surrogates must pair), nesting bounded.
/// Every refusal is a `JSONSyntaxError` naming what was expected and the byte.
/// Much faster than Foundation's readers on Linux, and uses nothing but the
/// standard library.
public struct JSONParser {
    /// What a caller allows beyond the grammar.
    public struct Options: Sendable {
        /// Values may sit this many levels deep, the top value being the first (`[[]]` takes 2,
        /// `[[1]]` 3); a value one level deeper is refused at its first byte.
        public var maximumDepth: Int
        /// Refuse an object that names a member twice (readers disagree on which one wins);
        /// when `false`, both are kept in order.
        public var refusesDuplicateKeys: Bool
        /// Refuse numbers with a fraction or an exponent, and integers outside `Int64`.
        public var integersOnly: Bool

        public init(maximumDepth: Int = 64, refusesDuplicateKeys: Bool = false, integersOnly: Bool = false) {
            self.maximumDepth = maximumDepth
            self.refusesDuplicateKeys = refusesDuplicateKeys
            self.integersOnly = integersOnly
        }
    }

    /// Reads the one JSON value `bytes` hold.
    ///
    /// - Throws: `JSONSyntaxError` at the first byte that breaks the grammar or the options.
    public static func parse(_ bytes: UnsafeRawBufferPointer, options: Options = Options()) throws(JSONSyntaxError) -> JSONNode {
        var parser = JSONParser(bytes: bytes, options: options)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.position == bytes.count else { throw parser.failure("unexpected text after the JSON value") }
        return value
    }

    private let bytes: UnsafeRawBufferPointer
    private let options: Options
    private var position = 0

    private init(bytes: UnsafeRawBufferPointer, options: Options) {
        self.bytes = bytes
        self.options = options
    }

    private func failure(_ reason: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(reason: reason, offset: offset ?? position)
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private static func isDigit(_ byte: UInt8?) -> Bool {
        guard let byte else { return false }
        return byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONNode) throws(JSONSyntaxError) -> JSONNode {
        let text = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - position >= text.count, text.elementsEqual(bytes[position..<(position + text.count)]) else {
            throw failure("unexpected character")
        }
        position += text.count
        return value
    }

    private mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONNode {
        guard depth < options.maximumDepth else { throw failure("nesting deeper than \(options.maximumDepth) levels") }
        guard let byte = current else { throw failure("unexpected end of the JSON text") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        case 0x20..<0x7F: throw failure("unexpected character '\(Character(Unicode.Scalar(byte)))'")
        default: throw failure("unexpected byte 0x\(String(byte, radix: 16, uppercase: true))")
        }
    }

    private mutating func object(depth: Int) throws(JSONSyntaxError) -> JSONNode {
        position += 1
        var members: [(name: String, value: JSONNode)] = []
        skipSpace()
        if current == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let nameOffset = position
            let name = try string()
            if options.refusesDuplicateKeys, members.contains(where: { $0.name == name }) {
                throw failure("key \"\(name)\" appears twice", at: nameOffset)
            }
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':'") }
            position += 1
            skipSpace()
            members.append((name, try value(depth: depth + 1)))
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

    private mutating func array(depth: Int) throws(JSONSyntaxError) -> JSONNode {
        position += 1
        skipSpace()
        if current == UInt8(ascii: "]") {
            position += 1
            return .array([])
        }
        // Numbers only, as long as it lasts, kept flat.
        var numbers: [JSONNumber] = []
        while depth + 1 < options.maximumDepth, current == UInt8(ascii: "-") || Self.isDigit(current) {
            if numbers.count == 4096 {
                // A tensor: every number takes at least two bytes ("1,"), so this is the last
                // growth, and the pages never written are never touched.
                numbers.reserveCapacity(numbers.count + (bytes.count - position + 1) / 2)
            }
            numbers.append(try number())
            if try elementEndsArray() { return .numbers(numbers) }
        }
        var values = numbers.map { JSONNode.number($0) }
        while true {
            values.append(try value(depth: depth + 1))
            if try elementEndsArray() { return .array(values) }
        }
    }

    /// After an array element: `,` goes on to the next one, `]` ends the array.
    private mutating func elementEndsArray() throws(JSONSyntaxError) -> Bool {
        skipSpace()
        switch current {
        case UInt8(ascii: ","):
            position += 1
            skipSpace()
            return false
        case UInt8(ascii: "]"):
            position += 1
            return true
        default: throw failure("expected ',' or ']'")
        }
    }

    private mutating func number() throws(JSONSyntaxError) -> JSONNumber {
        let start = position
        let negative = bytes[position] == UInt8(ascii: "-")
        let digitStart = negative ? position + 1 : position
        var index = digitStart
        var magnitude: UInt64 = 0
        while index < bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            if digit > 9 { break }
            magnitude = magnitude &* 10 &+ UInt64(digit)
            index += 1
        }
        position = index
        let digits = index - digitStart
        guard digits > 0 else { throw failure("expected a digit") }
        if digits > 1, bytes[digitStart] == UInt8(ascii: "0") { throw failure("a number with a leading zero", at: start) }
        let integral = current != UInt8(ascii: ".") && current != UInt8(ascii: "e") && current != UInt8(ascii: "E")
        // 19 digits never overflow 64 bits unsigned; 20 and more (no leading zeros) are past Int64.
        if integral, digits <= 19, magnitude <= (negative ? UInt64(Int64.max) + 1 : UInt64(Int64.max)) {
            let exact = negative ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(magnitude)
            // Double(Int64) rounds to nearest like the decimal reading would; keep -0 negative.
            let double = magnitude == 0 && negative ? -0.0 : Double(exact)
            return JSONNumber(double: double, int64: exact)
        }
        if options.integersOnly {
            if integral { throw failure("an integer outside 64 bits", at: start) }
            throw failure("only integers are expected")
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard Self.isDigit(current) else { throw failure("expected a digit after '.'") }
            while Self.isDigit(current) { position += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard Self.isDigit(current) else { throw failure("expected an exponent") }
            while Self.isDigit(current) { position += 1 }
        }
        guard position - start < 256 else { throw failure("a number of more than 255 characters", at: start) }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        guard let double = Double(text) else { throw failure("an unreadable number", at: start) }
        return JSONNumber(double: double, int64: nil)
    }

    /// Throws at the first byte in `range` that does not begin a valid UTF-8 sequence.
    private func validateUTF8(_ range: Range<Int>) throws(JSONSyntaxError) {
        let run = UnsafeRawBufferPointer(rebasing: bytes[range])
        if run.allSatisfy({ $0 < 0x80 }) { return }
        var iterator = run.makeIterator()
        var decoder = Unicode.UTF8.ForwardParser()
        var offset = range.lowerBound
        while true {
            switch decoder.parseScalar(from: &iterator) {
            case .valid(let encoded): offset += encoded.count
            case .emptyInput: return
            case .error: throw failure("a string that is not UTF-8", at: offset)
            }
        }
    }

    private mutating func string() throws(JSONSyntaxError) -> String {
        position += 1
        var runStart = position
        // Fast path: no escapes.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { position += 1 }
        if current == UInt8(ascii: "\"") {
            try validateUTF8(runStart..<position)
            defer { position += 1 }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[runStart..<position]), as: UTF8.self)
        }
        var utf8: [UInt8] = []
        while true {
            while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { position += 1 }
            try validateUTF8(runStart..<position)
            utf8.append(contentsOf: bytes[runStart..<position])
            guard let byte = current else { throw failure("unterminated string") }
            guard byte >= 0x20 else { throw failure("a control character in a string") }
            position += 1
            if byte == UInt8(ascii: "\"") { return String(decoding: utf8, as: UTF8.self) }
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
                let escapeStart = position - 2
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                        throw failure("a lone surrogate in \\u escapes", at: escapeStart)
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate in \\u escapes", at: escapeStart) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw failure("a lone surrogate in \\u escapes", at: escapeStart) }
                UTF8.encode(unicode) { utf8.append($0) }
            default:
                let shown = escaped >= 0x20 && escaped < 0x7F ? String(Character(Unicode.Scalar(escaped))) : "0x" + String(escaped, radix: 16)
                throw failure("an invalid escape '\\\(shown)'", at: position - 2)
            }
            runStart = position
        }
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw failure("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a non-hex digit in a \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}
