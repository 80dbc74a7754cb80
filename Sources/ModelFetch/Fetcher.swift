import Foundation
import ModelArchive
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Fetches models through a `FetchCache`: downloads once, revalidates
/// cheaply, shares one transfer between processes, and unpacks archives.
public enum Fetcher {
    /// Fetches `url` into `cache` and returns the cached file (and, for an
    /// archive, the model unpacked from it).
    ///
    /// In order:
    /// 1. With a pinned SHA-256 the cache already holds (and that still
    ///    hashes to the pin), nothing touches the network.
    /// 2. Offline, the URL's cached copy is used, or the fetch fails.
    /// 3. A per-URL lock makes one process download while others wait
    ///    (reported as `.waitingForOtherProcess`); a waiter then reuses the
    ///    copy the other process confirmed after the waiter started.
    /// 4. A cached copy with validators is revalidated with a conditional
    ///    request: 304 means no transfer. Otherwise the file is downloaded
    ///    (resuming a partial download left by an earlier run), checked
    ///    against the pin, and moved into the cache by rename.
    /// 5. A zip or tar file is unpacked once into the cache; the model in it
    ///    (or `options.member`) is chosen.
    ///
    /// Blocks the calling thread; `events` is called on it.
    public static func fetch(
        _ url: String,
        cache: FetchCache,
        options: FetchOptions = .init(),
        events: (@Sendable (FetchEvent) -> Void)? = nil
    ) throws(FetchError) -> FetchResult {
        let scheme: String
        do { scheme = try Downloader.checkScheme(url) } catch { throw .download(error) }
        let started = Date().timeIntervalSince1970
        let hold: FileLock
        do {
            try cache.prepare()
            hold = try FileLock.acquire(cache.cacheLockPath, mode: .shared)
        } catch {
            throw .cache(error)
        }
        defer { withExtendedLifetime(hold) {} }
        let pin = options.download.expectedSHA256?.lowercased()

        var found: (sha256: String, source: FetchSource, transfer: DownloadResult?)
        if let pin, let cached = try cachedBlob(pin, cache: cache) {
            record(url: url, sha256: pin, bytes: cached, in: cache)
            found = (pin, .cache, nil)
        } else if options.offline {
            guard let entry = cache.entry(for: url), cache.holdsBlob(of: entry) else {
                throw .offlineMiss(url: url)
            }
            if let pin, pin != entry.sha256 {
                throw .download(.checksumMismatch(url: url, expected: pin, actual: entry.sha256))
            }
            touch(entry, in: cache)
            found = (entry.sha256, .cache, nil)
        } else {
            found = try fetchLocked(url, isHTTP: scheme != "file", started: started, cache: cache, options: options, events: events)
        }

        let blob = cache.blobPath(sha256: found.sha256)
        var result = FetchResult(
            url: url, sha256: found.sha256, bytes: cache.blobSize(sha256: found.sha256) ?? 0, blobPath: blob, path: blob,
            archiveMember: nil, source: found.source, transfer: found.transfer)
        guard ArchiveExtractor.looksLikeArchive(blob) else {
            if options.member != nil { throw .notAnArchive(url: url) }
            return result
        }
        let directory = cache.extractedPath(sha256: found.sha256)
        try unpackOnce(blob, into: directory, cache: cache, options: options, events: events)
        do { result.path = try ArchiveExtractor.model(in: directory, extractedFrom: blob, member: options.member) } catch {
            throw .archive(error)
        }
        result.archiveMember = String(result.path.dropFirst(directory.count + 1))
        return result
    }

    /// Unpacks the archive `blob` into `directory` unless it is there: one
    /// unpacking per archive, whichever URLs, threads and processes want it.
    private static func unpackOnce(
        _ blob: String, into directory: String, cache: FetchCache, options: FetchOptions, events: (@Sendable (FetchEvent) -> Void)?
    ) throws(FetchError) {
        let unpacking: FileLock
        do { unpacking = try FileLock.acquire(cache.locksDirectory + "/extract-\(URL(fileURLWithPath: blob).lastPathComponent).lock", mode: .exclusive) } catch {
            throw .cache(error)
        }
        defer { withExtendedLifetime(unpacking) {} }
        guard !FileManager.default.fileExists(atPath: directory) else { return }
        events?(.extracting(path: blob))
        do { _ = try ArchiveExtractor.extract(blob, into: directory, limits: options.extractionLimits) } catch { throw .archive(error) }
    }

