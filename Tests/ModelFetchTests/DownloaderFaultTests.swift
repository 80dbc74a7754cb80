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
        let log = EventLog()
        let result = try Downloader.download(scene.url(fault: fault), to: scene.destination, options: fastOptions(), events: log.record)
        #expect(result.attempts == 2)
        // The server's Retry-After: 1 sets the wait.
        #expect(log.all.first == .retrying(attempt: 1, reason: "HTTP \(fault.prefix(3))", delay: .seconds(1)))
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
            #expect(throws: DownloadError.redirect(url: url, reason: "more than 10 redirects")) {
                try Downloader.download(url, to: scene.destination, options: fastOptions())
            }
            #expect(scene.outListing == [])
        }
    }

    @Test func redirectToAFileURLIsRefused() throws {
        let scene = try DownloadScene()
        let url = scene.url(fault: "redirect-file")
        #expect {
            try Downloader.download(url, to: scene.destination, options: fastOptions())
        } throws: { error in
            guard case .redirect(url, let reason) = error as? DownloadError else { return false }
            return reason.contains("file:///etc/passwd") && reason.contains("not http or https")
        }
        #expect(scene.outListing == [])
    }

    @Test func shortBodiesAreResumedUntilTheFileIsWhole() throws {
        let scene = try DownloadScene(size: 45_000)
        let result = try Downloader.download(scene.url(fault: "short-body"), to: scene.destination, options: fastOptions(retries: 10))
        // 10 000 bytes per response: 5 attempts, the last resuming at 40 000.
        #expect(result.attempts == 5)
        #expect(result.resumedFrom == 40_000)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test func headersGoToTheFirstHostOnly() throws {
        let scene = try DownloadScene()
        var options = fastOptions()
        options.headers = ["Authorization: Bearer SECRET", "X-Token: also-secret"]
        // 127.0.0.1 and localhost are different hosts to the client, the same server here.
        let result = try Downloader.download(scene.url(fault: "redirect-host:localhost"), to: scene.destination, options: options)
        #expect(result.sha256 == scene.sha256)
        let requests = try scene.server.requests(for: "model.bin")
        #expect(requests.count == 2)
        #expect(requests.first?["Authorization"] as? String == "Bearer SECRET")
        #expect(requests.first?["X-Token"] as? String == "also-secret")
        #expect((requests.last?["Host"] as? String)?.hasPrefix("localhost:") == true)
        #expect(requests.last?["Authorization"] == nil)
        #expect(requests.last?["X-Token"] == nil)
    }

    @Test func headersFollowRedirectsOnTheSameHost() throws {
        let scene = try DownloadScene()
        var options = fastOptions()
        options.headers = ["Authorization: Bearer SECRET"]
        _ = try Downloader.download(scene.url(fault: "redirect:2"), to: scene.destination, options: options)
        let requests = try scene.server.requests(for: "model.bin")
        #expect(requests.count == 3)
        #expect(requests.allSatisfy { $0["Authorization"] as? String == "Bearer SECRET" })
    }

    @Test func conditionalRequestAnswered304WritesNothing() throws {
        let scene = try DownloadScene()
        let first = try Downloader.download(scene.url(), to: scene.destination, options: fastOptions())
        let again = scene.root + "/out/again.bin"
        let validators = CachedValidators(etag: first.etag, lastModified: first.lastModified)
        let outcome = try Downloader.download(scene.url(), to: again, ifChangedFrom: validators, options: fastOptions())
        #expect(outcome == .notModified)
        #expect(scene.outListing == ["model.bin"])
        #expect(try scene.server.requests(for: "model.bin").last?["status"] as? Int == 304)
    }

    @Test func conditionalRequestForAChangedFileDownloadsIt() throws {
        let scene = try DownloadScene()
        let stale = CachedValidators(etag: "\"stale\"", lastModified: nil)
        let outcome = try Downloader.download(scene.url(), to: scene.destination, ifChangedFrom: stale, options: fastOptions())
        guard case .downloaded(let result) = outcome else {
            Issue.record("expected a download, got \(outcome)")
            return
        }
        #expect(result.sha256 == scene.sha256)
        #expect(try scene.server.requests(for: "model.bin").first?["If-None-Match"] as? String == "\"stale\"")
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
