import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// The model kinds whose parameters are closed Apple data are refused when
/// loading, naming the kind and why (Fixtures/Parity/Refused, made by
/// Fixtures/parity.py).
@Suite("Closed Apple model kinds are refused at load")
struct RefusedModelTests {
    static let natural = "its parameters are Apple's closed Natural Language data, which only Apple's frameworks can read"
    static let refused: [(kind: String, reason: String)] = [
        ("textClassifier", natural),
        ("wordTagger", natural),
        ("gazetteer", natural),
        ("wordEmbedding", natural),
        ("visionFeaturePrint", "it is Apple's built-in Vision feature extractor, whose network ships only with Apple's systems"),
        ("soundAnalysisPreprocessing", "it is Apple's built-in SoundAnalysis front end, which ships only with Apple's systems"),
        ("customModel", "a custom model names an Objective-C class that implements it; there is no such class here"),
        ("linkedModel", "a linked model refers to another compiled model on an Apple device"),
    ]

    @Test("every closed kind has a fixture")
    func everyKindHasAFixture() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("Parity/Refused"))
        #expect(Set(names) == Set(Self.refused.map { "\($0.kind).mlmodel" }))
    }

    @Test("Model(contentsOf:) throws unsupportedModel with the kind and the reason", arguments: refused.map(\.kind))
    func refusedAtLoad(kind: String) throws {
        let reason = try #require(Self.refused.first { $0.kind == kind }?.reason)
        let path = Fixtures.path("Parity/Refused/\(kind).mlmodel")
        #expect(throws: ModelError.runtime(.unsupportedModel(kind: kind, reason: reason))) {
            _ = try Model(contentsOf: path)
        }
        do {
            _ = try Model(contentsOf: path)
        } catch {
            #expect(error.description == "cannot run \(kind) models: \(reason)")
            #expect(!error.description.contains("\n"))
        }
    }
}

/// The item-similarity recommender fixture of Fixtures/Models, worked by hand:
/// sim(100, 101) = 0.9, sim(100, 102) = 0.2, sim(102, 103) = 0.7, no adjustments.
@Suite("Item similarity recommender")
struct ItemSimilarityRecommenderTests {
    let model: Model

    init() throws {
        model = try Model(contentsOf: Fixtures.path("Models/ItemSimilarityRecommender.mlmodel"))
    }

    @Test func recommendsEveryOtherItemByScore() throws {
        let outputs = try model.prediction(from: ["items": .sequence(.int64s([100]))])
        #expect(outputs["recommendations"] == .sequence(.int64s([101, 102, 103])))
        #expect(outputs["scores"] == .dictionary(.int64s([101: 0.9, 102: 0.2, 103: 0])))
    }

    @Test func ratesSeveralItemsAndLimitsTheCount() throws {
        let outputs = try model.prediction(from: ["items": .sequence(.int64s([100, 102])), "k": .int64(1)])
        // 103: 0.7 from 102; 101: 0.9 from 100. Both inputs are excluded.
        #expect(outputs["recommendations"] == .sequence(.int64s([101])))
        let all = try model.prediction(from: ["items": .sequence(.int64s([100, 102]))])
        #expect(all["recommendations"] == .sequence(.int64s([101, 103])))
    }

    @Test func unknownItemsAreIgnoredAndNoItemsGiveZeros() throws {
        let outputs = try model.prediction(from: ["items": .sequence(.int64s([7]))])
        #expect(outputs["recommendations"] == .sequence(.int64s([100, 101, 102, 103])))
        #expect(outputs["scores"] == .dictionary(.int64s([100: 0, 101: 0, 102: 0, 103: 0])))
    }

    @Test func negativeCountIsRefused() throws {
        #expect(throws: RuntimeError.invalidValue(feature: "k", detail: "the number of recommendations must be a non-negative integer")) {
            _ = try model.prediction(from: ["items": .sequence(.int64s([100])), "k": .int64(-1)])
        }
    }

    @Test func stringIdsForAnInt64ModelAreTheWrongType() throws {
        #expect(throws: RuntimeError.self) {
            _ = try model.prediction(from: ["items": .sequence(.strings(["100"]))])
        }
    }
}
