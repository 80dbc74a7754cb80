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

    @Test func directoryThatIsAFileTreeButNotAPackage() throws {
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models"])
        #expect(result.status == 71)
        #expect(result.standardError == "modelc: error: Fixtures/Models: not an .mlpackage: it has no Manifest.json\n")
    }
}
