/// What a finished download produced.
public struct DownloadResult: Sendable, Equatable {
    /// The destination path, now holding the whole file.
    public var path: String
    /// The file's SHA-256 as 64 lowercase hex digits.
    public var sha256: String
    /// The file's size in bytes.
    public var bytes: UInt64
    /// The bytes already on disk (from an earlier run or attempt) when the
    /// successful attempt started; 0 when it transferred the whole file.
    public var resumedFrom: UInt64
    /// The attempts made in this call, the successful one included.
    public var attempts: Int
    /// The server's `ETag` for the file, if it sent one.
    public var etag: String?
    /// The server's `Last-Modified` for the file, if it sent one.
    public var lastModified: String?

    /// Creates a result; `Downloader` is the usual source.
    public init(path: String, sha256: String, bytes: UInt64, resumedFrom: UInt64, attempts: Int, etag: String?, lastModified: String?) {
        self.path = path
        self.sha256 = sha256
        self.bytes = bytes
        self.resumedFrom = resumedFrom
        self.attempts = attempts
        self.etag = etag
        self.lastModified = lastModified
    }
}
