import CCurl

/// One attempt at a transfer with a libcurl easy handle.
///
/// Redirects are followed here rather than by libcurl, so that each hop's
/// target is checked (http or https only, at most `maximumRedirects`) and the
/// caller's own headers, which may carry credentials, go only to the origin
/// (scheme, host and port) of the URL they were given for.
enum CurlTransfer {
    static let maximumRedirects = 10

    /// How an attempt ended, before the retry policy looks at it.
    enum Outcome {
        /// libcurl finished; `status` is the HTTP status (0 for file://).
        case finished(status: Int)
        /// libcurl gave up with `code`.
        case failed(code: CURLcode)
        /// A redirect that is not followed: too many, or to a scheme other than http and https.
        case refusedRedirect(reason: String)
    }

    /// What the request sends besides the URL.
    struct Request {
        /// Sent as `If-Range` with the `Range` when the partial holds bytes.
        var ifRange: String?
        /// Conditional headers ("If-None-Match: …"), sent to every hop.
        var conditions: [String] = []
        var options: DownloadOptions
    }

    /// libcurl's process-wide setup, done once before the first handle.
    private static let globalSetup: CURLcode = modelc_curl_global_init_default()

    /// Runs one attempt for `url`, feeding `sink`; sends `Range` (and
    /// `If-Range`) when the partial already holds bytes.
    static func perform(url: String, sink: TransferSink, request: Request) -> Outcome {
        guard globalSetup == CURLE_OK, let handle = modelc_curl_easy_init() else {
            return .failed(code: CURLE_FAILED_INIT)
        }
        defer { modelc_curl_easy_cleanup(handle) }

        var common = request.conditions
        if let ifRange = request.ifRange, sink.partial.size > 0 { common.append("If-Range: \(ifRange)") }
        let withCredentials = HeaderList(common + request.options.headers)
        let withoutCredentials = HeaderList(common)
        defer { withExtendedLifetime((withCredentials, withoutCredentials)) {} }

        let options = request.options
        let context = Unmanaged.passUnretained(sink).toOpaque()
        var settings: [CURLcode] = [
            modelc_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https,file"),
            modelc_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0),
            modelc_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            modelc_curl_setopt_long(handle, CURLOPT_FAILONERROR, 0),
            modelc_curl_setopt_long(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS),
            modelc_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, 256 * 1024),
            modelc_curl_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent),
            modelc_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(options.connectTimeout)),
            modelc_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1),
            modelc_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, milliseconds(options.stallTimeout) / 1000)),
            modelc_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, writeCallback),
            modelc_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context),
            modelc_curl_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, headerCallback),
            modelc_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context),
        ]
        if sink.partial.size > 0 {
            settings.append(modelc_curl_setopt_string(handle, CURLOPT_RANGE, "\(sink.partial.size)-"))
        }
        if let authorities = options.certificateAuthorities {
            settings.append(modelc_curl_setopt_string(handle, CURLOPT_CAINFO, authorities))
        }
        if let failed = settings.first(where: { $0 != CURLE_OK }) {
            return .failed(code: failed)
        }

        let origin = Origin(url)
        var hop = url
        var redirects = 0
        while true {
            let headers = Origin(hop) == origin ? withCredentials : withoutCredentials
            let hopSettings = [
                modelc_curl_setopt_string(handle, CURLOPT_URL, hop),
                modelc_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headers.pointer)),
            ]
            if let failed = hopSettings.first(where: { $0 != CURLE_OK }) {
                return .failed(code: failed)
            }
            let result = modelc_curl_easy_perform(handle)
            guard result == CURLE_OK else { return .failed(code: result) }
            var status = 0
            _ = modelc_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            guard [301, 302, 303, 307, 308].contains(status), let target = redirectTarget(handle) else {
                return .finished(status: status)
            }
            redirects += 1
            guard redirects <= maximumRedirects else {
                return .refusedRedirect(reason: "more than \(maximumRedirects) redirects")
            }
            guard let scheme = Origin(target)?.scheme, scheme == "http" || scheme == "https" else {
                return .refusedRedirect(reason: "redirected to \(DownloadError.redacted(target)), which is not http or https")
            }
            hop = target
        }
    }

    /// libcurl's text for `code`.
    static func reason(_ code: CURLcode) -> String {
        String(cString: modelc_curl_easy_strerror(code))
    }

    /// The absolute URL a redirect response points to, resolved by libcurl.
    private static func redirectTarget(_ handle: UnsafeMutableRawPointer) -> String? {
        var target: UnsafeMutablePointer<CChar>?
        guard modelc_curl_getinfo_string(handle, CURLINFO_REDIRECT_URL, &target) == CURLE_OK, let target else { return nil }
        return String(cString: target)
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: seconds) &* 1000 &+ Int(attoseconds / 1_000_000_000_000_000)
    }
}

/// A URL's scheme, host and port, as libcurl's URL parser reads them
/// (default ports filled in, host lowercased).
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: String

    init?(_ url: String) {
        guard let parsed = modelc_curl_url() else { return nil }
        defer { modelc_curl_url_cleanup(parsed) }
        guard modelc_curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        func part(_ which: CURLUPart, _ flags: UInt32 = 0) -> String? {
            var text: UnsafeMutablePointer<CChar>?
            guard modelc_curl_url_get(parsed, which, &text, flags) == CURLUE_OK, let text else { return nil }
            defer { modelc_curl_free(text) }
            return String(cString: text)
        }
        guard let scheme = part(CURLUPART_SCHEME) else { return nil }
        self.scheme = scheme.lowercased()
        host = (part(CURLUPART_HOST) ?? "").lowercased()
        port = part(CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)) ?? ""
    }
}

/// A libcurl header list, freed with its owner.
private final class HeaderList {
    let pointer: UnsafeMutablePointer<curl_slist>?

    init(_ lines: [String]) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines { list = modelc_curl_slist_append(list, line) }
        pointer = list
    }

    deinit { modelc_curl_slist_free_all(pointer) }
}

private let writeCallback: curl_write_callback = { data, size, count, context in
    guard let context else { return 0 }
    let sink = Unmanaged<TransferSink>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard length > 0 else { return 0 }
    guard let data else { return 0 }
    return sink.body(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let headerCallback: curl_write_callback = { data, size, count, context in
    guard let context else { return 0 }
    let sink = Unmanaged<TransferSink>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    sink.header(line)
    return length
}
