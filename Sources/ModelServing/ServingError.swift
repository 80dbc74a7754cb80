import ModelBuild
import ModelCompiler
import ModelRuntime

/// Why the server cannot start or keep serving (the CLI maps each to an exit code).
public enum ServingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The address cannot be listened on (in use, not local, not an address), or the HTTP library is missing.
    case cannotListen(address: String, reason: String)
    /// The gRPC port cannot be listened on, or the gRPC library (libModelcGRPC.so) cannot be opened.
    case cannotListenGRPC(address: String, reason: String)
    /// A TLS certificate or key file is unreadable or refused.
    case badTLS(reason: String)
    /// The API key file is unreadable or empty.
    case apiKeyFile(path: String, reason: String)
    /// The model directory or manifest cannot be served.
    case modelRepository(path: String, reason: String)
    /// The OpenTelemetry collector's URL is not one traces can be sent to.
    case badTraceEndpoint(url: String, reason: String)

    public var description: String {
        switch self {
        case .cannotListen(let address, let reason): "cannot listen on \(address): \(reason)"
        case .cannotListenGRPC(let address, let reason): "cannot serve gRPC on \(address): \(reason) (--grpc-port 0 turns gRPC off)"
        case .badTLS(let reason): "TLS: \(reason)"
        case .apiKeyFile(let path, let reason): "\(path): API key file \(reason)"
        case .modelRepository(let path, let reason): "\(path): \(reason)"
        case .badTraceEndpoint(let url, let reason): "--trace-endpoint \(url): \(reason)"
        }
    }
}

