import FixtureSupport
import Foundation
import SystemIO
import Testing
@testable import ModelCompiler

/// The compile cache's `source-files.json`: each source file's identity and
/// SHA-256 as last hashed, so that loading an unchanged source does not read
/// it whole again. It is trusted while a file's identity holds (shown by a
/// stamp that lies about a digest: the bundle is compiled again), a file
/// whose identity changed is read again, and a stamp that cannot be read
/// is no stamp.
@Suite("Source stamps")
struct SourceStampTests {
    /// A copy of a package fixture, and a cache directory for it.
    static func setUp(_ label: String) throws -> (source: String, cache: String) {
        let directory = try Fixtures.temporaryDirectory(label)
        let source = directory.appendingPathComponent("Model.mlpackage").path
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/MLProgram.mlpackage"), toPath: source)
        return (source, directory.appendingPathComponent("cache").path)
    }

    static func manifestTime(_ bundle: String) throws -> Date {
        let attributes = try FileManager.default.attributesOfItem(atPath: bundle + "/manifest.json")
        return try #require(attributes[.modificationDate] as? Date)
    }

    @Test("the first load writes the stamp; an unchanged source reuses the bundle; a stamp lying about a digest is trusted")
    func trustedWhileIdentitiesHold() throws {
        let (source, cache) = try Self.setUp("stamp-trusted")
        let bundle = try ModelCompilation.compiledBundle(for: source, cacheDirectory: cache)
        let stampPath = URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("source-files.json").path
        let stamp = SourceStamp.read(stampPath)
        let (_, files) = try SourceDigest.withFiles(source)
        #expect(stamp.map(\.path).sorted() == files.map(\.path).sorted())
        #expect(stamp.sorted { $0.path < $1.path }.map(\.digest) == files.sorted { $0.path < $1.path }.map(\.digest))
        let compiled = try Self.manifestTime(bundle)
        Thread.sleep(forTimeInterval: 0.02)
        #expect(try ModelCompilation.compiledBundle(for: source, cacheDirectory: cache) == bundle)
        #expect(try Self.manifestTime(bundle) == compiled, "an unchanged source is up to date")
        // The same identities with another digest: taken as they are, so the source looks changed and is compiled again.
        var lying = stamp
        lying[0].digest = try #require(SHA256Digest(hex: String(repeating: "ab", count: 32)))
        SourceStamp.write(lying, to: stampPath)
        Thread.sleep(forTimeInterval: 0.02)
        _ = try ModelCompilation.compiledBundle(for: source, cacheDirectory: cache)
        #expect(try Self.manifestTime(bundle) > compiled)
        // The stamp is right again after that compile.
        #expect(SourceStamp.read(stampPath).sorted { $0.path < $1.path }.map(\.digest) == files.sorted { $0.path < $1.path }.map(\.digest))
    }

    @Test("a file changed in place, the same size, is read again; an unreadable stamp is no stamp")
    func changedFilesAreReadAgain() throws {
        let (source, cache) = try Self.setUp("stamp-changed")
        let bundle = try ModelCompilation.compiledBundle(for: source, cacheDirectory: cache)
        let stampPath = URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("source-files.json").path
        let before = try SourceDigest.withFiles(source).0
        // Flip one byte of the package's metadata-free weight file (same size, new modification time).
        let (_, files) = try SourceDigest.withFiles(source)
        let weights = try #require(files.max { $0.size < $1.size })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: weights.path))
        bytes[bytes.count - 1] ^= 0xFF
        Thread.sleep(forTimeInterval: 0.02)
        try bytes.write(to: URL(fileURLWithPath: weights.path))
        let known = SourceStamp.read(stampPath)
        let after = try SourceDigest.withFiles(source, known: known).0
        #expect(after != before, "the changed file was hashed again")
        #expect(after == (try SourceDigest.withFiles(source).0))
        // Not JSON: read as no stamp, and the next load writes a good one.
        try Data("not json".utf8).write(to: URL(fileURLWithPath: stampPath))
        #expect(SourceStamp.read(stampPath).isEmpty)
        _ = try? ModelCompilation.compiledBundle(for: source, cacheDirectory: cache)
        #expect(!SourceStamp.read(stampPath).isEmpty)
    }
}