    /// Steps 3 and 4 of `fetch`, under the URL's lock.
    private static func fetchLocked(
        _ url: String, isHTTP: Bool, started: Double, cache: FetchCache, options: FetchOptions,
        events: (@Sendable (FetchEvent) -> Void)?
    ) throws(FetchError) -> (sha256: String, source: FetchSource, transfer: DownloadResult?) {
        let lockPath = cache.lockPath(url: url)
        let lock: FileLock
        var waited = false
        do {
            if let free = try FileLock.attempt(lockPath, mode: .exclusive) {
                lock = free
            } else {
                events?(.waitingForOtherProcess(url: DownloadError.redacted(url)))
                lock = try FileLock.acquire(lockPath, mode: .exclusive)
                waited = true
            }
        } catch {
            throw .cache(error)
        }
        defer { withExtendedLifetime(lock) {} }

        let pin = options.download.expectedSHA256?.lowercased()
        var validators: CachedValidators?
        if let entry = cache.entry(for: url), cache.holdsBlob(of: entry), pin == nil || pin == entry.sha256 {
            if waited, entry.checkedAt >= started {
                touch(entry, in: cache)
                return (entry.sha256, .cache, nil)
            }
            if isHTTP, !entry.validators.isEmpty {
                validators = entry.validators
                events?(.revalidating(url: DownloadError.redacted(url)))
            }
        }

        var forward: (@Sendable (DownloadEvent) -> Void)?
        if let events {
            forward = { @Sendable event in events(.download(event)) }
        }
        let outcome: DownloadOutcome
        do {
            outcome = try Downloader.download(url, to: cache.partialPath(url: url), ifChangedFrom: validators, options: options.download, events: forward)
        } catch {
            throw .download(error)
        }
        let now = Date().timeIntervalSince1970
        switch outcome {
        case .notModified:
            // `validators` came from an entry that was just read.
            guard var entry = cache.entry(for: url) else {
                throw .cache(SystemCallError(call: "read", path: cache.entryPath(url: url), code: ENOENT))
            }
            entry.checkedAt = now
            entry.usedAt = now
            do { try cache.store(entry) } catch { throw .cache(error) }
            return (entry.sha256, .revalidated, nil)
        case .downloaded(let transfer):
            do {
                try cache.installBlob(from: transfer.path, sha256: transfer.sha256)
                try cache.store(CacheEntry(
                    url: url, sha256: transfer.sha256, bytes: transfer.bytes, etag: transfer.etag, lastModified: transfer.lastModified, at: now))
            } catch {
                throw .cache(error)
            }
            return (transfer.sha256, .network, transfer)
        }
    }

    /// The size of the cached blob named `sha256` if it is there and still
    /// hashes to its name; a damaged blob is removed.
    private static func cachedBlob(_ sha256: String, cache: FetchCache) throws(FetchError) -> UInt64? {
        guard cache.blobSize(sha256: sha256) != nil else { return nil }
        let path = cache.blobPath(sha256: sha256)
        guard let (digest, size) = try? SHA256Digest.ofFile(at: path) else { return nil }
        guard digest.description == sha256 else {
            unlink(path)
            return nil
        }
        return size
    }

    /// Points `url`'s index entry at a blob found by its pin, unless it
    /// already does. Best effort: the blob is usable either way.
    private static func record(url: String, sha256: String, bytes: UInt64, in cache: FetchCache) {
        let now = Date().timeIntervalSince1970
        if let entry = cache.entry(for: url), entry.sha256 == sha256 {
            return touch(entry, in: cache)
        }
        try? cache.store(CacheEntry(url: url, sha256: sha256, bytes: bytes, etag: nil, lastModified: nil, at: now))
    }

    /// Records that `entry`'s file was used now, for pruning by size. Best
    /// effort: a read-only cache still serves its files.
    private static func touch(_ entry: CacheEntry, in cache: FetchCache) {
        var entry = entry
        entry.usedAt = Date().timeIntervalSince1970
        try? cache.store(entry)
    }
}
