import Foundation
import Testing
@testable import ModelServing

/// The request reader's JSON: the same values Foundation reads, number arrays kept flat, and
/// every kind of broken text refused with the byte at fault (never a crash).
@Suite struct JSONReaderTests {
    private func read(_ text: String) throws -> JSONValue {
        try Array(text.utf8).withUnsafeBytes { try JSONReader.read($0) }
    }

    @Test func valuesAsFoundationReadsThem() throws {
        let text = #"{"a": [1, -2.5, 3e2, 0.125E-1, 123456789012345678], "b": {"c": [true, false, null]}, "#
            + #""s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "e": [], "o": {}, "mixed": [1, "two", [3, 4]]}"#
        let value = try read(text)
        let foundation = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(value["a"] == .numbers([1, -2.5, 300, 0.0125, 1.2345678901234568e17]))
        #expect(value["b"]?["c"] == .array([.bool(true), .bool(false), .null]))
        #expect(value["s"] == .string(try #require(foundation["s"] as? String)))
        #expect(value["e"] == .array([]) && value["o"] == .object([:]))
        #expect(value["mixed"] == .array([.number(1), .string("two"), .numbers([3, 4])]))
    }

    @Test(arguments: [1, 16, 150_528])
    func numberArraysOfEverySize(count: Int) throws {
        let numbers = (0..<count).map { Double($0 % 256) }
        let text = "[" + numbers.map { String(Int($0)) }.joined(separator: ", ") + "]"
        #expect(try read(text) == .numbers(numbers))
    }

    @Test(arguments: ["", "{", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\":}", "01", "-", "1.", "1e", "tru", "\"abc",
                      "\"\\x\"", "\"\\ud800\"", "[1] x", "{\"a\":1,}", "\"\u{01}\""])
    func brokenTextIsRefusedWithItsOffset(text: String) {
        #expect(throws: JSONReader.Failure.self) { try read(text) }
    }

    @Test func nestingIsBounded() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONReader.Failure(reason: "nesting deeper than 64 levels", offset: 64)) { try read(deep) }
        let fine = String(repeating: "[", count: 60) + "1" + String(repeating: "]", count: 60)
        #expect((try? read(fine)) != nil)
    }
}
