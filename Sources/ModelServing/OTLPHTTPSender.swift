import CCurl

/// Posts OTLP/HTTP JSON bodies to a collector with libcurl, keeping its connection open between
/// posts (as OTLP/HTTP recommends). Used by a `TraceExporter`'s thread only, one post at a time.
final class OTLPHTTPSender: @unchecked Sendable {
    let url: String
    private let connectTimeoutMilliseconds: Int
    private let timeoutMilliseconds: Int
    private var handle: UnsafeMutableRawPointer?
    private let headers: UnsafeMutablePointer<curl_slist>?

    /// libcurl's process-wide setup, done once before the first handle.
    private static let globalSetup: CURLcode = modelc_curl_global_init_default()

    init(url: String, connectTimeoutMilliseconds: Int = 1000, timeoutMilliseconds: Int = 5000) {
        self.url = url
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.timeoutMilliseconds = timeoutMilliseconds
        // An empty `Expect:` stops libcurl from waiting for a 100 Continue before a large body.
        headers = modelc_curl_slist_append(modelc_curl_slist_append(nil, "Content-Type: application/json"), "Expect:")
    }

    deinit {
        if let handle { modelc_curl_easy_cleanup(handle) }
        modelc_curl_slist_free_all(headers)
    }

    /// Why `url` cannot be a collector's endpoint (not an absolute http or https URL with a host),
    /// or nil when it can.
    static func problem(with url: String) -> String? {
        guard globalSetup == CURLE_OK, let parsed = modelc_curl_url() else {
            return "libcurl cannot be loaded: " + String(cString: modelc_curl_easy_strerror(CURLE_FAILED_INIT))
        }
        defer { modelc_curl_url_cleanup(parsed) }
        guard modelc_curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { return "not a URL" }
        func part(_ which: CURLUPart) -> String? {
            var text: UnsafeMutablePointer<CChar>?
            guard modelc_curl_url_get(parsed, which, &text, 0) == CURLUE_OK, let text else { return nil }
            defer { modelc_curl_free(text) }
            return String(cString: text)
        }
        guard let scheme = part(CURLUPART_SCHEME)?.lowercased(), scheme == "http" || scheme == "https" else {
            return "not an http or https URL"
        }
        guard let host = part(CURLUPART_HOST), !host.isEmpty else { return "no host" }
        return nil
    }

    /// Posts `body`; `.sent` on a 2xx answer.
    func post(_ body: [UInt8]) -> TraceExporter.Outcome {
        guard Self.globalSetup == CURLE_OK else { return .failed("libcurl cannot be loaded") }
        if handle == nil { handle = makeHandle() }
        guard let handle else { return .failed("libcurl cannot make a transfer") }
        let result = body.withUnsafeBytes { bytes -> CURLcode in
            let settings = [
                modelc_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, bytes.count),
                modelc_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress)),
            ]
            if let failed = settings.first(where: { $0 != CURLE_OK }) { return failed }
            return modelc_curl_easy_perform(handle)
        }
        guard result == CURLE_OK else {
            // A fresh connection next time.
            modelc_curl_easy_cleanup(handle)
            self.handle = nil
            return .failed("\(url): \(String(cString: modelc_curl_easy_strerror(result)))")
        }
        var status = 0
        _ = modelc_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return (200..<300).contains(status) ? .sent : .failed("\(url): the collector answered HTTP \(status)")
    }

    private func makeHandle() -> UnsafeMutableRawPointer? {
        guard let handle = modelc_curl_easy_init() else { return nil }
        let settings = [
            modelc_curl_setopt_string(handle, CURLOPT_URL, url),
            modelc_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"),
            modelc_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            modelc_curl_setopt_long(handle, CURLOPT_POST, 1),
            modelc_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0),
            modelc_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds),
            modelc_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds),
            modelc_curl_setopt_string(handle, CURLOPT_USERAGENT, "modelc-serve"),
            modelc_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headers)),
            // The answer (an ExportTraceServiceResponse) is not needed: its status says enough.
            modelc_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count },
        ]
        guard settings.allSatisfy({ $0 == CURLE_OK }) else {
            modelc_curl_easy_cleanup(handle)
            return nil
        }
        return handle
    }
}
