import FixtureSupport
import Foundation
import ModelArchive
import ModelFetch
import SystemIO
import Testing

/// A served directory holding a real fixture model, a cache, and the test server.
final class FetchScene {
    let root: String
    let served: String
    let cache: FetchCache
    let server: TestHTTPServer
    let model: [UInt8]

    init() throws {
        root = NSTemporaryDirectory() + "fetcher-\(UUID().uuidString)"
        served = root + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        model = try #require(FileManager.default.contents(atPath: Fixtures.path("Models/ImageClassifier.mlmodel"))).map { $0 }
        try Data(model).write(to: URL(fileURLWithPath: served + "/classifier.mlmodel"))
        cache = FetchCache(root: root + "/cache")
        server = try TestHTTPServer(serving: served)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func serve(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: served + "/" + name))
    }

    func url(_ name: String = "classifier.mlmodel", fault: String? = nil) -> String { server.url(name, fault: fault) }

    var modelSHA256: String { SHA256Digest.of(model).description }

    /// Everything under the cache directory except lock files, as relative paths.
    func cacheFiles() -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: cache.root) else { return [] }
        var files: [String] = []
        while let path = walker.nextObject() as? String {
            if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular, !path.hasPrefix("locks/") { files.append(path) }
        }
        return files.sorted()
    }

    func options(pin: String? = nil, offline: Bool = false, member: String? = nil) -> FetchOptions {
        var download = fastOptions()
        download.expectedSHA256 = pin
        return FetchOptions(download: download, offline: offline, member: member)
    }
}

