import Foundation
import ModelFetch
import SystemIO
import Testing

/// Downloads from a real web server (Debian's nginx): its ETags, Range and
/// If-Range answers rather than the test server's.
@Suite(.timeLimit(.minutes(1))) struct NginxSmokeTests {
    @Test(arguments: [0, 1, 3 << 20 + 7])
    func plainDownloadIsByteIdentical(size: Int) throws {
        let scene = try NginxScene(size: size)
        let result = try Downloader.download(scene.url, to: scene.destination, options: fastOptions())
        let etag = try scene.servedETag()
        #expect(result.sha256 == scene.sha256)
        #expect(result.bytes == UInt64(size))
        #expect(result.resumedFrom == 0)
        #expect(result.attempts == 1)
        #expect(result.etag == etag)
        #expect(result.lastModified != nil)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == [scene.name])
    }

    @Test(arguments: [1, 1 << 20, 3 << 20 + 6])
    func resumesFromThePartialWithNginxsETag(kept: Int) throws {
        let scene = try NginxScene(size: 3 << 20 + 7)
        let first = try Downloader.download(scene.url, to: scene.root + "/first.bin", options: fastOptions())
        let etag = try #require(first.etag)
        try scene.writePartial(scene.contents.prefix(kept), etag: etag, lastModified: first.lastModified)

        let result = try Downloader.download(scene.url, to: scene.destination, options: fastOptions())
        #expect(result.resumedFrom == UInt64(kept))
        #expect(result.attempts == 1)
        #expect(result.etag == etag)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == [scene.name])
    }

    /// The file changed on the server after the partial was written: nginx
    /// answers the stale `If-Range` with the whole new file.
    @Test(arguments: [0, 4096])
    func staleETagRestartsFromZero(growth: Int) throws {
        let scene = try NginxScene(size: 1 << 20)
        let first = try Downloader.download(scene.url, to: scene.root + "/first.bin", options: fastOptions())
        let staleETag = try #require(first.etag)
        try scene.writePartial(scene.contents.prefix(1000), etag: staleETag, lastModified: first.lastModified)
        // nginx's ETag is the modification time in seconds and the size: move
        // the time back so that a same-size change gets a new ETag too.
        try scene.replaceServed(size: scene.contents.count + growth, modified: Date(timeIntervalSinceNow: -3600))
        let newETag = try scene.servedETag()
        try #require(newETag != staleETag)

        let result = try Downloader.download(scene.url, to: scene.destination, options: fastOptions())
        #expect(result.resumedFrom == 0)
        #expect(result.attempts == 1)
        #expect(result.etag == newETag)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.bytes(scene.destination) == scene.contents)
        #expect(scene.outListing == [scene.name])
    }

    // MARK: https and HTTP/2

    @Test func httpsWithHTTP2AndATrustedCertificate() throws {
        let scene = try NginxScene(size: 2 << 20, tls: true)
        let certificate = try #require(scene.server.certificate)
        var options = fastOptions()
        options.certificateAuthorities = certificate
        let result = try Downloader.download(scene.url, to: scene.destination, options: options)
        #expect(result.sha256 == scene.sha256)
        #expect(scene.url.hasPrefix("https://"))
        #expect(scene.server.requestProtocols == ["HTTP/2.0"])

        // A resume over HTTP/2.
        try FileManager.default.removeItem(atPath: scene.destination)
        try scene.writePartial(scene.contents.prefix(12345), etag: try #require(result.etag), lastModified: result.lastModified)
        let resumed = try Downloader.download(scene.url, to: scene.destination, options: options)
        #expect(resumed.resumedFrom == 12345)
        #expect(scene.bytes(scene.destination) == scene.contents)
    }

    @Test func anUntrustedCertificateFailsAtOnce() throws {
        let scene = try NginxScene(size: 1000, tls: true)
        #expect {
            try Downloader.download(scene.url, to: scene.destination, options: fastOptions(retries: 3))
        } throws: { error in
            guard case .network(_, let reason, 1) = error as? DownloadError else { return false }
            return reason.lowercased().contains("certificate")
        }
        #expect(scene.outListing == [])
    }

    // MARK: ETag revalidation (304)

    /// The cache asks nginx with If-None-Match; nginx answers 304 while the
    /// file is unchanged and the whole new file once it changed.
    @Test func cacheRevalidatesWithNginxsETag() throws {
        let scene = try NginxScene(size: 200_000)
        let cache = FetchCache(root: scene.root + "/cache")
        let options = FetchOptions(download: fastOptions())
        let first = try Fetcher.fetch(scene.url, cache: cache, options: options)
        #expect(first.source == .network)
        #expect(cache.entry(for: scene.url)?.etag == (try scene.servedETag()))

        let second = try Fetcher.fetch(scene.url, cache: cache, options: options)
        #expect(second.source == .revalidated)
        #expect(second.sha256 == first.sha256)

        try scene.replaceServed(size: 300_000, modified: Date(timeIntervalSinceNow: -3600))
        let third = try Fetcher.fetch(scene.url, cache: cache, options: options)
        #expect(third.source == .network)
        #expect(third.sha256 == scene.sha256)
        #expect(FileManager.default.contents(atPath: third.path) == scene.contents)
    }
}

