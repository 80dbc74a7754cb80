import FixtureSupport
import Foundation
import SystemIO
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

    /// A bundle whose manifest is right but whose program refers to blobs its
    /// weight file does not hold as the reference says (what a compiler that
    /// lost weights wrote, issue 10): refused, the reference named.
    @Test(arguments: [
        ("model.spec", "1280", "1281", "weight reference dense1_weight_0_quantized.data (mlProgram.functions[main]",
         "@model_path/weights/weight.bin at offset 1281: no blob record there"),
        ("model.spec", "1280", "1856", "weight reference dense1_weight_0_quantized.data (",
         "a INT4 tensor but its blob at offset 1856 holds float32 data"),
        ("model.spec", "1280", "16000", "weight reference dense1_weight_0_quantized.data (",
         "at offset 16000: no record fits there"),
        ("model.mil", "1280", "1856", "model.mil: weight reference line ", "tensor<int4, [16, 64]>: its blob at offset 1856 holds float32 data"),
        ("model.mil", "1280", "9280", "model.mil: weight reference line ", "at offset 9280: no record fits there"),
        ("model.mil", "1856", "2048", "model.mil: weight reference line ",
         "tensor<fp32, [16, 2]>: its blob at offset 2048 holds 64 bytes, expected 128 = 32 values × 32 bits"),
    ])
    func unresolvedReferenceIsRefused(file: String, from: String, to: String, reference: String, problem: String) throws {
        let directory = try Fixtures.temporaryDirectory("verify-references")
        let bundle = directory.appendingPathComponent("q.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", "Fixtures/Models/Int4BlockwiseProgram.mlpackage", bundle]).status == 0)
        let path = bundle + "/" + file
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let damaged: [UInt8]
        if file == "model.mil" {
            damaged = Array(String(decoding: original, as: UTF8.self)
                .replacingOccurrences(of: "offset = uint64(\(from)))", with: "offset = uint64(\(to)))").utf8)
        } else {
            // The BlobFileValue: fileName (field 1), then offset (field 2, a varint of the same length).
            let name = Array("@model_path/weights/weight.bin".utf8)
            let old = [0x0A, UInt8(name.count)] + name + [0x10] + varint(UInt64(from) ?? 0)
            let new = [0x0A, UInt8(name.count)] + name + [0x10] + varint(UInt64(to) ?? 0)
            try #require(old.count == new.count)
            damaged = replacing(old, with: new, in: original)
        }
        try #require(damaged != original && damaged.count == original.count)
        try Data(damaged).write(to: URL(fileURLWithPath: path))
        // Keep the manifest true to the damaged file: only the reference is wrong.
        let manifest = bundle + "/manifest.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: SHA256Digest.of(original).description, with: SHA256Digest.of(damaged).description)
            .write(toFile: manifest, atomically: true, encoding: .utf8)

        let result = try ModelcProcess.run(["verify", bundle])
        #expect(result.status == 78, "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("modelc: error: \(bundle)/\(file): "), "\(result.standardError)")
        #expect(result.standardError.contains(reference), "\(result.standardError)")
        #expect(result.standardError.contains(problem), "\(result.standardError)")
        #expect(result.standardError.filter { $0 == "\n" }.count == 1)
        // decompile checks the same and writes nothing.
        let output = directory.appendingPathComponent("q.mlpackage").path
        #expect(try ModelcProcess.run(["decompile", bundle, output]).status == 78)
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    /// model.mil naming a blob that fits but more often than model.spec does
    /// (one lookup table pointed at the shared bias): the files disagree.
    @Test func programTextWithAReferenceTheSpecificationLacksIsRefused() throws {
        let directory = try Fixtures.temporaryDirectory("verify-text-references")
        let bundle = directory.appendingPathComponent("m.mlmodelc").path
        #expect(try ModelcProcess.run(["compile", "Fixtures/Models/MultiFunctionProgram.mlpackage", bundle]).status == 0)
        let path = bundle + "/model.mil"
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let damaged = Array(String(decoding: original, as: UTF8.self)
            .replacingOccurrences(of: "offset = uint64(4096)))", with: "offset = uint64(2048)))").utf8)
        try #require(damaged != original)
        try Data(damaged).write(to: URL(fileURLWithPath: path))
        let manifest = bundle + "/manifest.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: SHA256Digest.of(original).description, with: SHA256Digest.of(damaged).description)
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try ModelcProcess.run(["verify", bundle])
        #expect(result.status == 78)
        #expect(result.standardError.hasPrefix("modelc: error: \(path): weight reference line "), "\(result.standardError)")
        #expect(result.standardError.hasSuffix(": model.spec refers to offset 2048 only 2 times\n"), "\(result.standardError)")
    }

    /// Every new fixture's bundle verifies, and decompiles.
    @Test(arguments: ["Int4BlockwiseProgram", "Int8PerChannelProgram", "Palettized4BitProgram", "Palettized2BitProgram",
                      "Palettized1BitProgram", "SubByteProgram", "MultiFunctionProgram"])
    func compressedProgramBundleIsOK(name: String) throws {
        let directory = try Fixtures.temporaryDirectory("verify-compressed")
        let bundle = directory.appendingPathComponent("\(name).mlmodelc").path
        let compiled = try ModelcProcess.run(["compile", "Fixtures/Models/\(name).mlpackage", bundle])
        #expect(compiled.status == 0, "\(compiled.standardError)")
        let result = try ModelcProcess.run(["verify", bundle])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("\(bundle): ok ("))
    }

    func varint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        return bytes + [UInt8(rest)]
    }

    /// `bytes` with the first occurrence of `old` replaced by `new` (same length).
    func replacing(_ old: [UInt8], with new: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= old.count else { return bytes }
        for start in 0...(bytes.count - old.count) where Array(bytes[start..<start + old.count]) == old {
            var result = bytes
            result.replaceSubrange(start..<start + old.count, with: new)
            return result
        }
        return bytes
    }

    func flip(_ path: String, at offset: Int) throws {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[offset] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
    }
}
