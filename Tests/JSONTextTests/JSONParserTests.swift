import Foundation
import JSONText
import Testing

/// The shared JSON parser against RFC 8259: what it accepts reads as Foundation reads it,
/// integers stay exact, and every broken text is refused naming the byte and what was expected.
@Suite struct JSONParserTests {
    private func parse(_ text: String, _ options: JSONParser.Options = .init()) throws -> JSONNode {
        try parse(Array(text.utf8), options)
    }

    private func parse(_ bytes: [UInt8], _ options: JSONParser.Options = .init()) throws -> JSONNode {
        try bytes.withUnsafeBytes { try JSONParser.parse($0, options: options) }
    }

    private func number(_ text: String) throws -> JSONNumber {
        guard case .number(let number) = try parse(text) else { throw JSONSyntaxError(reason: "not a number", offset: 0) }
        return number
    }

    private func refusal(_ text: String, _ options: JSONParser.Options = .init()) -> JSONSyntaxError? {
        refusal(Array(text.utf8), options)
    }

    private func refusal(_ bytes: [UInt8], _ options: JSONParser.Options = .init()) -> JSONSyntaxError? {
        do {
            _ = try parse(bytes, options)
            return nil
        } catch {
            return error as? JSONSyntaxError ?? JSONSyntaxError(reason: "\(error)", offset: -1)
        }
    }

    /// The two examples of RFC 8259 section 13, member order kept.
    @Test func rfcExamples() throws {
        let image = try parse("""
            {
              "Image": {
                "Width":  800,
                "Height": 600,
                "Title":  "View from 15th Floor",
                "Thumbnail": {
                  "Url":    "http://www.example.com/image/481989943",
                  "Height": 125,
                  "Width":  100
                },
                "Animated" : false,
                "IDs": [116, 943, 234, 38793]
              }
            }
            """)
        #expect(image["Image"]?["Thumbnail"]?["Width"] == .number(JSONNumber(double: 100, int64: 100)))
        #expect(image["Image"]?["Animated"] == .bool(false))
        guard case .object(let members)? = image["Image"] else { Issue.record("no object"); return }
        #expect(members.map(\.name) == ["Width", "Height", "Title", "Thumbnail", "Animated", "IDs"])
        let places = try parse("""
            [{"precision": "zip", "Latitude": 37.7668, "Longitude": -122.3959, "Address": "", "City": "SAN FRANCISCO",
              "State": "CA", "Zip": "94107", "Country": "US"},
             {"precision": "zip", "Latitude": 37.371991, "Longitude": -122.026020, "Address": "", "City": "SUNNYVALE",
              "State": "CA", "Zip": "94085", "Country": "US"}]
            """)
        guard case .array(let list) = places, list.count == 2 else { Issue.record("not two places"); return }
        #expect(list[1]["Longitude"] == .number(JSONNumber(double: -122.026020, int64: nil)))
        // Scalars stand alone at the top (RFC 8259 dropped RFC 4627's object-or-array rule).
        #expect(try parse(" 2 ") == .number(JSONNumber(double: 2, int64: 2)))
        #expect(try parse("\"x\"") == .string("x") && (try parse("null")) == .null && (try parse("true")) == .bool(true))
    }

    @Test func integersAreExactWhereTheyFit() throws {
        #expect(try number("9223372036854775807").int64 == .max)
        #expect(try number("-9223372036854775808").int64 == .min)
        #expect(try number("9007199254740993") == JSONNumber(double: 9_007_199_254_740_992, int64: 9_007_199_254_740_993))
        let past = try number("9223372036854775808")
        #expect(past.int64 == nil && past.double == 9_223_372_036_854_775_808)
        let huge = try number("-123456789012345678901234567890")
        #expect(huge.int64 == nil && huge.double == -1.2345678901234568e29)
        #expect(try number("0") == JSONNumber(double: 0, int64: 0))
    }

    @Test func negativeZeroKeepsItsSign() throws {
        let zero = try number("-0")
        #expect(zero.int64 == 0 && zero.double == 0 && zero.double.sign == .minus)
        #expect(try number("-0.0").double.sign == .minus && (try number("-0e5")).double.sign == .minus)
        #expect(try number("0").double.sign == .plus)
    }