/// A scratch directory with a served file of random bytes, nginx serving it,
/// and a destination path in a directory of its own.
private final class NginxScene {
    let name = "model.bin"
    let root: String
    let served: String
    let destination: String
    /// What the server holds now.
    private(set) var contents: Data
    let server: NginxServer

    init(size: Int, tls: Bool = false) throws {
        let root = NSTemporaryDirectory() + "modelfetch-nginx-\(UUID().uuidString)"
        self.root = root
        var complete = false
        // deinit does not run when init throws (no nginx, say).
        defer { if !complete { try? FileManager.default.removeItem(atPath: root) } }
        served = root + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/out", withIntermediateDirectories: false)
        destination = root + "/out/" + name
        contents = try Self.randomBytes(size)
        try contents.write(to: URL(fileURLWithPath: served + "/" + name))
        server = try NginxServer(serving: served, tls: tls)
        complete = true
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var url: String { server.url(name) }
    var partial: String { destination + ".partial" }
    var sidecar: String { destination + ".partial.json" }
    var sha256: String { contents.withUnsafeBytes { SHA256Digest.of($0) }.description }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
    /// What the destination's directory holds.
    var outListing: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: root + "/out")) ?? []).sorted() }

    /// The ETag nginx sends for the served file: `"<mtime>-<size>"`, both in
    /// hex, the time in whole seconds.
    func servedETag() throws -> String {
        let attributes = try FileManager.default.attributesOfItem(atPath: served + "/" + name)
        let modified = try #require(attributes[.modificationDate] as? Date)
        let size = try #require(attributes[.size] as? Int)
        let seconds = Int(modified.timeIntervalSince1970.rounded(.down))
        return "\"\(String(seconds, radix: 16))-\(String(size, radix: 16))\""
    }

    /// Replaces the served file with `size` new random bytes modified at `modified`.
    func replaceServed(size: Int, modified: Date) throws {
        let path = served + "/" + name
        contents = try Self.randomBytes(size)
        try contents.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
    }

    /// Leaves `bytes` in the destination's partial file with the sidecar a
    /// download interrupted after them would have written.
    func writePartial(_ bytes: Data, etag: String, lastModified: String?) throws {
        try bytes.write(to: URL(fileURLWithPath: partial))
        var sidecar: [String: Any] = ["url": url, "etag": etag, "bytes": bytes.count]
        if let lastModified { sidecar["lastModified"] = lastModified }
        try JSONSerialization.data(withJSONObject: sidecar).write(to: URL(fileURLWithPath: self.sidecar))
    }

    private static func randomBytes(_ count: Int) throws -> Data {
        let source = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        defer { try? source.close() }
        let data = try source.read(upToCount: count) ?? Data()
        try #require(data.count == count)
        return data
    }
}
