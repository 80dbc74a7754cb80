import FixtureSupport
import Foundation
import Testing

/// `modelc verify` on good and damaged bundles. Each runs in its own child
/// process, so a crash (SIGBUS on a cut file, a bad pointer) fails the test
/// instead of the test run.
@Suite struct VerifyCommandTests {
    func compiledBundle(_ label: String) throws -> String {
        let directory = try Fixtures.temporaryDirectory(label)
        let bundle = directory.appendingPathComponent("m.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", "Fixtures/Models/MLProgram.mlpackage", bundle]).status == 0)
        return bundle
    }

    @Test func goodBundleIsOK() throws {
        let bundle = try compiledBundle("verify-ok")
        let result = try ModelcProcess.run(["verify", bundle])
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("\(bundle): ok (6 files, "))
        #expect(result.standardOutput.hasSuffix("compiled from MLProgram.mlpackage by modelc 0.1.0)\n"))
    }

    /// Damage, the exit code, and the start of the one-line error.
    @Test(arguments: [
        ("truncate weight.bin", 78, "weights/weight.bin: "),
        ("flip a data byte", 78, "weights/weight.bin: SHA-256 "),
        ("flip a record sentinel", 78, "no blob record at offset 64"),
        ("newer format", 79, "bundle format version 9 is newer than this modelc reads (1)"),
        ("remove model.spec", 78, "model.spec: missing from the bundle"),
        ("garbage manifest", 78, "manifest.json: malformed"),
        ("garbage index", 78, "weights/index.json: malformed"),
    ])
    func damagedBundleFailsCleanly(damage: String, status: Int32, message: String) throws {
        let bundle = try compiledBundle("verify-damage")
        let weights = bundle + "/weights/weight.bin"
        switch damage {
        case "truncate weight.bin":
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: weights))
            try handle.truncate(atOffset: 1000)
            try handle.close()
        case "flip a data byte":
            try flip(weights, at: 200)
        case "flip a record sentinel":
            try flip(weights, at: 64)
        case "newer format":
            let manifest = bundle + "/manifest.json"
            try String(contentsOfFile: manifest, encoding: .utf8)
                .replacingOccurrences(of: "\"formatVersion\" : 1", with: "\"formatVersion\" : 9")
                .write(toFile: manifest, atomically: true, encoding: .utf8)
        case "remove model.spec":
            try FileManager.default.removeItem(atPath: bundle + "/model.spec")
        case "garbage manifest":
            try Data("{ not json".utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        default:
            let index = bundle + "/weights/index.json"
            let size = try FileManager.default.attributesOfItem(atPath: index)[.size] as? Int ?? 0
            try Data(repeating: 0x7B, count: size).write(to: URL(fileURLWithPath: index))
        }
        let result = try ModelcProcess.run(["verify", bundle])
        #expect(result.status == status, "\(damage): \(result.standardError)")
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("modelc: error: "))
        #expect(result.standardError.contains(message), "\(result.standardError)")
        #expect(result.standardError.filter { $0 == "\n" }.count == 1)
    }

    func flip(_ path: String, at offset: Int) throws {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[offset] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
    }
}
