/// What a C transport (libmicrohttpd's, grpc's) calls back into: the request handler and the
/// logger, kept alive by the server that made it and passed to C as an opaque context.
final class TransportCallbacks<Request, Response>: Sendable {
    let handler: @Sendable (Request) -> Response
    let logger: @Sendable (String) -> Void

    init(handler: @escaping @Sendable (Request) -> Response, logger: @escaping @Sendable (String) -> Void) {
        self.handler = handler
        self.logger = logger
    }

    /// The callbacks behind a context the C side hands back (not retained).
    static func from(_ context: UnsafeMutableRawPointer) -> TransportCallbacks { Unmanaged.fromOpaque(context).takeUnretainedValue() }

    /// The C logger's line to the logger.
    static func log(_ context: UnsafeMutableRawPointer?, _ line: UnsafePointer<CChar>?) {
        guard let context, let line else { return }
        from(context).logger(String(cString: line))
    }
}

/// The text a C function wrote into `buffer` (NUL-terminated, or filling it).
func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A listener's host, TLS certificate and key as C strings for the duration of `body` (nil: NULL).
func withListenerStrings<Result>(_ host: String, _ certificate: String?, _ key: String?,
                                 _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Result) -> Result {
    host.withCString { host in
        withOptionalCString(certificate) { certificate in
            withOptionalCString(key) { key in body(host, certificate, key) }
        }
    }
}

private func withOptionalCString<Result>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
