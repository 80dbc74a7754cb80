import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The `.partial.json` beside a partial download: which URL it came from,
/// the server's validator, and how many bytes were written.
struct PartialSidecar: Codable, Equatable {
    /// The URL without user name and password (see `DownloadError.redacted`).
    var url: String
    var etag: String?
    var lastModified: String?
    var bytes: UInt64

    /// The value to send in `If-Range`: a strong ETag, else Last-Modified.
    var ifRange: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// Reads the sidecar at `path`; `nil` when it is missing or unreadable.
    static func load(from path: String) -> PartialSidecar? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(PartialSidecar.self, from: data)
    }

    /// Replaces the sidecar at `path` atomically.
    func save(to path: String) throws(SystemCallError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding strings and integers cannot fail.
        let data = (try? encoder.encode(self)) ?? Data()
        try AtomicFile.write(Array(data), to: path)
    }

    /// How many bytes of the partial at `partialPath` a new attempt for `url`
    /// can keep: all of them, if the sidecar is for the same URL and names a
    /// validator. (The sidecar is written before the first byte of each
    /// response, so every byte in the file belongs to the entity it names; its
    /// `bytes` may lag behind the file after a crash.)
    static func resumableBytes(url: String, partialPath: String, sidecarPath: String) -> (bytes: UInt64, sidecar: PartialSidecar)? {
        guard let sidecar = load(from: sidecarPath), sidecar.url == DownloadError.redacted(url), sidecar.ifRange != nil else { return nil }
        var info = stat()
        guard Syscalls.current.stat(partialPath, &info) == 0, info.st_size > 0 else { return nil }
        return (UInt64(info.st_size), sidecar)
    }

    /// Removes the partial and its sidecar; missing files are fine.
    static func discard(partialPath: String, sidecarPath: String) {
        unlink(partialPath)
        unlink(sidecarPath)
    }
}
