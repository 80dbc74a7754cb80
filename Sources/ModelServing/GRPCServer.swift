import CGRPC
import Dispatch

/// Where and how a `GRPCServer` listens.
public struct GRPCServerConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// PEM texts; both nil: plaintext.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// A request message over this is refused RESOURCE_EXHAUSTED, unread.
    public var maxMessageBytes: UInt64
    /// Calls being handled at once at most; one more is refused RESOURCE_EXHAUSTED.
    public var maxCalls: Int

    public init(host: String, port: Int, tlsCertificate: String? = nil, tlsKey: String? = nil, maxMessageBytes: UInt64 = 64 << 20,
                maxCalls: Int = 512) {
        self.host = host
        self.port = port
        self.tlsCertificate = tlsCertificate
        self.tlsKey = tlsKey
        self.maxMessageBytes = maxMessageBytes
        self.maxCalls = maxCalls
    }
}

/// One gRPC call as the transport hands it over: the method and the request message's bytes.
public struct GRPCRequest: Sendable {
    /// "/package.Service/Method".
    public var method: String
    public var message: [UInt8]
    /// The `authorization` and `x-api-key` metadata.
    public var authorization: String?
    public var apiKey: String?
    /// The client's deadline (uptime nanoseconds), when it set one.
    public var deadline: UInt64?
    /// Whether the client has cancelled the call or gone away (valid while the call is handled).
    public var clientGone: (@Sendable () -> Bool)?

    public init(method: String, message: [UInt8], authorization: String? = nil, apiKey: String? = nil, deadline: UInt64? = nil,
                clientGone: (@Sendable () -> Bool)? = nil) {
        self.method = method
        self.message = message
        self.authorization = authorization
        self.apiKey = apiKey
        self.deadline = deadline
        self.clientGone = clientGone
    }
}

/// The answer to a gRPC call: OK with the response message, or a status and why.
public struct GRPCResponse: Sendable, Equatable {
    public var status: GRPCStatus
    public var message: String
    public var body: [UInt8]

    public static func ok(_ body: [UInt8]) -> GRPCResponse { GRPCResponse(status: .ok, message: "", body: body) }
    public static func failure(_ status: GRPCStatus, _ message: String) -> GRPCResponse { GRPCResponse(status: status, message: message, body: []) }
}

/// A gRPC server (grpc++ in libModelcGRPC.so, opened at the first start): each call's request
/// message handed to `handler` on a thread of the server's own, which may block; no protocol here.
public final class GRPCServer: Sendable {
    public typealias Handler = @Sendable (GRPCRequest) -> GRPCResponse

    private typealias Callbacks = TransportCallbacks<GRPCRequest, GRPCResponse>

    private nonisolated(unsafe) let server: OpaquePointer
    private let callbacks: Unmanaged<Callbacks>
    /// The port listened on.
    public let port: Int

    /// Starts listening and serving.
    ///
    /// - Throws: `ServingError.cannotListenGRPC`: the address or port cannot be bound, or the library
    ///   cannot be opened.
    public init(configuration: GRPCServerConfiguration, logger: @escaping @Sendable (String) -> Void,
                handler: @escaping Handler) throws(ServingError) {
        let callbacks = Unmanaged.passRetained(Callbacks(handler: handler, logger: logger))
        var failure = [CChar](repeating: 0, count: 512)
        var bindFailed: Int32 = 0
        let started: OpaquePointer? = withListenerStrings(configuration.host, configuration.tlsCertificate, configuration.tlsKey) { host, certificate, key in
            var c = modelc_grpc_configuration()
            c.host = host
            c.port = Int32(clamping: configuration.port)
            c.tls_certificate = certificate
            c.tls_key = key
            c.max_message_bytes = Int(clamping: configuration.maxMessageBytes)
            c.max_calls = UInt32(clamping: configuration.maxCalls)
            c.handler = { context, call in
                guard let context, let call else { return }
                GRPCServer.serve(call, with: Callbacks.from(context).handler)
            }
            c.logger = { context, line in Callbacks.log(context, line) }
            c.context = callbacks.toOpaque()
            return modelc_serve_grpc_start(&c, &failure, failure.count, &bindFailed)
        }
        guard let started else {
            callbacks.release()
            let reason = cText(failure)
            let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
            throw .cannotListenGRPC(address: "\(host):\(configuration.port)", reason: reason)
        }
        server = started
        self.callbacks = callbacks
        port = Int(modelc_serve_grpc_port(started))
    }

    /// Calls handed to the handler and not answered yet.
    public var callsInProgress: Int { modelc_serve_grpc_calls_in_progress(server) }

    /// Starts the drain: new calls are refused UNAVAILABLE; calls under way may be answered for
    /// `graceMilliseconds`, then grpc cancels them. Returns at once. Call once.
    public func shutdown(graceMilliseconds: Int) { modelc_serve_grpc_shutdown(server, graceMilliseconds) }

    /// Waits for the drain and stops. Call once, when no handler runs; the server must not be used afterwards.
    public func stop() {
        modelc_serve_grpc_stop(server)
        callbacks.release()
    }

    /// The grpc version of the library, nil when it cannot be opened.
    public static var libraryVersion: String? { modelc_serve_grpc_version().map { String(cString: $0) } }

    private static func serve(_ call: OpaquePointer, with handler: Handler) {
        let method = modelc_serve_grpc_call_method(call).map { String(cString: $0) } ?? ""
        var size = 0
        let message = modelc_serve_grpc_call_message(call, &size).map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        let remaining = modelc_serve_grpc_call_deadline_nanoseconds(call)
        let now = DispatchTime.now().uptimeNanoseconds
        let deadline: UInt64? = remaining == Int64.max ? nil : (remaining <= 0 ? now : now.addingReportingOverflow(UInt64(remaining)).partialValue)
        let request = GRPCRequest(method: method, message: message,
                                  authorization: modelc_serve_grpc_call_metadata(call, "authorization").map { String(cString: $0) },
                                  apiKey: modelc_serve_grpc_call_metadata(call, "x-api-key").map { String(cString: $0) },
                                  deadline: deadline, clientGone: { [call = CallPointer(call)] in
                                      // A client gives up at its deadline a little before the server's copy of it
                                      // passes (the copy starts when the call arrives): a cancel within 100 ms of
                                      // the deadline is the deadline's, which the scheduler times out itself.
                                      modelc_serve_grpc_call_cancelled(call.pointer) != 0
                                          && modelc_serve_grpc_call_deadline_nanoseconds(call.pointer) > 100_000_000
                                  })
        let response = handler(request)
        response.body.withUnsafeBufferPointer { body in
            modelc_serve_grpc_call_finish(call, response.status.rawValue, response.message, body.baseAddress, body.count)
        }
    }
}

/// A call's pointer for its `clientGone` check, used only while the call is being handled.
private struct CallPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}
