import CCurl

/// One attempt at a transfer with a libcurl easy handle.
enum CurlTransfer {
    /// How an attempt ended, before the retry policy looks at it.
    enum Outcome {
        /// libcurl finished; `status` is the HTTP status (0 for file://).
        case finished(status: Int)
        /// libcurl gave up with `code`.
        case failed(code: CURLcode)
    }

    /// libcurl's process-wide setup, done once before the first handle.
    private static let globalSetup: CURLcode = modelc_curl_global_init_default()

    /// Runs one attempt for `url`, feeding `sink`; sends `Range` (and
    /// `If-Range: ifRange`) when the partial already holds bytes.
    static func perform(url: String, sink: TransferSink, ifRange: String?, options: DownloadOptions) -> Outcome {
        guard globalSetup == CURLE_OK, let handle = curl_easy_init() else {
            return .failed(code: CURLE_FAILED_INIT)
        }
        defer { curl_easy_cleanup(handle) }

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for line in options.headers {
            headerList = curl_slist_append(headerList, line)
        }
        if let ifRange, sink.partial.size > 0 {
            headerList = curl_slist_append(headerList, "If-Range: \(ifRange)")
        }

        let context = Unmanaged.passUnretained(sink).toOpaque()
        var code = modelc_curl_setopt_string(handle, CURLOPT_URL, url)
        let settings: [CURLcode] = [
            modelc_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https,file"),
            modelc_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"),
            modelc_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1),
            modelc_curl_setopt_long(handle, CURLOPT_MAXREDIRS, 10),
            modelc_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
            modelc_curl_setopt_long(handle, CURLOPT_FAILONERROR, 0),
            modelc_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(options.connectTimeout)),
            modelc_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1),
            modelc_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, milliseconds(options.stallTimeout) / 1000)),
            modelc_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, writeCallback),
            modelc_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context),
            modelc_curl_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, headerCallback),
            modelc_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context),
            modelc_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList)),
        ]
        if sink.partial.size > 0 {
            code = code == CURLE_OK ? modelc_curl_setopt_string(handle, CURLOPT_RANGE, "\(sink.partial.size)-") : code
        }
        if let failed = ([code] + settings).first(where: { $0 != CURLE_OK }) {
            return .failed(code: failed)
        }

        let result = curl_easy_perform(handle)
        guard result == CURLE_OK else { return .failed(code: result) }
        var status = 0
        _ = modelc_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .finished(status: status)
    }

    /// libcurl's text for `code`.
    static func reason(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: seconds) &* 1000 &+ Int(attoseconds / 1_000_000_000_000_000)
    }
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
