import FixtureSupport
import Foundation
import Testing

/// `make run`'s script (Scripts/run-demo.sh) with the modelc under test:
/// the loopback server, fetch, compile, train, classify and draw all happen,
/// the sample photos get their colours, and the last line names both pages.
@Suite struct MakeRunTests {
    @Test(.timeLimit(.minutes(2))) func theWholePathRunsOffline() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["Scripts/run-demo.sh"]
        process.currentDirectoryURL = Fixtures.packageRoot
        let run = try Fixtures.temporaryDirectory("make-run")
        defer { try? FileManager.default.removeItem(at: run) }
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["MODELC": ModelcProcess.executable.path, "RUN_DIR": run.path]) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains(": compiled\n"))
        #expect(text.contains("modelc: report written to "))
        // Each sample photo's ball colour comes first.
        for (photo, label) in [("ball-1", "red"), ("ball-2", "blue"), ("ball-3", "yellow"), ("ball-4", "green")] {
            let block = try #require(text.range(of: "Fixtures/Samples/\(photo).png\n  "))
            let first = text[block.upperBound...].prefix { $0 != "\n" }
            #expect(first.hasSuffix("  \(label)"), "\(photo): \(first)")
        }
        #expect(text.contains("Fixtures/Samples/ball-1.png: red 0."))
        let last = try #require(text.split(separator: "\n").last)
        #expect(last == "graph picture: \(run.path)/graph.html   training report: \(run.path)/report.html")
        for page in ["graph.html", "report.html"] {
            #expect(FileManager.default.fileExists(atPath: run.appendingPathComponent(page).path))
        }
    }
}
