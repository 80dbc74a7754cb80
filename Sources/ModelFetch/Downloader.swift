import CCurl
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Downloads files over http, https and file URLs, resumably and with retries.
public enum Downloader {
    /// Downloads `url` (http, https or file) to `destination` and returns what was written.
    ///
    /// Bytes go to `destination + ".partial"`, beside a sidecar
    /// `destination + ".partial.json"` recording the URL, the server's
    /// validator (ETag or Last-Modified) and the bytes written, so a later
    /// call continues with `Range` and `If-Range`. A 200 answer to a range
    /// request restarts from zero; a 416 or a changed validator discards the
    /// partial. Timeouts, connection errors, 408, 429 and 5xx are retried up to
    /// `options.maximumRetries` times with exponential backoff and jitter,
    /// honouring `Retry-After` (seconds); other statuses fail at once.
    ///
    /// The SHA-256 is computed while streaming (after hashing the bytes kept
    /// from a partial); with `options.expectedSHA256` a mismatch removes the
    /// partial and its sidecar. On success the file is flushed to disk and
    /// renamed to `destination`, so `destination` never holds part of a file.
    /// Redirects are followed for http and https only, at most 10; the
    /// headers in `options.headers` (credentials, say) are sent only to the
    /// first URL's scheme, host and port, never to another after a redirect.
    /// Memory use does not grow with the file's size.
    ///
    /// Blocks the calling thread. `events` is called on it as the transfer
    /// starts, progresses and retries. Two calls must not share a
    /// `destination` at the same time.
    ///
    /// - Throws: `DownloadError`; its description names the URL but never a
    ///   header value from `options.headers`.
    public static func download(
        _ url: String,
        to destination: String,
        options: DownloadOptions = .init(),
        events: (@Sendable (DownloadEvent) -> Void)? = nil
    ) throws(DownloadError) -> DownloadResult {
        switch try download(url, to: destination, ifChangedFrom: nil, options: options, events: events) {
        case .downloaded(let result): return result
        case .notModified: throw .http(url: url, status: 304)
        }
    }

