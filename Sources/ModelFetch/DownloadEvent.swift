/// What a download reports while it runs, on the downloading thread.
public enum DownloadEvent: Sendable, Equatable {
    /// A response began delivering the file: `resumedFrom` bytes were kept
    /// from a partial; `total` is the whole file's size when the server said.
    case started(resumedFrom: UInt64, total: UInt64?)
    /// `bytes` of the file are on disk.
    case progress(bytes: UInt64, total: UInt64?)
    /// Attempt `attempt` failed for `reason`; the next starts after `delay`.
    case retrying(attempt: Int, reason: String, delay: Duration)
}

/// The validators of a copy already held, for a conditional request.
public struct CachedValidators: Sendable, Equatable, Codable {
    /// The `ETag` the server gave for the copy.
    public var etag: String?
    /// The `Last-Modified` the server gave for the copy.
    public var lastModified: String?

    public init(etag: String?, lastModified: String?) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Whether there is anything to ask the server with.
    public var isEmpty: Bool { etag == nil && lastModified == nil }

    /// `If-None-Match` and `If-Modified-Since` header lines.
    var conditionHeaders: [String] {
        var lines: [String] = []
        if let etag { lines.append("If-None-Match: \(etag)") }
        if let lastModified { lines.append("If-Modified-Since: \(lastModified)") }
        return lines
    }
}

/// How a conditional download ended.
public enum DownloadOutcome: Sendable, Equatable {
    /// The server sent the file (it changed, or had no validators to compare).
    case downloaded(DownloadResult)
    /// The server answered 304: the copy held is current; nothing was written.
    case notModified
}
