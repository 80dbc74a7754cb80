import BundleFormat
import FixtureSupport
import Foundation
import SystemIO
import Testing
@testable import ModelCompiler
@testable import ModelSpec

@Suite struct BundleWritingTests {
    func writeModel(_ bytes: [UInt8], in directory: URL, name: String = "net.mlmodel") throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func identicalTensorsAreStoredOnce() throws {
        let directory = try Fixtures.temporaryDirectory("dedup")
        let weights = (0..<64).map { Float($0) / 8 }
        let source = try writeModel(Wire.innerProductNetwork(layers: [
            (8, 8, weights), (8, 8, weights), (8, 8, weights.reversed()),
        ]), in: directory)
        let output = directory.appendingPathComponent("net.mlmodelc").path
        let report = try BundleCompiler().compile(source, to: output)
        #expect(report.weightCount == 3)
        #expect(report.blobCount == 2)
        let index = try BundleContents.open(output).index.weights
        #expect(index[0].blobOffset == index[1].blobOffset)
        #expect(index[0].blobOffset != index[2].blobOffset)
        // Both layers still get their own values back.
        let rebuilt = directory.appendingPathComponent("rebuilt.mlmodel").path
        _ = try BundleDecompiler.decompile(output, to: rebuilt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: rebuilt)) == Data(contentsOf: URL(fileURLWithPath: source)))
    }

    /// An ML program whose weight file already has the bundle's layout (every
    /// blob used, in the order of first use, nothing else) is copied in the
    /// kernel: the bundle's weight.bin is the source's, byte for byte, and its
    /// recorded SHA-256 is right. Other layouts are written blob by blob.
    @Test(arguments: [("Models/MLProgram.mlpackage", true), ("Models/StatefulProgram.mlpackage", true),
                      ("Models/Int4BlockwiseProgram.mlpackage", true), ("Models/MultiFunctionProgram.mlpackage", true),
                      ("unused blob", false)])
    func programWeightFileInBundleLayoutIsCopied(file: String, verbatim: Bool) throws {
        var path = Fixtures.path(file)
        if file == "unused blob" {
            // A blob no reference uses, at the end: the bundle leaves it out.
            let copy = try Fixtures.temporaryDirectory("unused-blob").appendingPathComponent("p.mlpackage")
            try FileManager.default.copyItem(atPath: Fixtures.path("Models/MLProgram.mlpackage"), toPath: copy.path)
            let weights = copy.appendingPathComponent("Data/com.apple.CoreML/weights/weight.bin")
            var bytes = try [UInt8](Data(contentsOf: weights))
            let count = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            withUnsafeBytes(of: (count + 1).littleEndian) { bytes.replaceSubrange(0..<4, with: $0) }
            bytes += [UInt8](repeating: 0, count: (64 - bytes.count % 64) % 64)
            let record = bytes.count
            bytes += MILBlobFileBuilder.make([.init(dataType: 2, data: [UInt8](repeating: 7, count: 16))]).bytes.dropFirst(64)
            withUnsafeBytes(of: UInt64(record + 64).littleEndian) { bytes.replaceSubrange((record + 16)..<(record + 24), with: $0) }
            try Data(bytes).write(to: weights)
            path = copy.path
        }
        let model = try ModelFile.open(path)
        let plan = try WeightPlan(model: model, sites: WeightLocator(root: model.specification.root).locations, fp16: false)
        let source = try #require(model.resolveProgramFile("@model_path/weights/weight.bin"))
        #expect((plan.verbatimSource?.path == source) == verbatim)
        let directory = try Fixtures.temporaryDirectory("verbatim")
        let output = directory.appendingPathComponent("p.mlmodelc").path
        _ = try BundleCompiler().compile(path, to: output)
        _ = try BundleContents.open(output, verifyDigests: true)
        let copied = try Data(contentsOf: URL(fileURLWithPath: output + "/" + BundleLayout.weightFile))
        #expect((copied == (try Data(contentsOf: URL(fileURLWithPath: source)))) == verbatim)
    }

    @Test(arguments: [Float(70_000), -1e9, .greatestFiniteMagnitude])
    func float16OverflowIsRefused(value: Float) throws {
        let directory = try Fixtures.temporaryDirectory("overflow")
        let source = try writeModel(Wire.innerProductNetwork(layers: [(2, 1, [0.5, value])]), in: directory)
        let output = directory.appendingPathComponent("net.mlmodelc").path
        #expect(throws: CompileError.float16Overflow(owner: "dense0", role: "weights", value: value)) {
            try BundleCompiler(options: .init(fp16: true)).compile(source, to: output)
        }
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["net.mlmodel"])
        // Without --fp16 the same model compiles.
        #expect(try BundleCompiler().compile(source, to: output).outcome == .compiled)
    }

    @Test func float16ErrorIsTheLargestRelativeError() throws {
        let directory = try Fixtures.temporaryDirectory("fp16-error")
        // 1/3 has relative float16 error ≈ 2.44e-4; 0.5 and 1 are exact.
        let source = try writeModel(Wire.innerProductNetwork(layers: [(3, 1, [0.5, 1, 1.0 / 3])]), in: directory)
        let report = try BundleCompiler(options: .init(fp16: true)).compile(source, to: directory.appendingPathComponent("o").path)
        let expected = Double(abs(Float(Float16(Float(1.0 / 3))) - Float(1.0 / 3)) / Float(1.0 / 3))
        #expect(report.float16MaxRelativeError == expected)
        #expect(report.float16WorstWeight == "dense0 weights")
    }

    @Test func outputThatIsNotABundleIsNeverReplaced() throws {
        let directory = try Fixtures.temporaryDirectory("not-a-bundle")
        let source = Fixtures.path("Models/GLMRegressor.mlmodel")
        let file = try writeModel([1, 2, 3], in: directory, name: "file")
        #expect(throws: CompileError.outputNotABundle(path: file)) { try BundleCompiler().compile(source, to: file) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data([1, 2, 3]))
        let folder = directory.appendingPathComponent("photos").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        _ = try writeModel([9], in: URL(fileURLWithPath: folder), name: "cat.jpg")
        #expect(throws: CompileError.outputNotABundle(path: folder)) { try BundleCompiler().compile(source, to: folder) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["cat.jpg"])
        // An empty directory is fine to fill.
        let empty = directory.appendingPathComponent("empty").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        #expect(try BundleCompiler().compile(source, to: empty).outcome == .compiled)
    }

    /// A compile that fails while writing (here: the disk fills up) leaves
    /// the previous bundle exactly as it was and no staging directory behind,
    /// whichever of its writes fails (it makes five: one per file).
    @Test(arguments: 1...5)
    func failedWriteLeavesPreviousBundleIntact(failAtWrite: Int) throws {
        let directory = try Fixtures.temporaryDirectory("atomic")
        let output = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/GLMRegressor.mlmodel"), to: output)
        let before = try tree(output)
        let writes = WriteCounter()
        var full = Syscalls.system
        full.write = { fd, buffer, count in
            if writes.next() >= failAtWrite {
                errno = ENOSPC
                return -1
            }
            return Syscalls.system.write(fd, buffer, count)
        }
        Syscalls.withOverride(full) {
            do throws(CompileError) {
                _ = try BundleCompiler().compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: output)
                Issue.record("the compile succeeded on a full disk")
            } catch {
                guard case .write(let failure) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(failure.code == ENOSPC)
                #expect(error.description.hasSuffix("write failed: No space left on device"))
            }
        }
        #expect(try tree(output) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["m.mlmodelc"])
    }

    @Test func progressRisesToTheWeightFileSize() throws {
        let directory = try Fixtures.temporaryDirectory("progress")
        // Two 9 MB tensors: each is reported at least twice (8 MiB chunks).
        let big = (0..<(2304 * 1024)).map { Float($0 % 1000) }
        let source = try writeModel(Wire.innerProductNetwork(layers: [(2304, 1024, big), (1024, 2304, big.reversed())]), in: directory)
        let updates = ProgressRecorder()
        let output = directory.appendingPathComponent("net.mlmodelc").path
        _ = try BundleCompiler(progress: { updates.record($0) }).compile(source, to: output)
        let seen = updates.values
        #expect(seen.count >= 4)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.bytesWritten <= $1.bytesWritten })
        let size = try #require(try FileManager.default.attributesOfItem(atPath: output + "/weights/weight.bin")[.size] as? UInt64)
        #expect(seen.last == CompileProgress(bytesWritten: size, totalBytes: size))
    }

    @Test func abandonedStagingDirectoriesAreRemoved() throws {
        let directory = try Fixtures.temporaryDirectory("abandoned")
        // A pid no process has: above the kernel's pid_max (at most 2^22).
        let leftover = directory.appendingPathComponent(".m.mlmodelc.staging-99999999-abc").path
        try FileManager.default.createDirectory(atPath: leftover + "/weights", withIntermediateDirectories: true)
        // One of a process that still runs (this one) is left alone.
        let live = directory.appendingPathComponent(".m.mlmodelc.staging-\(getpid())-def").path
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        _ = try BundleCompiler().compile(Fixtures.path("Models/GLMRegressor.mlmodel"),
                                         to: directory.appendingPathComponent("m.mlmodelc").path)
        #expect(!FileManager.default.fileExists(atPath: leftover))
        #expect(FileManager.default.fileExists(atPath: live))
    }
}

/// Collects progress reports.
final class ProgressRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [CompileProgress] = []

    func record(_ progress: CompileProgress) {
        lock.lock()
        defer { lock.unlock() }
        recorded.append(progress)
    }

    var values: [CompileProgress] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }
}

/// Counts calls across the closures of an overridden syscall table.
final class WriteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }
}