@Suite(.timeLimit(.minutes(1))) struct FetcherTests {
    @Test func firstFetchDownloadsIntoTheCacheByContent() throws {
        let scene = try FetchScene()
        let result = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        #expect(result.source == .network)
        #expect(result.sha256 == scene.modelSHA256)
        #expect(result.bytes == UInt64(scene.model.count))
        #expect(result.path == scene.cache.root + "/blobs/sha256/" + scene.modelSHA256)
        #expect(result.path == result.blobPath)
        #expect(FileManager.default.contents(atPath: result.path).map(Array.init) == scene.model)
        #expect(!FileManager.default.isWritableFile(atPath: result.path) || getuid() == 0)
        let entry = try #require(scene.cache.entry(for: scene.url()))
        #expect(entry.sha256 == scene.modelSHA256)
        #expect(entry.etag != nil)
        #expect(scene.cacheFiles().filter { $0.hasPrefix("partial/") } == [])
    }

    @Test func aCachedURLIsRevalidatedWithoutATransfer() throws {
        let scene = try FetchScene()
        _ = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        let events = FetchEventLog()
        let again = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(), events: events.record)
        #expect(again.source == .revalidated)
        #expect(again.sha256 == scene.modelSHA256)
        #expect(events.all.contains(.revalidating(url: scene.url())))
        let requests = try scene.server.requests(for: "classifier.mlmodel")
        #expect(requests.map { $0["status"] as? Int } == [200, 304])
        #expect(requests.last?["If-None-Match"] as? String == scene.cache.entry(for: scene.url())?.etag)
        #expect(requests.last?["sent"] == nil)
    }

    @Test func aChangedUpstreamFileIsDownloadedAgain() throws {
        let scene = try FetchScene()
        let first = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        var changed = scene.model
        changed.append(0)
        try scene.serve("classifier.mlmodel", changed)
        let second = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        #expect(second.source == .network)
        #expect(second.sha256 == SHA256Digest.of(changed).description)
        #expect(second.sha256 != first.sha256)
        #expect(scene.cache.entry(for: scene.url())?.sha256 == second.sha256)
        #expect(FileManager.default.contents(atPath: second.path).map(Array.init) == changed)
    }

    @Test func aPinnedHashInTheCacheNeedsNoNetwork() throws {
        let scene = try FetchScene()
        _ = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        // Another URL with the same content: served from the cache by its pin.
        let result = try Fetcher.fetch(scene.url("elsewhere.mlmodel"), cache: scene.cache, options: scene.options(pin: scene.modelSHA256))
        #expect(result.source == .cache)
        #expect(result.path == scene.cache.blobPath(sha256: scene.modelSHA256))
        #expect(try scene.server.requests(for: "elsewhere.mlmodel").isEmpty)
        #expect(scene.cache.entry(for: scene.url("elsewhere.mlmodel"))?.sha256 == scene.modelSHA256)
    }

    @Test func aDamagedBlobIsNotServedForItsPin() throws {
        let scene = try FetchScene()
        let first = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        chmod(first.path, 0o644)
        try Data("damaged".utf8).write(to: URL(fileURLWithPath: first.path))
        let result = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(pin: scene.modelSHA256))
        #expect(result.source == .network)
        #expect(FileManager.default.contents(atPath: result.path).map(Array.init) == scene.model)
    }

    @Test func aDamagedBlobIsReplacedByTheNextDownload() throws {
        let scene = try FetchScene()
        let first = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        chmod(first.path, 0o644)
        try Data("damaged".utf8).write(to: URL(fileURLWithPath: first.path))
        // The same content under another URL: downloaded, and the good copy wins.
        let second = try Fetcher.fetch(scene.url(fault: "404-never"), cache: scene.cache, options: scene.options())
        #expect(second.path == first.path)
        #expect(FileManager.default.contents(atPath: second.path).map(Array.init) == scene.model)
    }

    @Test func offlineUsesTheCacheAndFailsClearlyOnAMiss() throws {
        let scene = try FetchScene()
        #expect(throws: FetchError.offlineMiss(url: scene.url())) {
            try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(offline: true))
        }
        _ = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        let hit = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(offline: true))
        #expect(hit.source == .cache)
        #expect(hit.sha256 == scene.modelSHA256)
        // One request in all: the online fetch.
        #expect(try scene.server.requests(for: "classifier.mlmodel").count == 1)
        let wrongPin = String(repeating: "0", count: 64)
        #expect(throws: FetchError.download(.checksumMismatch(url: scene.url(), expected: wrongPin, actual: scene.modelSHA256))) {
            try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(pin: wrongPin, offline: true))
        }
    }

    @Test func aChecksumMismatchLeavesNothingInTheCache() throws {
        let scene = try FetchScene()
        let wrongPin = String(repeating: "a", count: 64)
        #expect(throws: FetchError.download(.checksumMismatch(url: scene.url(), expected: wrongPin, actual: scene.modelSHA256))) {
            try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(pin: wrongPin))
        }
        #expect(scene.cacheFiles() == [])
    }

    @Test func anInterruptedDownloadResumesInTheCache() throws {
        let scene = try FetchScene()
        var options = scene.options()
        options.download.maximumRetries = 0
        #expect(throws: (any Error).self) {
            try Fetcher.fetch(scene.url(fault: "close-after:2000"), cache: scene.cache, options: options)
        }
        #expect(scene.cacheFiles().filter { $0.hasPrefix("partial/") }.count == 2)
        let result = try Fetcher.fetch(scene.url(fault: "close-after:2000"), cache: scene.cache, options: options)
        #expect(result.transfer?.resumedFrom == 2000)
        #expect(result.sha256 == scene.modelSHA256)
        #expect(scene.cacheFiles().filter { $0.hasPrefix("partial/") } == [])
    }

    @Test func aZippedModelIsUnpackedOnceAndChosen() throws {
        let scene = try FetchScene()
        let archive = scene.root + "/model.zip"
        try ArchiveBuilder.write([.directory("v1"), .file("v1/classifier.mlmodel", scene.model), .file("README.txt", Array("hello".utf8))],
                                 format: .zip, to: archive)
        try FileManager.default.moveItem(atPath: archive, toPath: scene.served + "/model.zip")
        let events = FetchEventLog()
        let result = try Fetcher.fetch(scene.url("model.zip"), cache: scene.cache, options: scene.options(), events: events.record)
        #expect(result.archiveMember == "v1/classifier.mlmodel")
        #expect(result.path == scene.cache.extractedPath(sha256: result.sha256) + "/v1/classifier.mlmodel")
        #expect(FileManager.default.contents(atPath: result.path).map(Array.init) == scene.model)
        #expect(events.all.contains(.extracting(path: result.blobPath)))
        let again = FetchEventLog()
        let second = try Fetcher.fetch(scene.url("model.zip"), cache: scene.cache, options: scene.options(), events: again.record)
        #expect(second.path == result.path)
        #expect(!again.all.contains { if case .extracting = $0 { true } else { false } })
    }

    @Test func aMemberIsChosenAmongSeveral() throws {
        let scene = try FetchScene()
        try ArchiveBuilder.write([.file("a.mlmodel", scene.model), .file("b/b.mlmodel", scene.model)], format: .tarGzip, to: scene.served + "/two.tgz")
        #expect(throws: FetchError.archive(.ambiguousMember(path: scene.cache.blobPath(sha256: try sha256(of: scene.served + "/two.tgz")),
                                                            candidates: ["a.mlmodel", "b/b.mlmodel"]))) {
            try Fetcher.fetch(scene.url("two.tgz"), cache: scene.cache, options: scene.options())
        }
        let chosen = try Fetcher.fetch(scene.url("two.tgz"), cache: scene.cache, options: scene.options(member: "b.mlmodel"))
        #expect(chosen.archiveMember == "b/b.mlmodel")
        #expect(throws: FetchError.notAnArchive(url: scene.url())) {
            try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options(member: "a.mlmodel"))
        }
    }

    @Test(arguments: [
        ("traversal", ArchiveBuilder.Entry.file("../escaped.mlmodel", [1, 2, 3])),
        ("symlink", ArchiveBuilder.Entry.symlink("link", target: "/etc")),
        ("absolute", ArchiveBuilder.Entry.file("/tmp/escaped.mlmodel", [1, 2, 3])),
    ])
    func maliciousArchivesAreRefusedAndWriteNothingOutside(name: String, entry: ArchiveBuilder.Entry) throws {
        let scene = try FetchScene()
        try ArchiveBuilder.write([.file("model.mlmodel", scene.model), entry], format: .tar, to: scene.served + "/\(name).tar")
        #expect {
            try Fetcher.fetch(scene.url("\(name).tar"), cache: scene.cache, options: scene.options())
        } throws: { error in
            guard case .archive(.unsafeEntry) = error as? FetchError else { return false }
            return true
        }
        let extracted = (try? FileManager.default.contentsOfDirectory(atPath: scene.cache.root + "/extracted")) ?? []
        #expect(extracted == [])
        #expect(!FileManager.default.fileExists(atPath: scene.cache.root + "/escaped.mlmodel"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/escaped.mlmodel"))
    }

    @Test func aZipBombIsStoppedByTheRatioLimit() throws {
        let scene = try FetchScene()
        try ArchiveBuilder.write([.zeros("bomb.mlmodel", size: 64 << 20)], format: .zip, to: scene.served + "/bomb.zip")
        #expect {
            try Fetcher.fetch(scene.url("bomb.zip"), cache: scene.cache, options: scene.options())
        } throws: { error in
            guard case .archive(.limitExceeded) = error as? FetchError else { return false }
            return true
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: scene.cache.root + "/extracted")) ?? []) == [])
    }

    private func sha256(of path: String) throws -> String {
        try SHA256Digest.ofFile(at: path).digest.description
    }
}

/// The events a fetch reported.
final class FetchEventLog: Sendable {
    private let events = Locked<[FetchEvent]>([])

    func record(_ event: FetchEvent) { events.withLock { $0.append(event) } }
    var all: [FetchEvent] { events.withLock { $0 } }
}
