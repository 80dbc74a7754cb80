import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// What the cache holds, for `modelc cache list`.
public struct CacheListing: Sendable {
    /// The URL index, sorted by URL.
    public var entries: [CacheEntry]
    /// Blobs no index entry points to (left by pinned fetches of other URLs, or by pruned entries).
    public var unreferencedBlobs: [String]
    /// Downloads in progress or interrupted: their URL (when the sidecar
    /// names one) and the bytes downloaded so far.
    public var partials: [(url: String?, bytes: UInt64)]
    /// Bytes used by blobs, unpacked archives and partial downloads.
    public var totalBytes: UInt64
}

/// What `verify` found.
public struct CacheVerification: Sendable, Equatable {
    /// Blobs read and hashed.
    public var checked: Int
    /// Blobs whose content no longer matches their name; they were removed,
    /// with their unpacked archives and index entries, so the next fetch downloads again.
    public var damaged: [String]
}

/// What `prune` removed.
public struct PruneReport: Sendable, Equatable {
    /// Index entries removed (their URLs).
    public var removedURLs: [String]
    /// Files and directories removed.
    public var removedItems: Int
    public var freedBytes: UInt64
}

extension FetchCache {
    /// Lists the index, the unreferenced blobs and the partial downloads.
    public func list() -> CacheListing {
        let entries = entries()
        let referenced = Set(entries.map(\.sha256))
        let blobs = blobNames()
        var partials: [(url: String?, bytes: UInt64)] = []
        for name in Self.names(in: partialDirectory) where name.hasSuffix(".partial") {
            let sidecar = PartialSidecar.load(from: partialDirectory + "/" + name + ".json")
            partials.append((sidecar?.url, Self.diskUsage(partialDirectory + "/" + name)))
        }
        return CacheListing(entries: entries, unreferencedBlobs: blobs.filter { !referenced.contains($0) },
                            partials: partials, totalBytes: usedBytes())
    }

    /// Hashes every blob; removes those whose content does not match their
    /// name, with what depends on them. Waits for running fetches to finish
    /// and keeps new ones waiting meanwhile.
    public func verify(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws(SystemCallError) -> CacheVerification {
        try prepare()
        let lock = try FileLock.acquire(cacheLockPath, mode: .exclusive)
        defer { withExtendedLifetime(lock) {} }
        let blobs = blobNames()
        var damaged: [String] = []
        for (index, name) in blobs.enumerated() {
            // An unreadable blob is as useless as a damaged one.
            let digest = try? SHA256Digest.ofFile(at: blobPath(sha256: name)).digest
            if digest?.description != name {
                damaged.append(name)
                _ = Self.remove(blobPath(sha256: name))
                _ = Self.remove(extractedPath(sha256: name))
                for entry in entries() where entry.sha256 == name { removeEntry(entry) }
            }
            progress?(index + 1, blobs.count)
        }
        return CacheVerification(checked: blobs.count, damaged: damaged)
    }

    /// Removes what no fetch needs: index entries whose blob is gone, blobs
    /// and unpacked archives no entry points to, and files left by killed
    /// processes. With `maximumBytes`, then removes partial downloads and the
    /// least recently used entries until the cache fits; `everything` empties
    /// it. Waits for running fetches to finish and keeps new ones waiting meanwhile.
    public func prune(maximumBytes: UInt64? = nil, everything: Bool = false) throws(SystemCallError) -> PruneReport {
        try prepare()
        let lock = try FileLock.acquire(cacheLockPath, mode: .exclusive)
        defer { withExtendedLifetime(lock) {} }
        var report = PruneReport(removedURLs: [], removedItems: 0, freedBytes: 0)
        func remove(_ path: String) {
            let freed = Self.remove(path)
            if let freed {
                report.removedItems += 1
                report.freedBytes += freed
            }
        }

        // No fetch runs now: any staging file is abandoned, and so is a
        // finished download that was not yet moved into the blobs.
        for directory in [urlsDirectory, blobsDirectory, extractedDirectory] {
            for name in Self.names(in: directory) where name.hasPrefix(".") { remove(directory + "/" + name) }
        }
        for name in Self.names(in: partialDirectory) where !name.hasSuffix(".partial") && !name.hasSuffix(".partial.json") {
            remove(partialDirectory + "/" + name)
        }
        let all = entries()
        if everything {
            for directory in [urlsDirectory, blobsDirectory, extractedDirectory, partialDirectory] {
                for name in Self.names(in: directory) { remove(directory + "/" + name) }
            }
            report.removedURLs = all.map(\.url)
            return report
        }
        var entries: [CacheEntry] = []
        for entry in all {
            if holdsBlob(of: entry) {
                entries.append(entry)
            } else {
                removeEntry(entry)
                report.removedURLs.append(entry.url)
            }
        }
        var referenced = Set(entries.map(\.sha256))
        for name in blobNames() where !referenced.contains(name) { remove(blobPath(sha256: name)) }
        for name in Self.names(in: extractedDirectory) where !referenced.contains(name) { remove(extractedPath(sha256: name)) }

        guard let maximumBytes else { return report }
        // Walked once; what `remove` frees is subtracted as it goes.
        let usedBefore = usedBytes()
        let freedBefore = report.freedBytes
        func used() -> UInt64 { usedBefore - min(usedBefore, report.freedBytes - freedBefore) }
        if used() > maximumBytes {
            for name in Self.names(in: partialDirectory) { remove(partialDirectory + "/" + name) }
        }
        for entry in entries.sorted(by: { $0.usedAt < $1.usedAt }) where used() > maximumBytes {
            removeEntry(entry)
            report.removedURLs.append(entry.url)
            entries.removeAll { $0.key == entry.key }
            referenced = Set(entries.map(\.sha256))
            if !referenced.contains(entry.sha256) {
                remove(blobPath(sha256: entry.sha256))
                remove(extractedPath(sha256: entry.sha256))
            }
        }
        return report
    }

    /// Bytes used by blobs, unpacked archives and partial downloads.
    private func usedBytes() -> UInt64 {
        [blobsDirectory, extractedDirectory, partialDirectory].reduce(0) { $0 + Self.diskUsage($1) }
    }

    /// The names in `blobs/sha256` that are SHA-256 digests.
    private func blobNames() -> [String] {
        Self.names(in: blobsDirectory).filter { name in
            name.utf8.count == 64 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
    }

    private static func names(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// The bytes of the files at or below `path` (blocks actually allocated;
    /// directories themselves not counted).
    static func diskUsage(_ path: String) -> UInt64 {
        var info = stat()
        guard lstat(path, &info) == 0 else { return 0 }
        guard info.st_mode & S_IFMT == S_IFDIR else { return UInt64(info.st_blocks) * 512 }
        return names(in: path).reduce(0) { $0 + diskUsage(path + "/" + $1) }
    }

    /// Removes a file or a directory tree; returns the bytes freed, or `nil`
    /// when nothing was there.
    private static func remove(_ path: String) -> UInt64? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let bytes = diskUsage(path)
        if info.st_mode & S_IFMT == S_IFDIR {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            unlink(path)
        }
        return bytes
    }
}
