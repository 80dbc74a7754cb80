import FixtureSupport
import Foundation
import Testing

/// `modelc predict` run as a user runs it: sources compiled on the fly into
/// a private cache, bundles, every way of giving inputs, and every failure's
/// one line and exit code.
@Suite struct PredictCommandTests {
    static let classifier = "Fixtures/Models/GLMClassifier.mlmodel"
    /// Labels 3, 7, 11: the model's order is not the text order.
    static let intLabels = "Fixtures/Parity/glm_multiclass_ovr_int_labels.mlmodel"

    /// `modelc predict arguments…` with a cache of its own.
    func predict(_ arguments: [String], cache: URL? = nil, input: Data? = nil) throws -> ModelcProcess.Result {
        let cache = try cache ?? Fixtures.temporaryDirectory("predict-cache")
        return try ModelcProcess.run(["predict"] + arguments, environment: ["MODELC_CACHE": cache.path], input: input)
    }

    func object(_ text: Substring) throws -> [String: Any] {
        try #require(Fixtures.parseJSON(String(text)) as? [String: Any], "not a JSON object: \(text)")
    }

    @Test func classifierPrintsTheLabelAndTheTopProbabilities() throws {
        let result = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--top", "2"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "species: 1\n  1  0.6557\n  0  0.3441\n")
        #expect(result.standardError.isEmpty)

        let all = try predict([Self.classifier, "--input", "features=[1,2,3,4]"])
        #expect(all.standardOutput == "species: 1\n  1  0.6557\n  0  0.3441\n  2  0.0003\n")
    }

    @Test func jsonIsOneObjectOfOutputsInTheModelsLabelOrder() throws {
        let result = try predict([Self.intLabels, "--input", "features=[0.5,-1,2,0]", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty)
        let json = try object(lines[0])
        #expect(Array(json.keys) == ["outputs"])
        let outputs = try #require(json["outputs"] as? [String: Any])
        #expect(Set(outputs.keys) == ["digit", "classProbability"])
        let probabilities = try #require(outputs["classProbability"] as? [String: Double])
        #expect(Set(probabilities.keys) == ["3", "7", "11"])
        #expect(abs(probabilities.values.reduce(0, +) - 1) < 1e-12)
        let best = try #require(probabilities.max { $0.value < $1.value }?.key)
        #expect((outputs["digit"] as? Int).map(String.init) == best)
        // Keys in the model's class order, not sorted as text.
        let text = String(lines[0])
        let positions = ["\"3\"", "\"7\"", "\"11\""].compactMap { text.range(of: $0)?.lowerBound }
        #expect(positions.count == 3 && positions == positions.sorted())
        #expect(text.hasPrefix("{\"outputs\": {\"classProbability\": {\"3\": "))
    }

    @Test func inputsFromAJSONFileAndFromStandardInputMatchInputArguments() throws {
        let directory = try Fixtures.temporaryDirectory("predict-inputs")
        let file = directory.appendingPathComponent("case.json")
        try Data(#"{"features": [1, 2, 3, 4]}"#.utf8).write(to: file)
        let expected = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--json"])
        #expect(expected.status == 0)

        let fromFile = try predict([Self.classifier, "--inputs", file.path, "--json"])
        #expect(fromFile.status == 0, "\(fromFile.standardError)")
        #expect(fromFile.standardOutput == expected.standardOutput)

        let fromStandardInput = try predict([Self.classifier, "--inputs", "-", "--json"],
                                            input: Data("{\"features\": [1, 2, 3, 4]}\n{\"features\": [1, 2, 3, 4]}\n".utf8))
        #expect(fromStandardInput.status == 0, "\(fromStandardInput.standardError)")
        #expect(fromStandardInput.standardOutput == expected.standardOutput + expected.standardOutput)
    }

    /// One result per line, in order; a bad line gives its error in its place
    /// (with the file's own line number, blank lines counted) and exit 93.
    @Test func jsonLinesWithABadLineStillPrintTheOthers() throws {
        let directory = try Fixtures.temporaryDirectory("predict-jsonl")
        let file = directory.appendingPathComponent("rows.jsonl")
        try Data("""
            {"features": [1, 2, 3, 4]}

            {"features": [1, 2]}
            not json
            {"features": [0, 0, 0, 0]}
            {"colour": 1}

            """.utf8).write(to: file)
        for threads in ["1", "2"] {
            let result = try predict([Self.classifier, "--inputs", file.path, "--json", "--threads", threads])
            #expect(result.status == 93)
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 5)
            guard lines.count == 5 else { continue }
            #expect(try object(lines[0])["outputs"] != nil)
            #expect(try object(lines[1]) as? [String: String] == ["error": "input \"features\" has shape 2, expected 4"])
            #expect(try object(lines[2]) as? [String: String] == ["error": "feature \"inputs\": \(file.path) line 4: not a JSON object"])
            #expect(try object(lines[3])["outputs"] != nil)
            #expect(try object(lines[4]) as? [String: String]
                    == ["error": "feature \"colour\": the model has no such input (its inputs: \"features\")"])
            #expect(result.standardError.isEmpty)
        }

        let text = try predict([Self.classifier, "--inputs", file.path])
        #expect(text.status == 93)
        #expect(text.standardOutput.components(separatedBy: "species: ").count == 3)
        #expect(text.standardError.hasSuffix("modelc: 3 of 5 cases failed\n"))
    }

