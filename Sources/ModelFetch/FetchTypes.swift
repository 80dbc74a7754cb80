import ModelArchive
import SystemIO

/// How `Fetcher.fetch` behaves.
public struct FetchOptions: Sendable {
    /// The transfer: pinned SHA-256, retries, timeouts, size limit, headers.
    public var download: DownloadOptions
    /// Never touch the network: answer from the cache or fail.
    public var offline: Bool
    /// The model to pick when the file is an archive holding several
    /// (its path in the archive or its last component).
    public var member: String?
    /// Limits for unpacking archives.
    public var extractionLimits: ExtractionLimits

    public init(download: DownloadOptions = .init(), offline: Bool = false, member: String? = nil, extractionLimits: ExtractionLimits = .init()) {
        self.download = download
        self.offline = offline
        self.member = member
        self.extractionLimits = extractionLimits
    }
}

/// Where a fetched file came from.
public enum FetchSource: String, Sendable, Equatable {
    /// Downloaded in this fetch (perhaps resuming an earlier partial download).
    case network
    /// The server answered that the cached copy is current (HTTP 304).
    case revalidated
    /// Taken from the cache without asking the server: a pinned SHA-256 the
    /// cache holds, offline mode, or another process's download just waited for.
    case cache
}

/// What `Fetcher.fetch` produced. Its paths are in the cache: run the work
/// that reads them inside `FetchCache.keepingFiles` so that no prune
/// removes them meanwhile.
public struct FetchResult: Sendable {
    public var url: String
    /// The downloaded file's SHA-256 (of the archive, for an archive).
    public var sha256: String
    /// The downloaded file's size.
    public var bytes: UInt64
    /// The downloaded file in the cache (read-only).
    public var blobPath: String
    /// The model: `blobPath`, or for an archive the model unpacked from it
    /// (a file or an `.mlpackage` directory) in the cache.
    public var path: String
    /// The model's path inside the archive, when the file is one.
    public var archiveMember: String?
    public var source: FetchSource
    /// The transfer, when the file was downloaded in this fetch.
    public var transfer: DownloadResult?
}

/// What a fetch reports while it runs, on the fetching thread.
public enum FetchEvent: Sendable, Equatable {
    /// Another process (or thread) is fetching the same URL; this one waits
    /// for it. URLs in events carry no user name or password.
    case waitingForOtherProcess(url: String)
    /// Asking the server whether the cached copy is current.
    case revalidating(url: String)
    /// The transfer's own events.
    case download(DownloadEvent)
    /// Unpacking the archive into the cache.
    case extracting(path: String)
}

/// Why a fetch failed; descriptions are one line naming the URL or the file.
public enum FetchError: Error, Equatable, Sendable, CustomStringConvertible {
    case download(DownloadError)
    /// Offline, and the cache has no copy of the URL.
    case offlineMiss(url: String)
    /// The archive could not be unpacked, or the model in it not chosen.
    case archive(ArchiveError)
    /// A member was named but the downloaded file is not an archive.
    case notAnArchive(url: String)
    /// Reading or writing the cache failed.
    case cache(SystemCallError)

    public var description: String {
        switch self {
        case .download(let error): error.description
        case .offlineMiss(let url): "\(DownloadError.redacted(url)): not in the cache, and offline mode forbids downloading it"
        case .archive(let error): error.description
        case .notAnArchive(let url): "\(DownloadError.redacted(url)): a member was named, but the file is not a zip or tar archive"
        case .cache(let error): error.description
        }
    }
}
