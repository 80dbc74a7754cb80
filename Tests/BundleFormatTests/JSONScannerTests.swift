import FixtureSupport
import Foundation
import ModelCompiler
import Testing
@testable import BundleFormat

@Suite struct JSONScannerTests {
    func parse(_ text: String) -> JSONScanner.Value? {
        Array(text.utf8).withUnsafeBytes { try? JSONScanner.parse($0) }
    }

    @Test func valuesAndEscapes() {
        #expect(parse(#"{"a": [1, -2, true, false, null], "b": {"c": "d"}}"#)
            == .object([("a", .array([.integer(1), .integer(-2), .bool(true), .bool(false), .null])),
                        ("b", .object([("c", .string("d"))]))]))
        #expect(parse(#""tab\tquote\"slash\/back\\nl\n""#) == .string("tab\tquote\"slash/back\\nl\n"))
        #expect(parse(#""\u00e9\u20ac\ud83d\ude00""#) == .string("é€😀"))
        #expect(parse("\"größe\"") == .string("größe"))
        #expect(parse("  [ ]  ") == .array([]))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\" 1}", "1.5", "1e3", "\"unterminated", "\"\\x\"", "\"\\ud83d\"", "tru", "[1] 2",
        "\"line\nbreak\"", "99999999999999999999", "{\"a\":1,}", "{\"a\": 1, \"a\": 2}",
    ])
    func malformedTextIsRefused(text: String) {
        #expect(parse(text) == nil, "\(text)")
    }

    @Test func invalidUTF8IsRefused() {
        #expect([0x22, 0xFF, 0xFE, 0x22].withUnsafeBytes { try? JSONScanner.parse($0) } == nil)
    }

    @Test func nestingIsBounded() {
        #expect(parse(String(repeating: "[", count: 31) + String(repeating: "]", count: 31)) != nil)
        #expect(parse(String(repeating: "[", count: 100_000)) == nil)
    }

    /// The documents the compiler writes read the same as with Foundation.
    @Test(arguments: ["Models/ImageClassifier.mlmodel", "Models/MLProgram.mlpackage", "Models/ItemSimilarityRecommender.mlmodel"])
    func bundleDocumentsReadLikeFoundation(file: String) throws {
        let directory = try Fixtures.temporaryDirectory("scanner")
        let bundle = directory.appendingPathComponent("b.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path(file), to: bundle)
        let indexData = try Data(contentsOf: URL(fileURLWithPath: bundle + "/weights/index.json"))
        #expect(indexData.withUnsafeBytes(WeightIndex.read) == (try BundleJSON.decode(WeightIndex.self, from: indexData)))
        let manifestData = try Data(contentsOf: URL(fileURLWithPath: bundle + "/manifest.json"))
        #expect(manifestData.withUnsafeBytes(BundleManifest.read) == (try BundleJSON.decode(BundleManifest.self, from: manifestData)))
        let metadata = try Data(contentsOf: URL(fileURLWithPath: bundle + "/metadata.json"))
        let facts = try #require(metadata.withUnsafeBytes(BundleMetadataFacts.read))
        let object = try #require((try JSONSerialization.jsonObject(with: metadata) as? [[String: Any]])?.first)
        #expect(facts.specificationVersion == object["specificationVersion"] as? Int)
        #expect("MLModelType_" + facts.modelType == (object["modelType"] as? [String: Any])?["name"] as? String)
    }
}
