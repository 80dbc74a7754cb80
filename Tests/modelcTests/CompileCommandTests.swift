import FixtureSupport
import Foundation
import Testing

/// `modelc compile` and `modelc decompile` run as a user runs them.
@Suite struct CompileCommandTests {
    @Test func compileThenUpToDateThenForce() throws {
        let directory = try Fixtures.temporaryDirectory("cli-compile")
        let output = directory.appendingPathComponent("ImageClassifier.mlmodelc").path
        let first = try ModelcProcess.run(["compile", "Fixtures/Models/ImageClassifier.mlmodel", output])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.wholeMatch(of: /.*: compiled \(5 files, [0-9.]+ KB, 9 weights in 9 blobs\)\n/) != nil,
                "\(first.standardOutput)")
        let second = try ModelcProcess.run(["compile", "Fixtures/Models/ImageClassifier.mlmodel", output])
        #expect(second.standardOutput == "\(output): up to date\n")
        let forced = try ModelcProcess.run(["compile", "--force", "--json", "Fixtures/Models/ImageClassifier.mlmodel", output])
        let json = try #require(Fixtures.parseJSON(forced.standardOutput) as? [String: Any])
        #expect(json["outcome"] as? String == "compiled")
        #expect(json["weights"] as? Int == 9)
        #expect((json["sourceSHA256"] as? String)?.count == 64)
    }

    @Test func fp16PrintsTheLargestError() throws {
        let directory = try Fixtures.temporaryDirectory("cli-fp16")
        let result = try ModelcProcess.run(["compile", "--fp16", "Fixtures/Models/ImageClassifier.mlmodel",
                                            directory.appendingPathComponent("m.mlmodelc").path])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("\nfloat16: largest relative error "))
    }

    @Test(arguments: [
        ("Broken/truncated.mlmodel", 68), ("Broken/not-protobuf.mlmodel", 65), ("Broken/empty.mlmodel", 67),
        ("Broken/escaping-path.mlpackage", 72), ("Broken/missing.mlmodel", 66), ("Broken/unknown-model-type.mlmodel", 70),
        ("Broken/deep-nesting.mlmodel", 69), ("Broken/bad-utf8.mlmodel", 69), ("Broken/not-a-package.mlpackage", 71),
    ])
    func unreadableSourceFailsWithItsCode(file: String, status: Int32) throws {
        let directory = try Fixtures.temporaryDirectory("cli-bad-source")
        let output = directory.appendingPathComponent("m.mlmodelc").path
        let result = try ModelcProcess.run(["compile", "Fixtures/\(file)", output])
        #expect(result.status == status)
        #expect(result.standardError.hasPrefix("modelc: error: Fixtures/\(file): "))
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    /// Each semantically broken fixture: its one precise error from --check
    /// (on stdout), and from compile (on stderr) with nothing written.
    @Test(arguments: [
        ("wrong-weight-count", #"layer 0 "conv1" (convolution): weights hold 215 values, expected 216 = 8 output channels × 3 kernel channels × 3 × 3"#),
        ("undefined-layer-input", #"layer 8 "fc" (innerProduct): input "nonexistent_blob" is neither a model input nor an output of an earlier layer"#),
        ("duplicate-output", #"layer 1 "dense_b" (innerProduct): output "hidden" is already produced by layer 0 "dense_a""#),
    ])
    func invalidModelIsRejectedWithEveryError(name: String, message: String) throws {
        let file = "Fixtures/Broken/\(name).mlmodel"
        let check = try ModelcProcess.run(["compile", "--check", file])
        #expect(check.status == 76)
        #expect(check.standardOutput == "\(file): error: \(message)\n\(file): invalid (1 error, 0 warnings)\n")

        let directory = try Fixtures.temporaryDirectory("cli-invalid")
        let output = directory.appendingPathComponent("m.mlmodelc").path
        let compile = try ModelcProcess.run(["compile", file, output])
        #expect(compile.status == 76)
        #expect(compile.standardOutput.isEmpty)
        #expect(compile.standardError == "\(file): \(message)\nmodelc: error: \(file): 1 validation error; nothing was written\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)

        let json = try ModelcProcess.run(["compile", "--check", "--json", file])
        let object = try #require(Fixtures.parseJSON(json.standardOutput) as? [String: Any])
        #expect(object["valid"] as? Bool == false)
        #expect(object["errors"] as? Int == 1)
        let diagnostic = try #require((object["diagnostics"] as? [[String: Any]])?.first)
        #expect(diagnostic["severity"] as? String == "error")
        let separator = try #require(message.range(of: ": "))
        #expect(diagnostic["location"] as? [String] == [String(message[..<separator.lowerBound])])
        #expect(diagnostic["message"] as? String == String(message[separator.upperBound...]))
    }

    @Test(arguments: Fixtures.models)
    func everyValidFixturePassesCheck(entry: Fixtures.Entry) throws {
        let result = try ModelcProcess.run(["compile", "--check", "Fixtures/\(entry.file)"])
        #expect(result.status == 0)
        #expect(result.standardOutput == "Fixtures/\(entry.file): valid (0 errors, 0 warnings)\n")
    }

    @Test func checkTakesNoOutputAndCompileNeedsOne() throws {
        let extra = try ModelcProcess.run(["compile", "--check", "Fixtures/Models/GLMRegressor.mlmodel", "out.mlmodelc"])
        #expect(extra.status == 64)
        #expect(extra.standardError.hasPrefix("modelc: error: unexpected argument 'out.mlmodelc' for 'compile'\n"))
        let missing = try ModelcProcess.run(["compile", "Fixtures/Models/GLMRegressor.mlmodel"])
        #expect(missing.status == 64)
        #expect(missing.standardError.hasPrefix("modelc: error: 'compile' needs OUTPUT\n"))
    }

    /// A compile that fails early exits cleanly every time: the process must
    /// not end while the source is still being hashed on another thread (it
    /// crashed in about one run in three before).
    @Test func earlyFailureExitsCleanlyEveryTime() throws {
        let directory = try Fixtures.temporaryDirectory("cli-early-failure")
        for file in ["Broken/deep-nesting.mlmodel", "Broken/wrong-weight-count.mlmodel"] {
            for _ in 0..<15 {
                let result = try ModelcProcess.run(["compile", "Fixtures/\(file)", directory.appendingPathComponent("m.mlmodelc").path])
                #expect([69, 76].contains(result.status), "\(file): exit \(result.status): \(result.standardError)")
            }
        }
    }

    @Test func outputThatIsAFileIsRefused() throws {
        let directory = try Fixtures.temporaryDirectory("cli-file-output")
        let output = directory.appendingPathComponent("notes.txt").path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: output))
        let result = try ModelcProcess.run(["compile", "Fixtures/Models/GLMRegressor.mlmodel", output])
        #expect(result.status == 73)
        #expect(result.standardError == "modelc: error: \(output): exists and is not a modelc bundle; remove it or choose another output path\n")
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "keep me")
    }

    @Test func decompileAndItsFailures() throws {
        let directory = try Fixtures.temporaryDirectory("cli-decompile")
        let bundle = directory.appendingPathComponent("p.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", "Fixtures/Models/MLProgram.mlpackage", bundle]).status == 0)
        let package = directory.appendingPathComponent("p.mlpackage").path
        let result = try ModelcProcess.run(["decompile", bundle, package])
        #expect(result.status == 0)
        #expect(result.standardOutput == "\(package): mlpackage with 4 weights restored\n")
        #expect(try ModelcProcess.run(["inspect", package]).status == 0)

        let again = try ModelcProcess.run(["decompile", bundle, package])
        #expect(again.status == 80)
        #expect(again.standardError == "modelc: error: \(package): already exists; choose another output path\n")

        let plain = try ModelcProcess.run(["decompile", bundle, directory.appendingPathComponent("p.mlmodel").path])
        #expect(plain.status == 64)

        let notBundle = try ModelcProcess.run(["decompile", "Fixtures/Models", directory.appendingPathComponent("x.mlmodel").path])
        #expect(notBundle.status == 78)
        #expect(notBundle.standardError == "modelc: error: Fixtures/Models: not a modelc bundle (no manifest.json)\n")

        // A bundle from a newer modelc is refused, saying so.
        let manifestPath = bundle + "/manifest.json"
        let manifest = try String(contentsOfFile: manifestPath, encoding: .utf8)
        try manifest.replacingOccurrences(of: "\"formatVersion\" : 1", with: "\"formatVersion\" : 7")
            .write(toFile: manifestPath, atomically: true, encoding: .utf8)
        let newer = try ModelcProcess.run(["decompile", bundle, directory.appendingPathComponent("y.mlpackage").path])
        #expect(newer.status == 79)
        #expect(newer.standardError.contains("bundle format version 7 is newer than this modelc reads (1); upgrade modelc"))
    }

    /// A compile killed at any moment leaves the previous bundle or the new
    /// one, complete either way, and the next compile cleans up after it.
    @Test(.timeLimit(.minutes(2)), arguments: [50, 200, 600])
    func killedCompileNeverLeavesAHalfBundle(delayMilliseconds: Int) throws {
        let directory = try Fixtures.temporaryDirectory("cli-kill")
        let source = directory.appendingPathComponent("big.mlmodel").path
        // Four 1024 × 1024 float32 layers: 16 MB of weights.
        let layer: (UInt64, UInt64, [Float]) = (1024, 1024, (0..<(1024 * 1024)).map { Float($0 % 977) / 977 })
        try Data(Wire.innerProductNetwork(layers: [layer, layer, layer, layer])).write(to: URL(fileURLWithPath: source))
        let output = directory.appendingPathComponent("big.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", "Fixtures/Models/GLMRegressor.mlmodel", output]).status == 0)

        let process = Process()
        process.executableURL = ModelcProcess.executable
        process.arguments = ["compile", "--force", source, output]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(useconds_t(delayMilliseconds * 1000))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()

        let inspect = try ModelcProcess.run(["decompile", output, directory.appendingPathComponent("check.mlmodel").path])
        #expect(inspect.status == 0, "bundle unusable after kill: \(inspect.standardError)")
        let rerun = try ModelcProcess.run(["compile", source, output])
        #expect(rerun.status == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".staging-") }
        #expect(leftovers.isEmpty)
    }
}
