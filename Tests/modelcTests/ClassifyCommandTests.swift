import FixtureSupport
import Foundation
import Testing

/// `modelc classify` run as a user runs it: the mean-colour fixture shows
/// what each geometry option did, the tiny classifier gives labels, and
/// every failure has its line and exit code while the other images go on.
@Suite struct ClassifyCommandTests {
    static let meanColor = "Fixtures/Models/MeanColor.mlmodel"
    static let classifier = "Fixtures/Models/ImageClassifier.mlmodel"
    static let wide = "Fixtures/Images/wide-bands.png"

    func classify(_ arguments: [String]) throws -> ModelcProcess.Result {
        let cache = try Fixtures.temporaryDirectory("classify-cache")
        return try ModelcProcess.run(["classify"] + arguments, environment: ["MODELC_CACHE": cache.path])
    }

    func objects(_ output: String) throws -> [[String: Any]] {
        try output.split(separator: "\n").map { line in
            try #require(Fixtures.parseJSON(String(line)) as? [String: Any], "not a JSON object: \(line)")
        }
    }

    /// The mean colour a JSON line reports.
    func meanColor(_ object: [String: Any]) throws -> [Double] {
        let observations = try #require(object["observations"] as? [[String: Any]])
        #expect(observations.count == 1 && observations[0]["featureName"] as? String == "meanColor")
        return try #require(observations[0]["featureValue"] as? [Double])
    }

    @Test(arguments: [("center-crop", [0.0, 255, 0]), ("scale-fit", [19.125, 89.25, 19.125]), ("scale-fill", [38.25, 178.5, 38.25])])
    func cropAndScaleOptions(option: String, expected: [Double]) throws {
        let result = try classify([Self.meanColor, Self.wide, "--crop-and-scale", option, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = try objects(result.standardOutput)
        #expect(lines.count == 1 && lines[0]["image"] as? String == Self.wide)
        let found = try meanColor(lines[0])
        #expect(zip(found, expected).allSatisfy { abs($0 - $1) <= 1 }, "\(found)")
    }

    @Test func regionOfInterestIsNormalizedFromTheLowerLeft() throws {
        let image = "Fixtures/Images/top-red-bottom-blue.png"
        let bottom = try objects(classify([Self.meanColor, image, "--roi", "0,0,1,0.5", "--json"]).standardOutput)
        #expect(try meanColor(bottom[0]) == [0, 0, 255])
        let top = try objects(classify([Self.meanColor, image, "--roi", "0,0.5,1,0.5", "--json"]).standardOutput)
        #expect(try meanColor(top[0]) == [255, 0, 0])
        for bad in ["0,0,1", "0,0,1.5,1", "a,b,c,d"] {
            let refused = try classify([Self.meanColor, image, "--roi", bad])
            #expect(refused.status == 64 && refused.standardError.contains("--roi"), "\(bad): \(refused.standardError)")
        }
    }

    @Test func classifiersPrintTheTopLabelsMostConfidentFirst() throws {
        let text = try classify([Self.classifier, Self.wide, "--top", "2"])
        #expect(text.status == 0, "\(text.standardError)")
        let lines = text.standardOutput.split(separator: "\n")
        #expect(lines.count == 3 && lines[0] == Self.wide[...])
        #expect(lines[1].hasPrefix("  0.") && lines[1].hasSuffix("  cat"), "\(lines)")

        let json = try objects(classify([Self.classifier, Self.wide, "--json"]).standardOutput)
        let observations = try #require(json[0]["observations"] as? [[String: Any]])
        #expect(observations.compactMap { $0["identifier"] as? String }.sorted() == ["bird", "cat", "dog"])
        let confidences = observations.compactMap { $0["confidence"] as? Double }
        #expect(confidences == confidences.sorted(by: >) && abs(confidences.reduce(0, +) - 1) < 1e-5)

        let above = try objects(classify([Self.classifier, Self.wide, "--json", "--min-confidence", "0.33"]).standardOutput)
        #expect((above[0]["observations"] as? [[String: Any]])?.count == 1)

        let label = try objects(classify([Self.classifier, Self.wide, "--label", "dog", "--json"]).standardOutput)
        #expect(Set(label[0].keys) == ["image", "label", "confidence"] && label[0]["label"] as? String == "dog")
        let dog = observations.first { $0["identifier"] as? String == "dog" }?["confidence"] as? Double
        #expect(label[0]["confidence"] as? Double == dog)
    }

    @Test func unknownLabelsNameTheModelsLabels() throws {
        let result = try classify([Self.classifier, Self.wide, "--label", "Unsafe"])
        #expect(result.status == 96)
        #expect(result.standardError == "modelc: error: \(Self.classifier): no label \"Unsafe\" (its labels: \"cat\", \"dog\", \"bird\")\n")
        #expect(result.standardOutput.isEmpty)
    }

    @Test func modelsWithoutAnImageAreRefused() throws {
        let result = try classify(["Fixtures/Models/GLMClassifier.mlmodel", Self.wide])
        #expect(result.status == 95)
        #expect(result.standardError.contains("the model takes no image (its inputs: \"features\")"))
    }

    @Test func directoriesAreWalkedAndBadImagesDoNotStopTheOthers() throws {
        let result = try classify([Self.meanColor, "Fixtures/Images", "Fixtures/Images/absent.jpg", "--json"])
        #expect(result.status == 97)
        let lines = try objects(result.standardOutput)
        let names = lines.compactMap { ($0["image"] as? String).map { ($0 as NSString).lastPathComponent } }
        #expect(names == ["not-an-image.png", "tall-bands.png", "top-red-bottom-blue.png", "truncated.png", "wide-bands.png", "absent.jpg"])
        let failed = lines.filter { $0["error"] != nil }.compactMap { $0["image"] as? String }
        #expect(failed.map { ($0 as NSString).lastPathComponent } == ["not-an-image.png", "truncated.png", "absent.jpg"])
        #expect(lines.filter { $0["observations"] != nil }.count == 3)
        #expect((lines.last?["error"] as? String)?.hasPrefix("Fixtures/Images/absent.jpg: ") == true)
        // Without --json the errors go to standard error with a count.
        let text = try classify([Self.meanColor, "Fixtures/Images"])
        #expect(text.status == 97 && text.standardError.hasSuffix("modelc: 2 of 5 images failed\n"), "\(text.standardError)")
    }
}