    @Test func numpyFileInput() throws {
        let directory = try Fixtures.temporaryDirectory("predict-npy")
        let file = directory.appendingPathComponent("features.npy")
        try Self.npy([1, 2, 3, 4], shape: [1, 4]).write(to: file)
        let expected = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--json"])
        let result = try predict([Self.classifier, "--input", "features=@\(file.path)", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == expected.standardOutput)

        let wrong = directory.appendingPathComponent("three.npy")
        try Self.npy([1, 2, 3], shape: [3]).write(to: wrong)
        let refused = try predict([Self.classifier, "--input", "features=@\(wrong.path)"])
        #expect(refused.status == 93)
        #expect(refused.standardError == "modelc: error: input \"features\" has shape 3, expected 4\n")
    }

    /// A source model is compiled once into $MODELC_CACHE/compiled and reused.
    @Test func sourceIsCompiledIntoTheCacheOnceAndBundlesRunAsTheyAre() throws {
        let cache = try Fixtures.temporaryDirectory("predict-compile-cache")
        let first = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--json"], cache: cache)
        #expect(first.status == 0, "\(first.standardError)")
        let compiled = cache.appendingPathComponent("compiled")
        let entries = try FileManager.default.contentsOfDirectory(atPath: compiled.path)
        #expect(entries.count == 1)
        let bundle = compiled.appendingPathComponent(try #require(entries.first)).appendingPathComponent("GLMClassifier.mlmodelc")
        let manifest = bundle.appendingPathComponent("manifest.json").path
        let before = try FileManager.default.attributesOfItem(atPath: manifest)
        let beforeInode = try #require(before[.systemFileNumber] as? UInt64)
        let beforeDate = try #require(before[.modificationDate] as? Date)

        let second = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--json"], cache: cache)
        #expect(second.standardOutput == first.standardOutput)
        let after = try FileManager.default.attributesOfItem(atPath: manifest)
        #expect(after[.systemFileNumber] as? UInt64 == beforeInode)
        #expect(after[.modificationDate] as? Date == beforeDate)
        #expect(try FileManager.default.contentsOfDirectory(atPath: compiled.path) == entries)

        // The bundle itself, as `modelc compile` writes it, gives the same.
        let directory = try Fixtures.temporaryDirectory("predict-bundle")
        let own = directory.appendingPathComponent("g.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", Self.classifier, own]).status == 0)
        let fromBundle = try predict([own, "--input", "features=[1,2,3,4]", "--json"])
        #expect(fromBundle.status == 0, "\(fromBundle.standardError)")
        #expect(fromBundle.standardOutput == first.standardOutput)
    }

    @Test(arguments: [
        (["features=\"abc\""], "input \"features\" is a string, expected a multi-array of shape 4"),
        (["features=[1,2,3]"], "input \"features\" has shape 3, expected 4"),
        (["features=[[1,2],[3,4]]"], "input \"features\" has shape 2 × 2, expected 4"),
        (["features=[1,2,3,4]", "colour=1"], "feature \"colour\": the model has no such input (its inputs: \"features\")"),
        (["features=[1,true,3,4]"], "feature \"features\": a boolean inside a numeric array"),
    ])
    func badInputFailsWithOneLineAnd93(arguments: [String], message: String) throws {
        let result = try predict([Self.classifier] + arguments.flatMap { ["--input", $0] })
        #expect(result.status == 93)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError == "modelc: error: \(message)\n")
    }

