/// How `Downloader.download` behaves: integrity check, retries, timeouts and limits.
public struct DownloadOptions: Sendable {
    /// The SHA-256 the finished file must have, as 64 hex digits (either case);
    /// `nil` accepts any content.
    public var expectedSHA256: String?
    /// Attempts after the first one for retryable failures (timeouts,
    /// connection errors, 408, 429, 5xx).
    public var maximumRetries = 5
    /// How long connecting may take.
    public var connectTimeout: Duration = .seconds(10)
    /// How long the transfer may go without receiving a byte before it is
    /// aborted and retried. Resolution is one second (libcurl's low-speed timer).
    public var stallTimeout: Duration = .seconds(30)
    /// The largest file accepted, in bytes; `nil` for no limit.
    public var maximumBytes: UInt64?
    /// Extra request header lines ("Name: value"). Their values never appear
    /// in errors, as they may hold credentials.
    public var headers: [String] = []
    /// The wait before the first retry; doubled for each further retry, with
    /// jitter, capped at 30 seconds. A `Retry-After` header in seconds takes
    /// precedence.
    public var initialBackoff: Duration = .milliseconds(200)
    /// The `User-Agent` sent with every request.
    public var userAgent = "modelc"
    /// A PEM file of certificate authorities to trust for https instead of
    /// the system's store (a private CA, a test server).
    public var certificateAuthorities: String?

    /// The defaults: five retries, 10 s to connect, 30 s stall timeout, no limit.
    public init(
        expectedSHA256: String? = nil,
        maximumRetries: Int = 5,
        connectTimeout: Duration = .seconds(10),
        stallTimeout: Duration = .seconds(30),
        maximumBytes: UInt64? = nil,
        headers: [String] = [],
        initialBackoff: Duration = .milliseconds(200)
    ) {
        self.expectedSHA256 = expectedSHA256
        self.maximumRetries = maximumRetries
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.maximumBytes = maximumBytes
        self.headers = headers
        self.initialBackoff = initialBackoff
    }
}
