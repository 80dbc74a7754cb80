import SystemIO

/// Why a download failed. Descriptions are one line naming the URL (with any
/// user name and password removed); request header values never appear.
public enum DownloadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The URL's scheme is not http, https or file.
    case unsupportedScheme(url: String)
    /// The text is not a URL libcurl accepts.
    case badURL(String)
    /// The server answered with a status that is not retried (or retries ran out).
    case http(url: String, status: Int)
    /// The transfer failed below HTTP (connection, timeout, TLS) after `attempts` attempts.
    case network(url: String, reason: String, attempts: Int)
    /// A redirect was not followed: too many, or to a scheme other than http and https.
    case redirect(url: String, reason: String)
    /// The finished file's SHA-256 is not the expected one; nothing was kept.
    case checksumMismatch(url: String, expected: String, actual: String)
    /// The file is larger than `DownloadOptions.maximumBytes`; nothing was kept.
    case tooLarge(url: String, limit: UInt64)
    /// Writing the file, its partial or its sidecar failed.
    case write(SystemCallError)

    public var description: String {
        switch self {
        case .unsupportedScheme(let url):
            return "\(Self.redacted(url)): unsupported scheme (http, https and file are supported)"
        case .badURL(let url):
            return "\(Self.redacted(url)): not a valid URL"
        case .http(let url, let status):
            return "\(Self.redacted(url)): server answered HTTP \(status)"
        case .network(let url, let reason, let attempts):
            return "\(Self.redacted(url)): \(reason) (\(attempts) attempt\(attempts == 1 ? "" : "s"))"
        case .redirect(let url, let reason):
            return "\(Self.redacted(url)): \(reason)"
        case .checksumMismatch(let url, let expected, let actual):
            return "\(Self.redacted(url)): SHA-256 is \(actual), expected \(expected)"
        case .tooLarge(let url, let limit):
            return "\(Self.redacted(url)): larger than the limit of \(limit) bytes"
        case .write(let error):
            return error.description
        }
    }

    /// `url` without the user information before the host ("user:password@").
    public static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<schemeEnd.upperBound]) + "…@" + String(url[rest.index(after: at)...])
    }
}