    @Test func missingInputFails93() throws {
        let directory = try Fixtures.temporaryDirectory("predict-missing")
        let file = directory.appendingPathComponent("empty.json")
        try Data("{}".utf8).write(to: file)
        let result = try predict([Self.classifier, "--inputs", file.path])
        #expect(result.status == 93)
        #expect(result.standardError == "modelc: error: input \"features\" is missing (expected a multi-array of shape 4)\n")
        let json = try predict([Self.classifier, "--inputs", file.path, "--json"])
        #expect(json.status == 93)
        #expect(json.standardOutput == "{\"error\": \"input \\\"features\\\" is missing (expected a multi-array of shape 4)\"}\n")
    }

    @Test(arguments: [["--threads", "0"], ["--threads", "many"], ["--top", "0"]])
    func badOptionValueIsAUsageError(options: [String]) throws {
        let result = try predict([Self.classifier, "--input", "features=[1,2,3,4]"] + options)
        #expect(result.status == 64)
        #expect(result.standardError.hasPrefix("modelc: error: invalid value '\(options[1])' for '\(options[0])': expected a positive integer\n"))
    }

    @Test func usageErrors() throws {
        let none = try predict([Self.classifier])
        #expect(none.status == 64)
        #expect(none.standardError.hasPrefix("modelc: error: 'predict' needs inputs (--input NAME=VALUE or --inputs FILE)\n"))
        let both = try predict([Self.classifier, "--input", "features=[1,2,3,4]", "--inputs", "-"])
        #expect(both.status == 64)
        #expect(both.standardError.hasPrefix("modelc: error: options '--input' and '--inputs' exclude each other\n"))
    }

    /// A network runs; a number given for its image input is refused before anything runs.
    @Test func networkImageInputIsChecked93() throws {
        let result = try predict(["Fixtures/Models/ImageClassifier.mlmodel", "--input", "image=1"])
        #expect(result.status == 93)
        #expect(result.standardError.hasPrefix("modelc: error: input \"image\" is a number, expected a RGB image of 16×16"))
        #expect(result.standardError.filter { $0 == "\n" }.count == 1)
    }

    @Test(arguments: RefusedKinds.all)
    func closedKindIsRefused94(kind: String) throws {
        let result = try predict(["Fixtures/Parity/Refused/\(kind).mlmodel", "--input", "x=1"])
        #expect(result.status == 94)
        #expect(result.standardOutput.isEmpty)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(result.standardError.hasPrefix("modelc: error: cannot run \(kind) models: "))
    }

    /// The file named, as given, and nothing left in the cache.
    @Test func unreadableModelFails66() throws {
        let cache = try Fixtures.temporaryDirectory("predict-unreadable")
        let result = try predict(["Fixtures/Models/Missing.mlmodel", "--input", "features=[1]"], cache: cache)
        #expect(result.status == 66)
        #expect(result.standardError == "modelc: error: Fixtures/Models/Missing.mlmodel: cannot read: No such file or directory\n")
        let compiled = cache.appendingPathComponent("compiled").path
        #expect((try? FileManager.default.contentsOfDirectory(atPath: compiled)) ?? [] == [])

        let inputs = try predict([Self.classifier, "--inputs", "/nonexistent/rows.jsonl"], cache: cache)
        #expect(inputs.status == 66)
        #expect(inputs.standardError == "modelc: error: /nonexistent/rows.jsonl: cannot read the inputs file\n")
    }

    @Test func recommenderPrintsSequencesAndInt64KeyedScores() throws {
        let result = try predict(["Fixtures/Models/ItemSimilarityRecommender.mlmodel", "--input", "items=[100]", "--input", "k=2", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "{\"outputs\": {\"recommendations\": [101, 102], \"scores\": {\"101\": 0.9, \"102\": 0.2}}}\n")
    }

    /// A NumPy version 1.0 `.npy` file of little-endian doubles.
    static func npy(_ values: [Double], shape: [Int]) -> Data {
        let shapeText = shape.count == 1 ? "(\(shape[0]),)" : "(" + shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '<f8', 'fortran_order': False, 'shape': \(shapeText), }"
        while (10 + header.utf8.count + 1) % 64 != 0 { header += " " }
        header += "\n"
        var data = Data([0x93] + Array("NUMPY".utf8) + [1, 0])
        data.append(contentsOf: [UInt8(header.utf8.count & 0xFF), UInt8(header.utf8.count >> 8)])
        data.append(contentsOf: Array(header.utf8))
        for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }
}

/// The closed Apple kinds of Fixtures/Parity/Refused.
enum RefusedKinds {
    static let all = ["textClassifier", "wordTagger", "visionFeaturePrint", "soundAnalysisPreprocessing",
                      "gazetteer", "wordEmbedding", "customModel", "linkedModel"]
}
