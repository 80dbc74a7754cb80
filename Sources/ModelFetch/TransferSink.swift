import Foundation
import SystemIO

/// The state libcurl's callbacks share during one attempt: the response
/// headers seen so far, the partial file, and what went wrong, if anything.
///
/// Callbacks must not throw, so a failure is recorded here and the callback
/// returns 0, which makes libcurl abort the transfer.
final class TransferSink {
    /// Why the sink stopped the transfer.
    enum Failure {
        case write(SystemCallError)
        case tooLarge
        /// A 206 that does not continue where the partial ends, or a changed validator.
        case mismatchedResume
    }

    let url: String
    let isHTTP: Bool
    let partial: PartialFile
    let sidecarPath: String
    /// The validator the partial was written against; `nil` when starting from zero.
    let resumedSidecar: PartialSidecar?
    let maximumBytes: UInt64?
    let events: (@Sendable (DownloadEvent) -> Void)?

    /// The status of the last response's status line (0 for file://).
    private(set) var status = 0
    private(set) var etag: String?
    private(set) var lastModified: String?
    private(set) var retryAfterSeconds: Int?
    private(set) var contentRangeStart: UInt64?
    private(set) var contentLength: UInt64?
    /// The partial's size when the body started (0 after a restart).
    private(set) var resumedFrom: UInt64 = 0
    private(set) var failure: Failure?
    private var bodyStarted = false
    /// The body is an error page, not the file: read and dropped.
    private(set) var discardingBody = false

    init(url: String, isHTTP: Bool, partial: PartialFile, sidecarPath: String, resumedSidecar: PartialSidecar?, maximumBytes: UInt64?, events: (@Sendable (DownloadEvent) -> Void)?) {
        self.url = url
        self.isHTTP = isHTTP
        self.partial = partial
        self.sidecarPath = sidecarPath
        self.resumedSidecar = resumedSidecar
        self.maximumBytes = maximumBytes
        self.events = events
        resumedFrom = partial.size
    }

    /// Takes one header line, as libcurl hands them over (with CRLF).
    func header(_ line: String) {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("HTTP/") {
            // A new response (after a redirect or a 100): forget the last one's headers.
            status = trimmed.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            etag = nil
            lastModified = nil
            retryAfterSeconds = nil
            contentRangeStart = nil
            contentLength = nil
            bodyStarted = false
            discardingBody = false
            return
        }
        guard let colon = trimmed.firstIndex(of: ":") else { return }
        let name = trimmed[..<colon].lowercased()
        let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        switch name {
        case "etag": etag = value
        case "last-modified": lastModified = value
        case "retry-after": retryAfterSeconds = Self.retryAfter(value, now: Date())
        case "content-length": contentLength = UInt64(value)
        case "content-range":
            // "bytes START-END/TOTAL"
            if value.hasPrefix("bytes "), let dash = value.firstIndex(of: "-") {
                contentRangeStart = UInt64(value[value.index(value.startIndex, offsetBy: 6)..<dash])
            }
        default: break
        }
    }

    /// Seconds to wait from a `Retry-After` value: a number of seconds, or
    /// an HTTP date (RFC 9110: IMF-fixdate), counted from `now`.
    static func retryAfter(_ value: String, now: Date) -> Int? {
        if let seconds = Int(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, Int(date.timeIntervalSince(now).rounded(.up)))
    }

    /// Takes a piece of the body; returns false to abort the transfer.
    func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if !bodyStarted {
            bodyStarted = true
            guard begin() else { return false }
        }
        if discardingBody { return true }
        if let maximumBytes, partial.size + UInt64(bytes.count) > maximumBytes {
            failure = .tooLarge
            return false
        }
        do {
            try partial.append(bytes)
        } catch {
            failure = .write(error)
            return false
        }
        events?(.progress(bytes: partial.size, total: total))
        return true
    }

    /// The whole file's size, when the response said.
    private var total: UInt64? { contentLength.map { $0 + resumedFrom } }

    /// Decides, at the first body byte, what the response means for the partial.
    private func begin() -> Bool {
        let accepted = judgeResponse()
        if accepted, !discardingBody { events?(.started(resumedFrom: partial.size, total: total)) }
        return accepted
    }

    private func judgeResponse() -> Bool {
        guard isHTTP else {
            if partial.size > 0 { return restart() }
            return true
        }
        guard (200..<300).contains(status) else {
            discardingBody = true
            return true
        }
        if status == 206 {
            let validatorChanged = resumedSidecar.map { sidecar in
                (sidecar.etag != nil && etag != nil && sidecar.etag != etag)
                    || (sidecar.etag == nil && sidecar.lastModified != nil && lastModified != nil && sidecar.lastModified != lastModified)
            } ?? false
            guard contentRangeStart == partial.size, !validatorChanged else {
                failure = .mismatchedResume
                return false
            }
        } else if partial.size > 0 {
            return restart()
        }
        if let maximumBytes, let contentLength, contentLength + partial.size > maximumBytes {
            failure = .tooLarge
            return false
        }
        return saveSidecar()
    }

    private func restart() -> Bool {
        do {
            try partial.restart()
        } catch {
            failure = .write(error)
            return false
        }
        resumedFrom = 0
        return isHTTP ? saveSidecar() : true
    }

    /// Records the validator before the first byte of this response is written.
    private func saveSidecar() -> Bool {
        do {
            try PartialSidecar(url: DownloadError.redacted(url), etag: etag, lastModified: lastModified, bytes: partial.size).save(to: sidecarPath)
            return true
        } catch {
            failure = .write(error)
            return false
        }
    }

    /// Brings the sidecar's byte count up to date after the attempt.
    func updateSidecar() throws(SystemCallError) {
        guard isHTTP, bodyStarted, !discardingBody, partial.size > 0 else { return }
        try PartialSidecar(url: DownloadError.redacted(url), etag: etag, lastModified: lastModified, bytes: partial.size).save(to: sidecarPath)
    }
}