    @Test(arguments: [
        ("1e3", 1000.0), ("1E3", 1000), ("1e+3", 1000), ("1e-3", 0.001), ("-2.5E-2", -0.025), ("0.1", 0.1),
        ("123.456e7", 1_234_560_000), ("1e308", 1e308), ("4.9e-324", Double.leastNonzeroMagnitude), ("1.0", 1),
        ("0.30000000000000004", 0.30000000000000004), ("1e400", Double.infinity), ("-1e400", -Double.infinity), ("1e-400", 0),
    ])
    func fractionsAndExponentsAreCorrectlyRounded(text: String, expected: Double) throws {
        // The compiler's reading of the literal is the reference (Foundation on Linux reads
        // 0.30000000000000004 as 0.3000000000000001).
        let value = try number(text)
        #expect(value.double == expected && value.int64 == nil, "\(text)")
    }

    @Test(arguments: [
        ("01", 0, "a number with a leading zero"), ("-01", 0, "a number with a leading zero"), ("-", 1, "expected a digit"),
        ("-a", 1, "expected a digit"), ("1.", 2, "expected a digit after '.'"), ("1.e3", 2, "expected a digit after '.'"),
        ("1e", 2, "expected an exponent"), ("1e+", 3, "expected an exponent"), (".5", 0, "unexpected character '.'"),
        ("+1", 0, "unexpected character '+'"), ("NaN", 0, "unexpected character 'N'"), ("Infinity", 0, "unexpected character 'I'"),
        ("0x10", 1, "unexpected text after the JSON value"), ("1 2", 2, "unexpected text after the JSON value"),
        ("", 0, "unexpected end of the JSON text"), ("  ", 2, "unexpected end of the JSON text"),
        ("[1,]", 3, "unexpected character ']'"), ("[1 2]", 3, "expected ',' or ']'"), ("[1", 2, "expected ',' or ']'"),
        ("{\"a\" 1}", 5, "expected ':'"), ("{\"a\":}", 5, "unexpected character '}'"), ("{\"a\":1,}", 7, "expected a member name"),
        ("{,}", 1, "expected a member name"), ("{'a':1}", 1, "expected a member name"), ("{\"a\":1 \"b\":2}", 7, "expected ',' or '}'"),
        ("tru", 0, "unexpected character"), ("nul", 0, "unexpected character"), ("True", 0, "unexpected character 'T'"),
        ("\u{0C}1", 0, "unexpected byte 0xC"), ("\u{A0}1", 0, "unexpected byte 0xC2"),
    ])
    func brokenTextNamesItsByte(text: String, offset: Int, reason: String) {
        #expect(refusal(text) == JSONSyntaxError(reason: reason, offset: offset), "\(text)")
    }

    /// Arrays of numbers only come flat, across the growth step at 4,096 elements too.
    @Test(arguments: [1, 4096, 4097, 150_528])
    func numberArraysStayFlat(count: Int) throws {
        let values: [Double] = (0..<count).map { (index: Int) -> Double in index % 3 == 0 ? Double(index) : Double(index) + 0.5 }
        let whole: [Bool] = values.map { (value: Double) -> Bool in value == value.rounded() }
        let texts: [String] = zip(values, whole).map { (value: Double, isWhole: Bool) -> String in isWhole ? String(Int(value)) : String(value) }
        let text = "[" + texts.joined(separator: ",") + "]"
        guard case .numbers(let numbers) = try parse(text) else { Issue.record("not flat"); return }
        let doubles: [Double] = numbers.map { (number: JSONNumber) -> Double in number.double }
        let exact: [Bool] = numbers.map { (number: JSONNumber) -> Bool in number.int64 != nil }
        #expect(doubles == values)
        #expect(exact == whole)
    }

    @Test func bothArrayFormsCompareEqual() throws {
        let one = JSONNumber(double: 1, int64: 1)
        #expect(try parse("[1]") == .array([.number(one)]))
        #expect(try parse("[1, \"a\"]") == .array([.number(one), .string("a")]))
        #expect(try parse("[]") == .array([]) && (try parse("[[1], {}]")) == .array([.numbers([one]), .object([])]))
        #expect(try parse("[1]").elements == [.number(one)])
    }

    @Test func errorsPrintAsOneLine() {
        #expect(refusal("[1 2]")?.description == "expected ',' or ']' at byte 3")
    }

