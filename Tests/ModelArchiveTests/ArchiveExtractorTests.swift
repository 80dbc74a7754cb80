import Foundation
import FixtureSupport
import ModelArchive
import SystemIO
import Testing

@Suite(.timeLimit(.minutes(1))) struct ArchiveExtractorTests {
    /// A scratch directory with the archive beside an empty `parent`
    /// directory in which the destination `parent/out` is created.
    final class Scene {
        let temporary: TemporaryDirectory
        let archive: String
        let parent: String
        let destination: String

        init(_ entries: [ArchiveBuilder.Entry], format: ArchiveBuilder.Format = .tar) throws {
            temporary = try TemporaryDirectory()
            archive = temporary.path + "/archive.\(format)"
            parent = temporary.path + "/parent"
            destination = parent + "/out"
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false)
            try ArchiveBuilder.write(entries, format: format, to: archive)
        }

        /// What the destination's parent holds: nothing after a refusal.
        var parentListing: [String] { (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? ["?"] }
        /// What the scratch directory holds besides the archive and the parent.
        var outsideListing: [String] { temporary.listing() }

        func contents(_ relative: String) -> [UInt8]? {
            FileManager.default.contents(atPath: destination + "/" + relative).map(Array.init)
        }
    }

    static let sample: [ArchiveBuilder.Entry] = [
        .directory("./"),
        .directory("docs/"),
        .file("docs/readme.txt", Array("hello\n".utf8)),
        .file("./top.bin", (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
        .file("deep/a/b/c.txt", Array("nested".utf8)),
        .directory("empty"),
        .file("empty.txt", []),
    ]

    @Test(arguments: ArchiveBuilder.Format.allCases)
    func roundTrip(format: ArchiveBuilder.Format) throws {
        let scene = try Scene(Self.sample, format: format)
        let files = try ArchiveExtractor.extract(scene.archive, into: scene.destination)
        #expect(files == ["deep/a/b/c.txt", "docs/readme.txt", "empty.txt", "top.bin"])
        #expect(scene.contents("docs/readme.txt") == Array("hello\n".utf8))
        #expect(scene.contents("top.bin") == (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        #expect(scene.contents("deep/a/b/c.txt") == Array("nested".utf8))
        #expect(scene.contents("empty.txt") == [])
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: scene.destination + "/empty", isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(scene.parentListing == ["out"])
        #expect(try permissions(scene.destination + "/top.bin") == 0o644)
        #expect(try permissions(scene.destination + "/docs") == 0o755)
    }

    @Test func containedSymlinkIsKept() throws {
        let scene = try Scene([.file("data/x.txt", Array("x".utf8)), .symlink("data/link", target: "x.txt"), .symlink("up", target: "data/../data")])
        let files = try ArchiveExtractor.extract(scene.archive, into: scene.destination)
        #expect(files == ["data/x.txt"])
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: scene.destination + "/data/link") == "x.txt")
    }

    @Test func existingDestinationIsRefused() throws {
        let scene = try Scene(Self.sample)
        try FileManager.default.createDirectory(atPath: scene.destination, withIntermediateDirectories: false)
        #expect(throws: ArchiveError.write(SystemCallError(call: "mkdir", path: scene.destination, code: EEXIST))) {
            try ArchiveExtractor.extract(scene.archive, into: scene.destination)
        }
        #expect(scene.parentListing == ["out"])
        #expect(FileManager.default.contentsOfDirectory(atPathOrEmpty: scene.destination).isEmpty)
    }

    static let unsafeCases: [(entries: [ArchiveBuilder.Entry], entry: String)] = [
        ([.file("ok.txt", [1]), .file("../evil", [1])], "../evil"),
        ([.file("a/../../evil", [1])], "a/../../evil"),
        ([.file("/etc/x", [1])], "/etc/x"),
        ([.file("a/./../b", [1])], "a/./../b"),
        ([.symlink("link", target: "../../outside"), .file("link/file", [1])], "link"),
        ([.symlink("link", target: "/tmp")], "link"),
        ([.symlink("a", target: "."), .file("a/x", [1])], "a/x"),
        ([.symlink("a", target: "sub"), .file("a/x", [1])], "a/x"),
        ([.file("f", [1]), .file("f/x", [1])], "f/x"),
        ([.file("f", [1]), .file("f", [2])], "f"),
        ([.symlink("self", target: "."), .symlink("b", target: "self/../outside")], "b"),
        ([.symlink("b", target: "self/../outside"), .symlink("self", target: ".")], "self"),
        ([.special("dev", type: 0o020000)], "dev"),
        ([.special("disk", type: 0o060000)], "disk"),
        ([.special("fifo", type: 0o010000)], "fifo"),
        ([.file("target", [1]), .hardlink("copy", target: "target")], "copy"),
    ]

    @Test(arguments: 0..<unsafeCases.count)
    func unsafeEntryIsRefusedLeavingNothing(index: Int) throws {
        let (entries, name) = Self.unsafeCases[index]
        let scene = try Scene(entries)
        do {
            _ = try ArchiveExtractor.extract(scene.archive, into: scene.destination)
            Issue.record("extracted an archive with \(name)")
        } catch {
            guard case let .unsafeEntry(path, entry, reason) = error else {
                Issue.record("expected unsafeEntry, got \(error)")
                return
            }
            #expect(path == scene.archive)
            #expect(entry == name, "\(reason)")
            #expect(!error.description.isEmpty && !error.description.contains("\n"))
        }
        #expect(scene.parentListing.isEmpty)
        #expect(scene.outsideListing == ["archive.tar", "parent"])
    }

    @Test func failedWriteLeavesNothing() throws {
        let scene = try Scene(Self.sample, format: .tarGzip)
        var failing = Syscalls.current
        failing.write = { _, _, _ in
            errno = ENOSPC
            return -1
        }
        Syscalls.withOverride(failing) {
            do throws(ArchiveError) {
                _ = try ArchiveExtractor.extract(scene.archive, into: scene.destination)
                Issue.record("extracted although every write failed")
            } catch {
                guard case let .write(failure) = error else {
                    Issue.record("expected a write error, got \(error)")
                    return
                }
                #expect(failure.call == "write" && failure.code == ENOSPC)
            }
        }
        #expect(scene.parentListing.isEmpty)
    }

    @Test func bombIsRefusedByRatio() throws {
        let scene = try Scene([.zeros("zeros.bin", size: 50_000_000)], format: .tarGzip)
        let limits = ExtractionLimits(maximumCompressionRatio: 100)
        #expect(throws: ArchiveError.limitExceeded(path: scene.archive, limit: "compression ratio above 100")) {
            try ArchiveExtractor.extract(scene.archive, into: scene.destination, limits: limits)
        }
        #expect(scene.parentListing.isEmpty)
    }

    @Test func bombIsRefusedByTotal() throws {
        let scene = try Scene([.zeros("zeros.bin", size: 50_000_000)], format: .tarGzip)
        let limits = ExtractionLimits(maximumTotalBytes: 1 << 20)
        #expect(throws: ArchiveError.limitExceeded(path: scene.archive, limit: "more than 1048576 bytes")) {
            try ArchiveExtractor.extract(scene.archive, into: scene.destination, limits: limits)
        }
        #expect(throws: ArchiveError.limitExceeded(path: scene.archive, limit: "more than 1048576 bytes")) {
            try ArchiveExtractor.extractModel(scene.archive, into: scene.destination, limits: limits)
        }
        #expect(scene.parentListing.isEmpty)
    }

    @Test(arguments: [1, 3, 4, 5])
    func entryLimit(maximum: Int) throws {
        let scene = try Scene([.directory("d"), .file("d/a", [1]), .file("d/b", [2]), .file("c", [3])])
        let limits = ExtractionLimits(maximumEntries: maximum)
        if maximum >= 4 {
            #expect(try ArchiveExtractor.extract(scene.archive, into: scene.destination, limits: limits) == ["c", "d/a", "d/b"])
        } else {
            #expect(throws: ArchiveError.limitExceeded(path: scene.archive, limit: "more than \(maximum) entries")) {
                try ArchiveExtractor.extract(scene.archive, into: scene.destination, limits: limits)
            }
            #expect(scene.parentListing.isEmpty)
        }
    }

    @Test(arguments: [ArchiveBuilder.Format.tar, .tarGzip, .tarXz, .zip])
    func truncatedArchiveIsCorrupt(format: ArchiveBuilder.Format) throws {
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: ($0 &* 7919) >> 3) }
        let scene = try Scene([.file("a.bin", payload), .file("b.bin", payload)], format: format)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: scene.archive))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: scene.archive))
        do {
            _ = try ArchiveExtractor.extract(scene.archive, into: scene.destination)
            Issue.record("extracted a truncated archive")
        } catch {
            guard case let .corrupt(path, _, _) = error else {
                Issue.record("expected corrupt, got \(error)")
                return
            }
            #expect(path == scene.archive)
        }
        #expect(scene.parentListing.isEmpty)
    }

    @Test func pngAndGarbageAreNotArchives() throws {
        let temporary = try TemporaryDirectory()
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52] + [UInt8](repeating: 7, count: 600)
        var generator = SystemRandomNumberGenerator()
        let garbage = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for (name, bytes) in [("image.png", png), ("garbage.bin", garbage), ("empty", [])] {
            let path = temporary.path + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(throws: ArchiveError.notAnArchive(path: path)) {
                try ArchiveExtractor.extract(path, into: temporary.path + "/out-" + name)
            }
            #expect(throws: ArchiveError.notAnArchive(path: path)) { try ArchiveExtractor.models(in: path) }
        }
        #expect(temporary.listing() == ["empty", "garbage.bin", "image.png"])
    }

    @Test func missingArchiveIsUnreadable() throws {
        let temporary = try TemporaryDirectory()
        let path = temporary.path + "/missing.zip"
        #expect(throws: ArchiveError.unreadable(path: path, reason: String(cString: strerror(ENOENT)))) {
            try ArchiveExtractor.extract(path, into: temporary.path + "/out")
        }
        #expect(throws: ArchiveError.unreadable(path: temporary.path, reason: "not a regular file")) {
            try ArchiveExtractor.extract(temporary.path, into: temporary.path + "/out")
        }
    }

    private func permissions(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? Int) ?? -1
    }
}

extension FileManager {
    fileprivate func contentsOfDirectory(atPathOrEmpty path: String) -> [String] {
        (try? contentsOfDirectory(atPath: path)) ?? []
    }
}
