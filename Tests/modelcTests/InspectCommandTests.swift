import FixtureSupport
import Foundation
import Testing

extension Fixtures.Entry: CustomTestStringConvertible {}

/// `modelc inspect` run as a user runs it, on every fixture.
@Suite struct InspectCommandTests {
    @Test(arguments: Fixtures.models + Fixtures.broken.filter { $0.facts["readable"] as? Bool == true })
    func jsonMatchesIndex(entry: Fixtures.Entry) throws {
        let result = try ModelcProcess.run(["inspect", "--json", "Fixtures/\(entry.file)"])
        let status = entry.facts["inspectExitCode"] as? Int ?? 0
        #expect(result.status == Int32(status), "\(result.standardError)")
        #expect(result.standardError.isEmpty == (status == 0))
        let json = try #require(Fixtures.parseJSON(result.standardOutput))
        let differences = Fixtures.differences(expected: entry.facts, actual: json)
        #expect(differences.isEmpty, "\(entry.file):\n\(differences.joined(separator: "\n"))")
    }

    @Test(arguments: Fixtures.models)
    func humanOutputNamesTheModel(entry: Fixtures.Entry) throws {
        let result = try ModelcProcess.run(["inspect", "Fixtures/\(entry.file)"])
        #expect(result.status == 0)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first == "Fixtures/\(entry.file)")
        let type = try #require(entry.facts["modelType"] as? String)
        #expect(lines.dropFirst().first == "  type                    \(type)")
        for case let input as [String: Any] in entry.facts["inputs"] as? [Any] ?? [] {
            let name = try #require(input["name"] as? String)
            #expect(lines.contains { $0.hasPrefix("    \(name) ") }, "input \(name) not listed")
        }
    }

    /// The whole human report of one model, compared with a reviewed copy.
    @Test func humanReportOfImageClassifier() throws {
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models/ImageClassifier.mlmodel"])
        let golden = Fixtures.packageRoot.appendingPathComponent("Tests/modelcTests/Expected/inspect-ImageClassifier.txt")
        #expect(result.standardOutput == (try String(contentsOf: golden, encoding: .utf8)))
    }

    /// Each unreadable input: its own exit code and one line on stderr that
    /// names the file, nothing on stdout.
    @Test(arguments: [
        ("Broken/not-protobuf.mlmodel", 65, "not a Core ML model: the file is a PNG image"),
        ("Broken/does-not-exist.mlmodel", 66, "cannot read: No such file or directory"),
        ("Broken/empty.mlmodel", 67, "empty file (0 bytes), not a Core ML model"),
        ("Broken/truncated.mlmodel", 68, "truncated Core ML model: field neuralNetworkClassifier at the top level"),
        ("Broken/bad-utf8.mlmodel", 69, "malformed Core ML model: string field name in description.input is not valid UTF-8"),
        ("Broken/deep-nesting.mlmodel", 69, "malformed Core ML model: messages nest deeper than 100 levels"),
        ("Broken/unknown-model-type.mlmodel", 70, "unknown model type (field 9999)"),
        ("Broken/not-a-package.mlpackage", 71, "not an .mlpackage: it has no Manifest.json"),
        ("Broken/escaping-path.mlpackage", 72, "package names a path outside itself: \"../../../../etc/passwd\""),
    ])
    func brokenInputFailsCleanly(file: String, status: Int32, message: String) throws {
        for arguments in [["inspect", "Fixtures/\(file)"], ["inspect", "--json", "Fixtures/\(file)"]] {
            let result = try ModelcProcess.run(arguments)
            #expect(result.status == status)
            #expect(result.standardOutput.isEmpty)
            #expect(result.standardError.hasPrefix("modelc: error: Fixtures/\(file): \(message)"), "\(result.standardError)")
            #expect(result.standardError.filter { $0 == "\n" }.count == 1, "not one line: \(result.standardError)")
        }
    }

    /// A package whose weight file is missing, short, or referenced past its
    /// end: described (text and JSON) with each problem named, one line on
    /// stderr, exit 76 (invalid model); compile refuses it the same way.
    @Test(arguments: [
        ("weights-missing", 4, "conv1_weight_0_quantized.data",
         "@model_path/weights/weight.bin at offset 64: open failed: No such file or directory"),
        ("weights-short", 1, "dense1_bias_0",
         "@model_path/weights/weight.bin at offset 2048: the record claims 64 bytes at 2112, past the end of the file (2144 bytes)"),
        ("weights-out-of-range", 1, "conv1_weight_0_quantized.data",
         "@model_path/weights/weight.bin at offset 2240: no record fits there (the file has 2176 bytes)"),
    ])
    func brokenWeightFileIsReported(name: String, count: Int, weight: String, problem: String) throws {
        let file = "Fixtures/Broken/\(name).mlpackage"
        let references = count == 1 ? "1 unusable weight file reference" : "\(count) unusable weight file references"
        let more = count == 1 ? "" : " (and \(count - 1) more)"
        let stderr = "modelc: error: \(file): \(references): \(weight): \(problem)\(more)\n"

        let text = try ModelcProcess.run(["inspect", file])
        #expect(text.status == 76)
        #expect(text.standardError == stderr)
        let row = text.standardOutput.split(separator: "\n").first { $0.hasPrefix("    \(weight) ") && $0.contains("error: ") }
        #expect(row?.hasSuffix("error: \(problem)") == true, "\(text.standardOutput)")
        #expect(text.standardOutput.split(separator: "\n").filter { $0.contains("  error: ") }.count == count)

        let json = try ModelcProcess.run(["inspect", "--json", file])
        #expect(json.status == 76)
        #expect(json.standardError == stderr)
        let summary = try #require(Fixtures.parseJSON(json.standardOutput) as? [String: Any])
        let problems = try #require(summary["weightFileProblems"] as? [String])
        #expect(problems.count == count)
        #expect(problems.first == "\(weight): \(problem)")
        let blobs = try #require(summary["blobWeights"] as? [[String: Any]])
        #expect(blobs.filter { $0["problem"] != nil }.count == count)

        let directory = try Fixtures.temporaryDirectory("inspect-broken-weights")
        let compile = try ModelcProcess.run(["compile", file, directory.appendingPathComponent("b.mlmodelc").path])
        #expect(compile.status == 76)
        #expect(compile.standardError.contains(" refers to \(problem)"), "\(compile.standardError)")
    }

    /// Every blob of an iOS 18 compressed program is listed, operation inputs included.
    @Test func compressedProgramListsEveryWeight() throws {
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models/Int4BlockwiseProgram.mlpackage"])
        #expect(result.status == 0)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains("  weight file constants (4, 1.8 KB)"))
        for name in ["conv1_weight_0_quantized.data", "dense1_weight_0_quantized.data", "dense1_weight_0_quantized.scale", "dense1_bias_0"] {
            #expect(lines.contains { $0.hasPrefix("    \(name) ") }, "\(name) not listed")
        }
        #expect(lines.contains { $0.hasPrefix("    conv1_weight_0_quantized.data  INT4      2,304 values") })
    }

    @Test func directoryThatIsAFileTreeButNotAPackage() throws {
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models"])
        #expect(result.status == 71)
        #expect(result.standardError == "modelc: error: Fixtures/Models: not an .mlpackage: it has no Manifest.json\n")
    }
}
