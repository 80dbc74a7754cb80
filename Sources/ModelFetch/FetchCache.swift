import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The download cache on disk: files stored by their SHA-256, and an index
/// from URL to file with the server's validators.
///
/// Layout under `root` (docs/cli.md, `modelc fetch`):
///
///     blobs/sha256/HEX       downloaded files, read-only, named by content
///     urls/KEY.json          one `CacheEntry` per URL (KEY = SHA-256 of the URL)
///     partial/KEY…           downloads in progress, resumable across runs
///     extracted/HEX/         archives unpacked, one directory per archive
///     locks/KEY.lock         one lock per URL: one process downloads it at a time
///     locks/cache.lock       shared by fetches, exclusive for pruning
///
/// Every file appears by atomic rename, so a killed process leaves at most a
/// partial download (which the next fetch resumes) or a stale staging entry.
public struct FetchCache: Sendable {
    /// The cache's directory.
    public let root: String

    /// A cache at `root`; nothing is created until it is used.
    public init(root: String) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
    }

    /// The default cache directory: `$MODELC_CACHE`, else
    /// `$XDG_CACHE_HOME/modelc`, else `$HOME/.cache/modelc`; `nil` when none
    /// of these variables is set.
    public static func defaultRoot(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let explicit = environment["MODELC_CACHE"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/modelc" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.cache/modelc" }
        return nil
    }

    // MARK: Paths

    var blobsDirectory: String { root + "/blobs/sha256" }
    var urlsDirectory: String { root + "/urls" }
    var partialDirectory: String { root + "/partial" }
    var extractedDirectory: String { root + "/extracted" }
    var locksDirectory: String { root + "/locks" }
    var cacheLockPath: String { locksDirectory + "/cache.lock" }

    /// The cached file with this SHA-256 (64 lowercase hex digits).
    public func blobPath(sha256: String) -> String { blobsDirectory + "/" + sha256 }
    /// Where the archive with this SHA-256 is unpacked.
    public func extractedPath(sha256: String) -> String { extractedDirectory + "/" + sha256 }

    /// The name used for everything kept per URL.
    static func key(for url: String) -> String { SHA256Digest.of(Array(url.utf8)).description }
    func entryPath(url: String) -> String { urlsDirectory + "/" + Self.key(for: url) + ".json" }
    func partialPath(url: String) -> String { partialDirectory + "/" + Self.key(for: url) }
    func lockPath(url: String) -> String { locksDirectory + "/" + Self.key(for: url) + ".lock" }

    /// Creates the cache's directories when missing.
    func prepare() throws(SystemCallError) {
        for directory in [root, root + "/blobs", blobsDirectory, urlsDirectory, partialDirectory, extractedDirectory, locksDirectory] {
            if Syscalls.current.mkdir(directory, 0o755) != 0, errno != EEXIST {
                throw SystemCallError(call: "mkdir", path: directory, code: errno)
            }
        }
    }

    /// Runs `body` while keeping pruning and verifying (by any process)
    /// from removing cached files: for work on the paths a fetch returned.
    /// Fetches may run inside; pruning or verifying inside would wait forever.
    public func keepingFiles<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        // Best effort: a cache that cannot be locked cannot be pruned either.
        let hold = (try? prepare()).flatMap { try? FileLock.acquire(cacheLockPath, mode: .shared) }
        defer { withExtendedLifetime(hold) {} }
        return try body()
    }

    // MARK: Entries

    /// The index entry for `url`, if the cache has one that can be read.
    public func entry(for url: String) -> CacheEntry? {
        guard let data = FileManager.default.contents(atPath: entryPath(url: url)),
              let entry = try? JSONDecoder().decode(CacheEntry.self, from: data), entry.key == Self.key(for: url)
        else { return nil }
        return entry
    }

    /// Every readable index entry, sorted by URL.
    public func entries() -> [CacheEntry] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: urlsDirectory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.compactMap { name in
            FileManager.default.contents(atPath: urlsDirectory + "/" + name).flatMap { try? JSONDecoder().decode(CacheEntry.self, from: $0) }
        }.sorted { $0.url < $1.url }
    }

    /// Writes `entry` into the index, replacing the URL's previous one atomically.
    func store(_ entry: CacheEntry) throws(SystemCallError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(entry)) ?? Data()
        try AtomicFile.write(Array(data), to: urlsDirectory + "/" + entry.key + ".json")
    }

    /// Removes an index entry.
    func removeEntry(_ entry: CacheEntry) {
        unlink(urlsDirectory + "/" + entry.key + ".json")
    }

    /// Whether the blob `entry` points to is there, with the size recorded.
    func holdsBlob(of entry: CacheEntry) -> Bool {
        blobSize(sha256: entry.sha256) == entry.bytes
    }

    /// The size of the blob, or `nil` when it is missing.
    func blobSize(sha256: String) -> UInt64? {
        var info = stat()
        guard Syscalls.current.stat(blobPath(sha256: sha256), &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return UInt64(info.st_size)
    }

    /// Moves a finished download into the blobs, named by its digest, and
    /// makes it read-only. It replaces a blob of that name (atomically):
    /// what was there may be damaged, what arrives was just hashed.
    func installBlob(from path: String, sha256: String) throws(SystemCallError) {
        let destination = blobPath(sha256: sha256)
        guard chmod(path, 0o444) == 0 else { throw SystemCallError(call: "chmod", path: path, code: errno) }
        guard Syscalls.current.rename(path, destination) == 0 else {
            throw SystemCallError(call: "rename", path: destination, code: errno)
        }
        try Syscalls.current.syncDirectory(blobsDirectory)
    }
}

/// What the cache knows about one URL.
public struct CacheEntry: Codable, Sendable, Equatable {
    /// The URL without any user name and password (the cache never stores those).
    public var url: String
    /// The SHA-256 of the whole URL, which names the entry's files.
    public var key: String
    /// The SHA-256 of the file, which names its blob.
    public var sha256: String
    public var bytes: UInt64
    /// The server's validators for the file, sent when revalidating.
    public var etag: String?
    public var lastModified: String?
    /// When the file was downloaded, in seconds since 1970.
    public var downloadedAt: Double
    /// When the server last confirmed the file (a download or a 304).
    public var checkedAt: Double
    /// When a fetch last used the file; pruning to a size removes the least recently used first.
    public var usedAt: Double

    public var validators: CachedValidators { CachedValidators(etag: etag, lastModified: lastModified) }

    init(url: String, sha256: String, bytes: UInt64, etag: String?, lastModified: String?, at time: Double) {
        self.url = DownloadError.redacted(url)
        key = FetchCache.key(for: url)
        self.sha256 = sha256
        self.bytes = bytes
        self.etag = etag
        self.lastModified = lastModified
        downloadedAt = time
        checkedAt = time
        usedAt = time
    }
}
