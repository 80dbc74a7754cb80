import Foundation
import ModelFetch
import SystemIO
import Testing

/// Downloads against the test server's faults: retries, resumption, redirects.
@Suite(.timeLimit(.minutes(1))) struct DownloaderFaultTests {
    @Test func resumesAcrossRunsAfterAClosedConnection() throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "close-after:1000")
        #expect {
            try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 0))
        } throws: { error in
            guard case .network(url, _, 1) = error as? DownloadError else { return false }
            return true
        }
        #expect(scene.bytes(scene.partial)?.count == 1000)
        #expect(scene.exists(scene.sidecar))
        #expect(!scene.exists(scene.destination))

        let result = try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 0))
        #expect(result.resumedFrom == 1000)
        #expect(result.attempts == 1)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == ["model.bin"])
    }

    @Test func resumesWithinOneCallAfterAClosedConnection() throws {
        let scene = try DownloadScene()
        let result = try Downloader.download(scene.url(fault: "close-after:1000"), to: scene.destination, options: fastOptions())
        #expect(result.attempts == 2)
        #expect(result.resumedFrom == 1000)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test(arguments: ["503-once", "429-once"])
    func transientStatusIsRetried(fault: String) throws {
        let scene = try DownloadScene()
        let result = try Downloader.download(scene.url(fault: fault), to: scene.destination, options: fastOptions())
        #expect(result.attempts == 2)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.outListing == ["model.bin"])
    }

    @Test func transientStatusFailsWhenRetriesRunOut() throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "503-once")
        #expect(throws: DownloadError.http(url: url, status: 503)) {
            try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 0))
        }
        #expect(scene.outListing == [])
    }

    @Test func notFoundFailsAtOnce() throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "404")
        let start = ContinuousClock.now
        #expect(throws: DownloadError.http(url: url, status: 404)) {
            try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 5))
        }
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(scene.outListing == [])
    }

    @Test func stallIsAbortedAndResumed() throws {
        let scene = try DownloadScene()
        let start = ContinuousClock.now
        let result = try Downloader.download(scene.url(fault: "stall-after:1000"), to: scene.destination, options: fastOptions())
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(result.attempts == 2)
        #expect(result.resumedFrom == 1000)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test func wholeFileAnswerToARangeRestartsFromZero() throws {
        let scene = try DownloadScene()
        let result = try Downloader.download(scene.url(fault: "close-after:1000,ignore-range"), to: scene.destination, options: fastOptions())
        #expect(result.attempts == 2)
        #expect(result.resumedFrom == 0)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test func changedETagDiscardsThePartial() throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "close-after:1000,etag-changes")
        #expect(throws: (any Error).self) {
            try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 0))
        }
        #expect(scene.bytes(scene.partial)?.count == 1000)
        let result = try Downloader.download(url, to: scene.destination, options: fastOptions(retries: 0))
        #expect(result.resumedFrom == 0)
        #expect(result.etag == "\"changed-1\"")
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == ["model.bin"])
    }

    @Test func unsatisfiableRangeDiscardsThePartial() throws {
        let scene = try DownloadScene()
        let url = scene.url()
        let first = try Downloader.download(url, to: scene.destination, options: fastOptions())
        let etag = try #require(first.etag)
        // A partial as long as the file itself: the Range starts past the end.
        try FileManager.default.moveItem(atPath: scene.destination, toPath: scene.partial)
        let sidecar: [String: Any] = ["url": url, "etag": etag, "bytes": scene.contents.count]
        let json = try JSONSerialization.data(withJSONObject: sidecar)
        try json.write(to: URL(fileURLWithPath: scene.sidecar))

        let result = try Downloader.download(url, to: scene.destination, options: fastOptions())
        #expect(result.attempts == 2)
        #expect(result.resumedFrom == 0)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == ["model.bin"])
    }

    @Test(arguments: [(3, true), (10, true), (11, false)])
    func redirects(hops: Int, succeeds: Bool) throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "redirect:\(hops)")
        if succeeds {
            let result = try Downloader.download(url, to: scene.destination, options: fastOptions())
            #expect(result.sha256 == scene.sha256)
        } else {
            #expect {
                try Downloader.download(url, to: scene.destination, options: fastOptions())
            } throws: { error in
                guard case .network(url, _, 1) = error as? DownloadError else { return false }
                return true
            }
            #expect(scene.outListing == [])
        }
    }

    @Test func errorsNeverShowHeaderValues() throws {
        let scene = try DownloadScene()
        var options = fastOptions(retries: 0)
        options.headers = ["Authorization: Bearer SECRET"]
        for fault in ["404", "close-after:10", "redirect:11"] {
            do {
                _ = try Downloader.download(scene.url(fault: fault), to: scene.destination, options: options)
                Issue.record("\(fault): expected a failure")
            } catch {
                #expect(!error.description.contains("SECRET"))
                #expect(error.description.contains("127.0.0.1"))
            }
        }
    }

    @Test func passwordsInTheURLAreNotShown() {
        let error = DownloadError.http(url: "https://user:hunter2@example.com/model.bin", status: 403)
        #expect(!error.description.contains("hunter2"))
        #expect(error.description.contains("example.com/model.bin"))
    }
}
