import FixtureSupport
import Foundation
import Testing

/// The fuzz target's plain build replays every fixture and every saved fuzz
/// finding; a crash in any of them fails the test (it runs in a child process).
@Suite struct FuzzReplayTests {
    @Test(.timeLimit(.minutes(2))) func everyFixtureAndFindingReplaysCleanly() throws {
        var inputs: [String] = []
        for folder in ["Models", "Broken", "Fuzz"] {
            let enumerator = FileManager.default.enumerator(atPath: Fixtures.path(folder))
            while let relative = enumerator?.nextObject() as? String {
                if relative.hasSuffix(".mlmodel") { inputs.append(Fixtures.path("\(folder)/\(relative)")) }
            }
        }
        #expect(inputs.count >= 30)
        let process = Process()
        process.executableURL = ModelcProcess.executable.deletingLastPathComponent().appendingPathComponent("ModelFuzzer")
        process.arguments = inputs
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        #expect(text == "replayed \(inputs.count) inputs\n")
    }
}
