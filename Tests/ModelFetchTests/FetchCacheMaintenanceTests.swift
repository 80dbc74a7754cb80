import FixtureSupport
import Foundation
import ModelFetch
import SystemIO
import Testing

@Suite(.timeLimit(.minutes(1))) struct FetchCacheMaintenanceTests {
    @Test func defaultRootFollowsTheEnvironment() {
        #expect(FetchCache.defaultRoot(environment: ["MODELC_CACHE": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"]) == "/c")
        #expect(FetchCache.defaultRoot(environment: ["XDG_CACHE_HOME": "/x", "HOME": "/h"]) == "/x/modelc")
        #expect(FetchCache.defaultRoot(environment: ["XDG_CACHE_HOME": "relative", "HOME": "/h"]) == "/h/.cache/modelc")
        #expect(FetchCache.defaultRoot(environment: [:]) == nil)
    }

    @Test func listShowsEntriesUnreferencedFilesAndPartials() throws {
        let scene = try FetchScene()
        _ = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        var options = scene.options()
        options.download.maximumRetries = 0
        _ = try? Fetcher.fetch(scene.url(fault: "close-after:1500"), cache: scene.cache, options: options)
        let listing = scene.cache.list()
        #expect(listing.entries.map(\.url) == [scene.url()])
        #expect(listing.unreferencedBlobs == [])
        #expect(listing.partials.count == 1)
        #expect(listing.partials.first?.url == scene.url(fault: "close-after:1500"))
        #expect(listing.partials.first.map { $0.bytes >= 1500 } == true)
        #expect(listing.totalBytes >= UInt64(scene.model.count) + 1500)
    }

    @Test func verifyRemovesDamagedFilesSoTheNextFetchDownloadsAgain() throws {
        let scene = try FetchScene()
        let result = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        #expect(try scene.cache.verify().damaged == [])
        chmod(result.path, 0o644)
        try Data(scene.model.reversed()).write(to: URL(fileURLWithPath: result.path))
        let verification = try scene.cache.verify()
        #expect(verification.checked == 1)
        #expect(verification.damaged == [result.sha256])
        #expect(scene.cache.entry(for: scene.url()) == nil)
        let again = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        #expect(again.source == .network)
        #expect(FileManager.default.contents(atPath: again.path).map(Array.init) == scene.model)
    }

    @Test func pruneRemovesWhatNoEntryUses() throws {
        let scene = try FetchScene()
        let result = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        let orphan = scene.cache.blobPath(sha256: String(repeating: "b", count: 64))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: orphan))
        let leftover = scene.cache.root + "/urls/.abandoned.json.staging-1-2"
        try Data([1]).write(to: URL(fileURLWithPath: leftover))
        let report = try scene.cache.prune()
        #expect(report.removedItems == 2)
        #expect(report.removedURLs == [])
        #expect(!FileManager.default.fileExists(atPath: orphan))
        #expect(!FileManager.default.fileExists(atPath: leftover))
        #expect(FileManager.default.fileExists(atPath: result.path))
        #expect(scene.cache.entry(for: scene.url()) != nil)
    }

    @Test func pruneToASizeRemovesTheLeastRecentlyUsedFirst() throws {
        let scene = try FetchScene()
        let size = 40_000
        for name in ["old.bin", "middle.bin", "new.bin"] {
            try scene.serve(name, (0..<size).map { _ in UInt8.random(in: 0...255) })
            _ = try Fetcher.fetch(scene.url(name), cache: scene.cache, options: scene.options())
        }
        // Using "old" again makes "middle" the least recently used.
        _ = try Fetcher.fetch(scene.url("old.bin"), cache: scene.cache, options: scene.options(offline: true))
        let report = try scene.cache.prune(maximumBytes: UInt64(2 * size + 8192))
        #expect(report.removedURLs == [scene.url("middle.bin")])
        #expect(scene.cache.list().entries.map(\.url).sorted() == [scene.url("new.bin"), scene.url("old.bin")])
    }

    @Test func pruneEverythingEmptiesTheCache() throws {
        let scene = try FetchScene()
        _ = try Fetcher.fetch(scene.url(), cache: scene.cache, options: scene.options())
        let report = try scene.cache.prune(everything: true)
        #expect(report.removedURLs == [scene.url()])
        #expect(scene.cacheFiles() == [])
        #expect(scene.cache.list().totalBytes == 0)
    }

    @Test func pruneWaitsWhileFilesAreKept() throws {
        let scene = try FetchScene()
        let cache = scene.cache
        let pruned = Locked(false)
        try cache.keepingFiles {
            let result = try Fetcher.fetch(scene.url(), cache: cache, options: scene.options())
            let thread = Thread {
                _ = try? cache.prune(everything: true)
                pruned.withLock { $0 = true }
            }
            thread.start()
            Thread.sleep(forTimeInterval: 0.3)
            #expect(pruned.withLock { $0 } == false)
            #expect(FileManager.default.fileExists(atPath: result.path))
        }
        let deadline = Date().addingTimeInterval(10)
        while !pruned.withLock({ $0 }), Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(pruned.withLock { $0 })
        #expect(!FileManager.default.fileExists(atPath: cache.blobPath(sha256: scene.modelSHA256)))
    }
}
