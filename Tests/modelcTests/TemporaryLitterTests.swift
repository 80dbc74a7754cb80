import FixtureSupport
import Foundation
import Testing

/// Nothing left behind in the temporary directory. The toolchain leaves an
/// empty `TemporaryDirectory.XXXXXX` there on every `swift` call (SwiftPM and
/// the swift driver); modelc's commands must leave nothing, and the
/// Makefile's `swift` (Scripts/swift.sh) keeps the toolchain's out of TMPDIR.
@Suite struct TemporaryLitterTests {
    static func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    @Test func commandsLeaveNothingInTheTemporaryDirectory() throws {
        let work = try Fixtures.temporaryDirectory("litter").path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let temporary = work + "/tmp"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        try GeneratedImages.write(labels: ["blue", "red"], count: 10, into: work + "/data", seed: 3)
        let environment = ["TMPDIR": temporary, "MODELC_CACHE": work + "/cache"]
        let commands: [[String]] = [
            ["compile", "Fixtures/Models/GLMClassifier.mlmodel", work + "/glm.mlmodelc"],
            ["decompile", work + "/glm.mlmodelc", work + "/glm.mlmodel"],
            ["verify", work + "/glm.mlmodelc"],
            ["inspect", "Fixtures/Models/GLMClassifier.mlmodel", "--json"],
            ["predict", "Fixtures/Models/GLMClassifier.mlmodel", "--input", "features=[1,2,3,4]"],
            ["train", "image-classifier", work + "/data", "--base", "Fixtures/Models/ImageFeatureBase.mlmodel",
             "-o", work + "/colors.mlmodel"],
            ["train", "image-classifier", work + "/data", "--base", "Fixtures/Models/ImageFeatureBaseProgram.mlpackage",
             "-o", work + "/colors.mlpackage"],
            ["evaluate", work + "/colors.mlpackage", work + "/data", "--json"],
        ]
        for command in commands {
            let result = try ModelcProcess.run(command, environment: environment, timeout: 120)
            #expect(result.status == 0, "\(command.joined(separator: " ")): \(result.standardError)")
            #expect(Self.entries(temporary).isEmpty, "after modelc \(command[0]): \(Self.entries(temporary))")
        }

        let scene = try FetchCommandScene("litter-fetch")
        let fetched = try scene.fetch([scene.url(), "--quiet"], environment: ["TMPDIR": temporary])
        #expect(fetched.status == 0, "\(fetched.standardError)")
        #expect(Self.entries(temporary).isEmpty, "after modelc fetch: \(Self.entries(temporary))")
    }

    @Test func theMakefilesSwiftLeavesNoTemporaryDirectory() throws {
        let temporary = try Fixtures.temporaryDirectory("litter-swift").path
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["Scripts/swift.sh", "--version"]
        process.currentDirectoryURL = Fixtures.packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary]) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(Self.entries(temporary).isEmpty, "\(Self.entries(temporary))")
    }
}