    @Test func escapesAndSurrogates() throws {
        #expect(try parse(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{08}\u{0C}\n\r\t"))
        #expect(try parse(#""\u00e9\u20AC\ud83d\ude00\u0000""#) == .string("é€😀\u{0}"))
        #expect(try parse(#""a\u0041b""#) == .string("aAb"))
        #expect(try parse("\"größe 😀 \u{7F}\"") == .string("größe 😀 \u{7F}"))
        let text = #"{"s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00 plain"}"#
        let foundation = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]
        #expect(try parse(text)["s"] == .string(try #require(foundation?["s"])))
    }

    @Test(arguments: [
        (#""\x""#, 1, "an invalid escape '\\x'"), (#""\U0041""#, 1, "an invalid escape '\\U'"),
        (#""\ud800""#, 1, "a lone surrogate in \\u escapes"), (#""ab\udc00""#, 3, "a lone surrogate in \\u escapes"),
        (#""\ud800\u0041""#, 1, "a lone surrogate in \\u escapes"), (#""\ud800\ud800""#, 1, "a lone surrogate in \\u escapes"),
        (#""\ud800x""#, 1, "a lone surrogate in \\u escapes"), (#""\u12""#, 3, "a short \\u escape"),
        (#""\u12G4""#, 5, "a non-hex digit in a \\u escape"), ("\"a\u{01}b\"", 2, "a control character in a string"),
        ("\"a\nb\"", 2, "a control character in a string"), ("\"abc", 4, "unterminated string"), (#""ab\"#, 4, "unterminated string"),
    ])
    func badStringsNameTheirByte(text: String, offset: Int, reason: String) {
        #expect(refusal(text) == JSONSyntaxError(reason: reason, offset: offset), "\(text)")
    }

    /// Lone continuation bytes, overlong forms, UTF-16 surrogates and truncated sequences.
    @Test(arguments: [
        ([0x22, 0x61, 0xFF, 0x22], 2), ([0x22, 0x80, 0x22], 1), ([0x22, 0xC0, 0xAF, 0x22], 1),
        ([0x22, 0x61, 0xED, 0xA0, 0x80, 0x22], 2), ([0x22, 0xE2, 0x82, 0x22], 1), ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),
        ([0x22, 0x5C, 0x6E, 0x61, 0xFE, 0x22], 4), ([0x7B, 0x22, 0xC3, 0x22, 0x3A, 0x31, 0x7D], 2),
    ] as [([UInt8], Int)])
    func invalidUTF8IsRefused(bytes: [UInt8], offset: Int) {
        #expect(refusal(bytes) == JSONSyntaxError(reason: "a string that is not UTF-8", offset: offset))
    }

    @Test func nestingIsBounded() throws {
        let fine = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(refusal(fine) == nil)
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(refusal(deep) == JSONSyntaxError(reason: "nesting deeper than 64 levels", offset: 64))
        // Far past any stack: refused at the limit, not a crash.
        #expect(refusal(String(repeating: "{\"a\":", count: 100_000))?.reason == "nesting deeper than 64 levels")
        #expect(refusal(String(repeating: "[", count: 1_000_000)) == JSONSyntaxError(reason: "nesting deeper than 64 levels", offset: 64))
        // Levels count values, the top one being the first: `[[]]` takes 2, `[[1]]` 3.
        let two = JSONParser.Options(maximumDepth: 2)
        #expect(refusal("[1]", two) == nil && refusal("[[]]", two) == nil && refusal("{\"a\": {}}", two) == nil)
        #expect(refusal("[[1]]", two) == JSONSyntaxError(reason: "nesting deeper than 2 levels", offset: 2))
        #expect(refusal("{\"a\": [1]}", two) == JSONSyntaxError(reason: "nesting deeper than 2 levels", offset: 7))
    }

    @Test func duplicateKeys() throws {
        let text = #"{"a": 1, "b": 2, "a": 3}"#
        guard case .object(let members) = try parse(text) else { Issue.record("not an object"); return }
        #expect(members.map(\.name) == ["a", "b", "a"])
        #expect(refusal(text, JSONParser.Options(refusesDuplicateKeys: true)) == JSONSyntaxError(reason: "key \"a\" appears twice", offset: 17))
    }

    @Test func integersOnly() {
        let strict = JSONParser.Options(integersOnly: true)
        #expect(refusal("[1, -9223372036854775808]", strict) == nil)
        #expect(refusal("[1, 1.5]", strict) == JSONSyntaxError(reason: "only integers are expected", offset: 5))
        #expect(refusal("1e3", strict) == JSONSyntaxError(reason: "only integers are expected", offset: 1))
        #expect(refusal("[99999999999999999999]", strict) == JSONSyntaxError(reason: "an integer outside 64 bits", offset: 1))
    }

    @Test func whiteSpaceIsTheFourOfTheRFC() throws {
        #expect(try parse(" \t\r\n[ \t\r\n1 \t\r\n, \t\r\n{ \t\r\n\"a\" \t\r\n: \t\r\nnull \t\r\n} \t\r\n] \t\r\n")
            == .array([.number(JSONNumber(double: 1, int64: 1)), .object([(name: "a", value: .null)])]))
        #expect(refusal("[1,\u{0B}2]") == JSONSyntaxError(reason: "unexpected byte 0xB", offset: 3))
    }
}
