import Foundation
@testable import ModelFetch
import SystemIO
import Testing

/// The events a download reported, shared with its callback.
/// (`Locked`, not `Mutex`: these tests also run under ThreadSanitizer.)
final class EventLog: Sendable {
    let events = Locked<[DownloadEvent]>([])

    func record(_ event: DownloadEvent) { events.withLock { $0.append(event) } }
    var all: [DownloadEvent] { events.withLock { $0 } }
}

@Suite(.timeLimit(.minutes(1))) struct DownloaderTests {
    @Test func plainDownloadWritesTheFileAndItsHash() throws {
        let scene = try DownloadScene()
        let log = EventLog()
        let result = try Downloader.download(scene.url(), to: scene.destination, options: fastOptions(), events: log.record)
        #expect(result.path == scene.destination)
        #expect(result.sha256 == scene.sha256)
        #expect(result.bytes == UInt64(scene.contents.count))
        #expect(result.attempts == 1)
        #expect(result.resumedFrom == 0)
        #expect(result.etag != nil)
        #expect(result.lastModified != nil)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == ["model.bin"])
        let size = UInt64(scene.contents.count)
        #expect(log.all.first == .started(resumedFrom: 0, total: size))
        #expect(log.all.last == .progress(bytes: size, total: size))
    }

    @Test(arguments: [0, 1, 100_000])
    func sizes(size: Int) throws {
        let scene = try DownloadScene(size: size)
        let result = try Downloader.download(scene.url(), to: scene.destination, options: fastOptions())
        #expect(result.bytes == UInt64(size))
        #expect(result.sha256 == scene.sha256)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test func fileURL() throws {
        let scene = try DownloadScene()
        let result = try Downloader.download("file://" + scene.served + "/model.bin", to: scene.destination, options: fastOptions())
        #expect(result.sha256 == scene.sha256)
        #expect(result.etag == nil)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == ["model.bin"])
    }

    @Test func expectedChecksumInEitherCaseIsAccepted() throws {
        let scene = try DownloadScene()
        var options = fastOptions()
        options.expectedSHA256 = scene.sha256.uppercased()
        let result = try Downloader.download(scene.url(), to: scene.destination, options: options)
        #expect(result.sha256 == scene.sha256)
    }

    @Test func checksumMismatchLeavesNothing() throws {
        let scene = try DownloadScene()
        var options = fastOptions()
        let wrong = String(repeating: "0", count: 64)
        options.expectedSHA256 = wrong
        let url = scene.url()
        #expect(throws: DownloadError.checksumMismatch(url: url, expected: wrong, actual: scene.sha256)) {
            try Downloader.download(url, to: scene.destination, options: options)
        }
        #expect(scene.outListing == [])
    }

    @Test(arguments: [(-1, false), (0, true)])
    func maximumBytes(offset: Int, fits: Bool) throws {
        let scene = try DownloadScene()
        var options = fastOptions()
        let limit = UInt64(scene.contents.count + offset)
        options.maximumBytes = limit
        let url = scene.url()
        if fits {
            let result = try Downloader.download(url, to: scene.destination, options: options)
            #expect(result.bytes == limit)
        } else {
            #expect(throws: DownloadError.tooLarge(url: url, limit: limit)) {
                try Downloader.download(url, to: scene.destination, options: options)
            }
            #expect(scene.outListing == [])
        }
    }

    @Test func unsupportedSchemeIsRefused() throws {
        let scene = try DownloadScene(size: 10)
        #expect(throws: DownloadError.unsupportedScheme(url: "ftp://127.0.0.1/model.bin")) {
            try Downloader.download("ftp://127.0.0.1/model.bin", to: scene.destination)
        }
        #expect(throws: DownloadError.badURL("model.bin")) {
            try Downloader.download("model.bin", to: scene.destination)
        }
        #expect(scene.outListing == [])
    }
}

@Suite struct RetryAfterTests {
    @Test func secondsAndHTTPDatesAreRead() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT
        #expect(TransferSink.retryAfter("120", now: now) == 120)
        #expect(TransferSink.retryAfter("Tue, 14 Nov 2023 22:13:50 GMT", now: now) == 30)
        #expect(TransferSink.retryAfter("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == 0)
        #expect(TransferSink.retryAfter("soon", now: now) == nil)
    }
}
