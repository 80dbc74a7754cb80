import CMicroHTTPD
import Foundation

/// One HTTP request, its body read whole.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The path, percent-decoded, without the query string.
    public var path: String
    /// Header values by lower-cased name.
    public var headers: [String: String]
    public var body: [UInt8]
    /// Whether the client has gone (closed or reset its connection) — without waiting; nil when it
    /// cannot be known. Valid while the request is being handled (on the connection's thread);
    /// the answer of a request whose client is gone reaches nobody.
    public var clientGone: (@Sendable () -> Bool)?

    public init(method: String, path: String, headers: [String: String] = [:], body: [UInt8] = [],
                clientGone: (@Sendable () -> Bool)? = nil) {
        self.method = method
        self.path = path
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.body = body
        self.clientGone = clientGone
    }

    /// A header's value (case-insensitive name).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// A response body sent as it is produced (chunked transfer encoding), such as server-sent events.
public struct HTTPBodyStream: Sendable {
    /// One read of the body.
    public enum Piece: Sendable, Equatable {
        /// The next bytes (not empty).
        case bytes([UInt8])
        /// Nothing came within a short wait: asked again unless the client has gone.
        case pending
        /// The body is whole.
        case end
    }

    /// The next piece; called on the connection's thread, one call at a time. It may block
    /// briefly (tens of milliseconds: the client's departure is noticed between calls).
    public let next: @Sendable () -> Piece
    /// Called once when the answer is over: sent whole, failed, or the client gone.
    public let finish: @Sendable () -> Void

    public init(next: @escaping @Sendable () -> Piece, finish: @escaping @Sendable () -> Void) {
        self.next = next
        self.finish = finish
    }
}

/// One HTTP response.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// In order; names as sent.
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// When set, the body sent instead of `body`.
    public var stream: HTTPBodyStream?

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], stream: HTTPBodyStream? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }

    /// A JSON body.
    public static func json(_ status: Int, _ object: Any, headers: [(String, String)] = []) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(data))
    }

    /// The protocol's error body, `{"error": "…"}`.
    public static func error(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        json(status, ["error": message], headers: headers)
    }
}

/// Where and how an `HTTPServer` listens.
public struct HTTPServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port.
    public var port: Int
    /// PEM texts of the certificate (chain) and key; both nil for plain HTTP.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// Bodies over this are refused with 413 before they are read.
    public var maxBodyBytes: UInt64
    public var maxConnections: Int
    public var idleTimeoutSeconds: Int

    public init(host: String = "127.0.0.1", port: Int = 8080, tlsCertificate: String? = nil, tlsKey: String? = nil,
                maxBodyBytes: UInt64 = 64 << 20, maxConnections: Int = 512, idleTimeoutSeconds: Int = 60) {
        self.host = host
        self.port = port
        self.tlsCertificate = tlsCertificate
        self.tlsKey = tlsKey
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
    }
}

/// An HTTP/1.1 server on libmicrohttpd (loaded at the first start): one
/// thread per connection, each request's body gathered within the limit, then
/// `handler` called on that thread for the answer; a streamed answer's body
/// (`HTTPResponse.stream`) is read on that thread too, as it is sent.
public final class HTTPServer: Sendable {
    /// Answers one request; called on many threads at once.
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse

    private typealias Callbacks = TransportCallbacks<HTTPRequest, HTTPResponse>

    private nonisolated(unsafe) let server: OpaquePointer
    private let callbacks: Unmanaged<Callbacks>
    /// The port listened on.
    public let port: Int

    /// Starts listening and serving.
    ///
    /// - Throws: `ServingError.cannotListen` (the address or port cannot be
    ///   bound, the library is missing) or `.badTLS` (the certificate or key is refused).
    public init(configuration: HTTPServerConfiguration, logger: @escaping @Sendable (String) -> Void,
                handler: @escaping Handler) throws(ServingError) {
        let callbacks = Unmanaged.passRetained(Callbacks(handler: handler, logger: logger))
        var failure = [CChar](repeating: 0, count: 512)
        var bindFailed: Int32 = 0
        let started: OpaquePointer? = withListenerStrings(configuration.host, configuration.tlsCertificate, configuration.tlsKey) { host, certificate, key in
            var c = modelc_http_configuration()
            c.host = host
            c.port = UInt16(clamping: configuration.port)
            c.tls_certificate = certificate
            c.tls_key = key
            c.max_body_bytes = configuration.maxBodyBytes
            c.max_connections = UInt32(clamping: configuration.maxConnections)
            c.idle_timeout_seconds = UInt32(clamping: configuration.idleTimeoutSeconds)
            c.handler = { context, exchange in
                guard let context, let exchange else { return }
                HTTPServer.serve(exchange, with: Callbacks.from(context).handler)
            }
            c.logger = { context, line in Callbacks.log(context, line) }
            c.context = callbacks.toOpaque()
            return modelc_http_start(&c, &failure, failure.count, &bindFailed)
        }
        guard let started else {
            callbacks.release()
            let reason = cText(failure)
            let address = "\(configuration.host):\(configuration.port)"
            throw bindFailed != 0 || configuration.tlsCertificate == nil
                ? .cannotListen(address: address, reason: reason) : .badTLS(reason: reason)
        }
        server = started
        self.callbacks = callbacks
        port = Int(modelc_http_port(started))
    }

