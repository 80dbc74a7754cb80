import Foundation
import FixtureSupport
import ModelFetch
import SystemIO

/// A scratch directory with a served file of random bytes, a running test
/// server, and a destination path in a directory of its own.
final class DownloadScene {
    let root: String
    let served: String
    let destination: String
    let contents: [UInt8]
    let server: TestHTTPServer

    init(size: Int = 64 * 1024, name: String = "model.bin") throws {
        root = NSTemporaryDirectory() + "modelfetch-\(UUID().uuidString)"
        served = root + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/out", withIntermediateDirectories: false)
        destination = root + "/out/" + name
        var generator = SystemRandomNumberGenerator()
        contents = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try Data(contents).write(to: URL(fileURLWithPath: served + "/" + name))
        server = try TestHTTPServer(serving: served)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var partial: String { destination + ".partial" }
    var sidecar: String { destination + ".partial.json" }
    var sha256: String { SHA256Digest.of(contents).description }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
    func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }
    /// What the destination's directory holds.
    var outListing: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: root + "/out")) ?? []).sorted() }

    func url(fault: String? = nil) -> String {
        server.url(URL(fileURLWithPath: destination).lastPathComponent, fault: fault)
    }
}

/// Short timeouts and backoffs so failing attempts cost milliseconds.
func fastOptions(retries: Int = 3) -> DownloadOptions {
    DownloadOptions(maximumRetries: retries, connectTimeout: .seconds(5), stallTimeout: .seconds(1), initialBackoff: .milliseconds(10))
}