    /// Downloads `url` as `download(_:to:options:events:)` does, unless the
    /// server answers that the copy described by `validators` is current
    /// (`If-None-Match` / `If-Modified-Since` answered with 304): then nothing
    /// is written and any partial download of `destination` is discarded.
    /// `nil` or empty `validators` make the request unconditional.
    public static func download(
        _ url: String,
        to destination: String,
        ifChangedFrom validators: CachedValidators?,
        options: DownloadOptions = .init(),
        events: (@Sendable (DownloadEvent) -> Void)? = nil
    ) throws(DownloadError) -> DownloadOutcome {
        let isHTTP = try checkScheme(url) != "file"
        let partialPath = destination + ".partial"
        let sidecarPath = partialPath + ".json"
        var attempts = 0
        while true {
            attempts += 1
            let resume = isHTTP ? PartialSidecar.resumableBytes(url: url, partialPath: partialPath, sidecarPath: sidecarPath) : nil
            if resume == nil { PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath) }
            let partial: PartialFile
            do {
                partial = try PartialFile(path: partialPath, keeping: resume?.bytes ?? 0)
            } catch {
                throw .write(error)
            }
            let sink = TransferSink(
                url: url, isHTTP: isHTTP, partial: partial, sidecarPath: sidecarPath,
                resumedSidecar: resume?.sidecar, maximumBytes: options.maximumBytes, events: events
            )
            let request = CurlTransfer.Request(
                ifRange: resume?.sidecar.ifRange, conditions: isHTTP ? validators?.conditionHeaders ?? [] : [], options: options)
            let outcome = CurlTransfer.perform(url: url, sink: sink, request: request)

            let retry: Retry
            switch sink.failure {
            case .write(let error)?:
                throw .write(error)
            case .tooLarge?:
                PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath)
                throw .tooLarge(url: url, limit: options.maximumBytes ?? 0)
            case .mismatchedResume?:
                PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath)
                retry = .network("the server did not continue the partial download where it ended")
            case nil:
                switch outcome {
                case .finished(let status) where !isHTTP || ((200..<300).contains(status) && !sink.discardingBody):
                    return .downloaded(try finish(url: url, destination: destination, sink: sink, attempts: attempts, options: options))
                case .finished(304) where !(validators?.isEmpty ?? true):
                    PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath)
                    return .notModified
                case .finished(let status) where status == 416:
                    PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath)
                    retry = .http(status, retryAfterSeconds: nil)
                case .finished(let status) where status == 408 || status == 429 || (500..<600).contains(status):
                    retry = .http(status, retryAfterSeconds: sink.retryAfterSeconds)
                case .finished(let status):
                    abandonIfEmpty(sink, partialPath: partialPath, sidecarPath: sidecarPath)
                    throw .http(url: url, status: status)
                case .failed(let code) where code == CURLE_URL_MALFORMAT:
                    abandonIfEmpty(sink, partialPath: partialPath, sidecarPath: sidecarPath)
                    throw .badURL(url)
                case .failed(let code) where isRetryable(code):
                    do { try sink.updateSidecar() } catch { throw .write(error) }
                    retry = .network(CurlTransfer.reason(code))
                case .failed(let code):
                    abandonIfEmpty(sink, partialPath: partialPath, sidecarPath: sidecarPath)
                    throw .network(url: url, reason: CurlTransfer.reason(code), attempts: attempts)
                case .refusedRedirect(let reason):
                    abandonIfEmpty(sink, partialPath: partialPath, sidecarPath: sidecarPath)
                    throw .redirect(url: url, reason: reason)
                }
            }

            guard attempts <= options.maximumRetries else {
                abandonIfEmpty(sink, partialPath: partialPath, sidecarPath: sidecarPath)
                switch retry {
                case .http(let status, _): throw .http(url: url, status: status)
                case .network(let reason): throw .network(url: url, reason: reason, attempts: attempts)
                }
            }
            let retryAfter: Int? = if case .http(_, let seconds) = retry { seconds } else { nil }
            let delay = Backoff.delay(retry: attempts, initial: options.initialBackoff, retryAfterSeconds: retryAfter)
            events?(.retrying(attempt: attempts, reason: retry.reason, delay: delay))
            Backoff.sleep(delay)
        }
    }

    /// Why an attempt is worth repeating.
    private enum Retry {
        case http(Int, retryAfterSeconds: Int?)
        case network(String)

        var reason: String {
            switch self {
            case .http(let status, _): "HTTP \(status)"
            case .network(let reason): reason
            }
        }
    }

    /// The URL's scheme, lowercased, if it is one `download` supports.
    static func checkScheme(_ url: String) throws(DownloadError) -> String {
        guard let separator = url.range(of: "://"), separator.lowerBound > url.startIndex else { throw .badURL(url) }
        let scheme = url[..<separator.lowerBound].lowercased()
        guard scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) else { throw .badURL(url) }
        guard ["http", "https", "file"].contains(scheme) else { throw .unsupportedScheme(url: url) }
        return scheme
    }

    /// Failures a later attempt may not meet: timeouts (including stalls) and
    /// broken or refused connections.
    private static func isRetryable(_ code: CURLcode) -> Bool {
        [
            CURLE_OPERATION_TIMEDOUT, CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST,
            CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING,
            CURLE_SSL_CONNECT_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
        ].contains(code)
    }

    /// Removes a partial that holds nothing worth resuming.
    private static func abandonIfEmpty(_ sink: TransferSink, partialPath: String, sidecarPath: String) {
        if sink.partial.size == 0 { PartialSidecar.discard(partialPath: partialPath, sidecarPath: sidecarPath) }
    }

    /// Flushes the partial, checks its digest, and renames it into place.
    private static func finish(url: String, destination: String, sink: TransferSink, attempts: Int, options: DownloadOptions) throws(DownloadError) -> DownloadResult {
        let partialPath = sink.partial.path
        let digest: SHA256Digest
        do { digest = try sink.partial.finish() } catch { throw .write(error) }
        let actual = digest.description
        if let expected = options.expectedSHA256, expected.lowercased() != actual {
            PartialSidecar.discard(partialPath: partialPath, sidecarPath: sink.sidecarPath)
            throw .checksumMismatch(url: url, expected: expected, actual: actual)
        }
        let calls = Syscalls.current
        guard calls.rename(partialPath, destination) == 0 else {
            throw .write(SystemCallError(call: "rename", path: destination, code: errno))
        }
        unlink(sink.sidecarPath)
        do { try calls.syncDirectory(parentDirectory(of: destination)) } catch { throw .write(error) }
        return DownloadResult(
            path: destination, sha256: actual, bytes: sink.partial.size, resumedFrom: sink.resumedFrom,
            attempts: attempts, etag: sink.etag, lastModified: sink.lastModified
        )
    }

    private static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