    /// Starts a drain: the listening socket closes (new connections are refused), and so does
    /// every open connection with no request under way (idle keep-alive, or not a whole request
    /// line yet). A connection whose request line has arrived is served until that request is
    /// answered, then closed. Call once.
    public func quiesce() { modelc_http_quiesce(server) }

    /// Requests under way: counted from their request line (before their headers and body are
    /// read) until their answer is sent or their connection is gone.
    public var requestsInProgress: Int { Int(modelc_http_requests_in_progress(server)) }

    /// After `quiesce`: closes the connections of requests whose body has not arrived whole
    /// (nothing is answered on them; the client sees the connection end). Requests whose handler
    /// was called are unaffected. Returns how many connections were closed.
    @discardableResult
    public func closeUnfinished() -> Int { Int(modelc_http_close_unfinished(server)) }

    /// Closes every connection and stops. Call once, after `quiesce` and once
    /// no handler runs; the server must not be used afterwards.
    public func stop() {
        modelc_http_stop(server)
        callbacks.release()
    }

    private static func serve(_ exchange: OpaquePointer, with handler: Handler) {
        let method = modelc_http_method(exchange).map { String(cString: $0) } ?? "GET"
        let rawURL = modelc_http_url(exchange).map { String(cString: $0) } ?? "/"
        let path = rawURL.removingPercentEncoding ?? rawURL
        var headers: [String: String] = [:]
        for name in HTTPServer.headerNames {
            if let value = modelc_http_header(exchange, name) { headers[name.lowercased()] = String(cString: value) }
        }
        let size = modelc_http_body_size(exchange)
        let body: [UInt8] = modelc_http_body(exchange).map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        let connection = Exchange(exchange)
        let response = handler(HTTPRequest(method: method, path: path, headers: headers, body: body,
                                           clientGone: { modelc_http_client_gone(connection.pointer) != 0 }))
        if let stream = response.stream {
            let source = Unmanaged.passRetained(StreamSource(stream)).toOpaque()
            _ = modelc_http_respond_stream_begin(exchange, { context, buffer, size in
                guard let context, let buffer else { return -2 }
                return Unmanaged<StreamSource>.fromOpaque(context).takeUnretainedValue().read(into: buffer, size: size)
            }, { context in
                guard let context else { return }
                let source = Unmanaged<StreamSource>.fromOpaque(context)
                source.takeUnretainedValue().stream.finish()
                source.release()
            }, source)
        } else {
            _ = response.body.withUnsafeBytes { modelc_http_respond_begin(exchange, $0.baseAddress, $0.count) }
        }
        for (name, value) in response.headers { _ = modelc_http_respond_header(exchange, name, value) }
        _ = modelc_http_respond_end(exchange, UInt32(response.status))
    }

    /// The request headers handlers may read.
    static let headerNames = ["Content-Type", "Content-Length", "Content-Encoding", "Authorization", "X-API-Key",
                              "Inference-Header-Content-Length", "Accept-Encoding", "Connection", "traceparent"]
}

/// The exchange a request's `clientGone` looks at (valid during the handler call only).
private struct Exchange: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A streamed body as the C side reads it: the piece being sent and how much of it is out.
/// Read on the connection's thread only (one call at a time), released once.
private final class StreamSource: @unchecked Sendable {
    let stream: HTTPBodyStream
    private var piece: [UInt8] = []
    private var sent = 0

    init(_ stream: HTTPBodyStream) { self.stream = stream }

    /// Bytes written (> 0), 0 when nothing came yet, -1 at the end.
    func read(into buffer: UnsafeMutablePointer<UInt8>, size: Int) -> Int {
        if sent == piece.count {
            switch stream.next() {
            case .bytes(let bytes):
                piece = bytes
                sent = 0
            case .pending: return 0
            case .end: return -1
            }
            if piece.isEmpty { return 0 }
        }
        let count = min(size, piece.count - sent)
        piece.withUnsafeBufferPointer { source in
            if let base = source.baseAddress { buffer.update(from: base + sent, count: count) }
        }
        sent += count
        return count
    }
}

