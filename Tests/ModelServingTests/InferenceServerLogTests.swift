import FixtureSupport
import Foundation
import Testing
@testable import ModelServing

/// The server's log loses nothing at a drain: a model loaded just before SIGTERM
/// has its line written by the time `drain()` returns, even when no Swift task
/// could run in between (the process exits right after the drain).
@Suite struct InferenceServerLogTests {
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func append(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    /// Holds every thread of Swift's cooperative pool (the caller's own included) until
    /// `release()`, or 20 s at the most, so that no task can run meanwhile.
    final class PoolHold: @unchecked Sendable {
        private let started = DispatchSemaphore(value: 0)
        private let go = DispatchSemaphore(value: 0)
        private let width = ProcessInfo.processInfo.activeProcessorCount

        init() {
            for _ in 0..<width {
                Task.detached { [started, go] in
                    started.signal()
                    _ = go.wait(timeout: .now() + 20)
                }
            }
            // The caller holds one thread itself: one task may not start until the release.
            for _ in 0..<(width - 1) { _ = started.wait(timeout: .now() + 2) }
        }

        func release() { for _ in 0..<width { go.signal() } }
    }

    @Test(.timeLimit(.minutes(1)))
    func loadLineIsLoggedBeforeTheDrainEnds() throws {
        let directory = try Fixtures.temporaryDirectory("serve-log")
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/GLMClassifier.mlmodel"),
                                         toPath: directory.appendingPathComponent("GLMClassifier.mlmodel").path)
        let repository = try ModelRepository(directory: directory.path, compileCache: try Fixtures.temporaryDirectory("serve-log-cache").path)
        var options = ServerOptions()
        options.port = 0
        options.threads = 1
        let lines = Lines()
        let server = try InferenceServer(repository: repository, options: options, log: ServerLog(format: .text) { lines.append($0) })
        let hold = PoolHold()
        defer { hold.release() }
        let load = server.service.handle(HTTPRequest(method: "POST", path: "/v2/repository/models/GLMClassifier/load", headers: [:], body: []))
        #expect(load.status == 200)
        server.drain()
        let log = lines.all
        let loaded = log.firstIndex { $0.contains(" info model loaded model=GLMClassifier bytes=") }
        let stopped = log.firstIndex { $0.contains(" info stopped ") }
        #expect(loaded != nil && stopped != nil, "\(log)")
        if let loaded, let stopped { #expect(loaded < stopped) }
    }
}