/// Why one request failed: the protocol's `{"error": …}` with an HTTP status.
public enum RequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The request is malformed: JSON, a tensor's datatype, shape or data, an unknown input or output.
    case badRequest(String)
    /// No model of that name in the repository.
    case unknownModel(String)
    /// The model has no such version (modelc serves version "1").
    case unknownVersion(model: String, version: String)
    /// The model was unloaded through the repository API and not loaded again.
    case modelUnloaded(String)
    /// The model could not be opened or prepared.
    case loadFailed(model: String, reason: String)
    /// No such endpoint.
    case notFound(String)
    case methodNotAllowed(method: String, path: String)
    /// A gRPC method the server does not answer ("/inference.GRPCInferenceService/ModelStatistics").
    case unservedMethod(String)
    /// A tensor or the body is over a limit.
    case tooLarge(String)
    case unsupportedEncoding(String)
    /// No or a wrong API key.
    case unauthorized
    /// The queue is full.
    case overloaded(queued: Int)
    /// The request's deadline passed before it was answered.
    case timedOut(milliseconds: Int)
    /// The server is stopping.
    case shuttingDown
    /// The client closed its connection before the answer (which reaches nobody).
    case clientGone
    /// The model failed while computing.
    case inferenceFailed(model: String, reason: String)
    /// A request of a sequence that is not live, without `sequence_start`.
    case unknownSequence(model: String, id: String, why: String)
    /// Starting a sequence would pass `--max-sequences`.
    case tooManySequences(limit: Int)
    /// A new sequence's state does not fit the memory budget beside the models in use and the other states.
    case sequenceMemory(bytes: Int)

    /// The HTTP status the protocol answers with.
    public var status: Int {
        switch self {
        case .badRequest, .unknownSequence: 400
        case .tooManySequences: 429
        case .sequenceMemory: 503
        case .unknownModel, .unknownVersion, .notFound, .unservedMethod: 404
        case .modelUnloaded: 400
        case .loadFailed, .inferenceFailed: 500
        case .methodNotAllowed: 405
        case .tooLarge: 413
        case .unsupportedEncoding: 415
        case .unauthorized: 401
        case .overloaded, .timedOut, .shuttingDown: 503
        // nginx's "client closed request": logged and counted, never sent.
        case .clientGone: 499
        }
    }

    /// The gRPC status the protocol's gRPC form answers with.
    public var grpcStatus: GRPCStatus {
        switch self {
        case .badRequest, .unsupportedEncoding, .unknownSequence: .invalidArgument
        case .unknownModel, .unknownVersion, .notFound: .notFound
        case .modelUnloaded, .shuttingDown: .unavailable
        case .loadFailed, .inferenceFailed: .internal
        case .methodNotAllowed, .unservedMethod: .unimplemented
        case .tooLarge, .overloaded, .tooManySequences, .sequenceMemory: .resourceExhausted
        case .unauthorized: .unauthenticated
        case .timedOut: .deadlineExceeded
        case .clientGone: .cancelled
        }
    }

    /// The label used in the failure metrics' `reason`.
    public var metricReason: String {
        switch self {
        case .badRequest, .tooLarge, .unsupportedEncoding, .unknownSequence: "REJECTED"
        case .tooManySequences, .sequenceMemory: "CANCELED"
        case .overloaded, .shuttingDown, .clientGone: "CANCELED"
        case .timedOut: "TIMEOUT"
        case .unknownModel, .unknownVersion, .modelUnloaded, .notFound, .methodNotAllowed, .unservedMethod, .unauthorized: "REJECTED"
        case .loadFailed, .inferenceFailed: "BACKEND"
        }
    }

    public var description: String {
        switch self {
        case .badRequest(let message): message
        case .unknownModel(let name): "unknown model '\(name)'"
        case .unknownVersion(let model, let version): "model '\(model)' has no version '\(version)' (it has version '1')"
        case .modelUnloaded(let name): "model '\(name)' is unloaded (POST /v2/repository/models/\(name)/load loads it)"
        case .loadFailed(let model, let reason): "model '\(model)' cannot be loaded: \(reason)"
        case .notFound(let path): "no endpoint \(path)"
        case .methodNotAllowed(let method, let path): "\(method) is not allowed on \(path)"
        case .unservedMethod(let method):
            "\(method) is not served (modelc serves ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer of inference.GRPCInferenceService)"
        case .tooLarge(let message): message
        case .unsupportedEncoding(let encoding): "Content-Encoding '\(encoding)' is not supported (send the body uncompressed)"
        case .unauthorized: "missing or wrong API key (send 'Authorization: Bearer KEY')"
        case .overloaded(let queued): "server busy: \(queued) requests queued; retry later"
        case .timedOut(let milliseconds): "request timed out after \(milliseconds) ms"
        case .shuttingDown: "server is shutting down"
        case .clientGone: "the client closed its connection before the answer"
        case .inferenceFailed(let model, let reason): "model '\(model)': \(reason)"
        case .unknownSequence(let model, let id, let why):
            "sequence \(id) of model '\(model)' is not live: \(why); start it with sequence_start"
        case .tooManySequences(let limit):
            "too many live sequences (--max-sequences \(limit)): end one with sequence_end, or retry once idle ones are evicted"
        case .sequenceMemory(let bytes):
            "a new sequence's state (\(bytes) bytes) does not fit the memory budget beside the models in use and the live sequences; retry later"
        }
    }
}

/// Why a model could not be made ready: compiling its source, or opening the bundle.
public enum ModelLoadError: Error, Equatable, Sendable, CustomStringConvertible {
    case compile(CompileError)
    case model(ModelError)
    case build(String)

    public var description: String {
        switch self {
        case .compile(let error): error.description
        case .model(let error): error.description
        case .build(let reason): reason
        }
    }
}

/// gRPC's status codes (the ones of `grpc/status.h`).
public enum GRPCStatus: Int32, Sendable {
    case ok = 0, cancelled = 1, unknown = 2, invalidArgument = 3, deadlineExceeded = 4, notFound = 5
    case alreadyExists = 6, permissionDenied = 7, resourceExhausted = 8, failedPrecondition = 9, aborted = 10
    case outOfRange = 11, unimplemented = 12, `internal` = 13, unavailable = 14, dataLoss = 15, unauthenticated = 16
}
