import Foundation

/// How `modelc serve` runs; every limit has a default.
public struct ServerOptions: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// The gRPC port (same host, TLS, key and limits); nil: no gRPC. `modelc serve` sets 8001.
    public var grpcPort: Int?
    /// Bytes the loaded models may take (unleased ones are evicted beyond it).
    public var memoryBudget = 2 << 30
    /// Requests computed at once (worker threads).
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// Requests to one model computed together at most (1: no batching).
    public var maxBatch = 1
    /// How long a worker waits for a batch to fill, in milliseconds.
    public var batchDelayMilliseconds = 0
    /// Requests waiting for a worker at most; beyond it, 503 with Retry-After.
    public var queueCapacity = 256
    /// From arrival to answer; beyond it, 503.
    public var timeoutMilliseconds = 30_000
    /// Bytes of a request body at most (413 beyond, unread).
    public var maxBodyBytes: UInt64 = 64 << 20
    /// Bytes of one tensor at most.
    public var maxTensorBytes = 64 << 20
    public var maxConnections = 512
    /// Accepted in `Authorization: Bearer KEY` or `X-API-Key: KEY`; nil: no key needed.
    public var apiKey: String?
    /// PEM texts.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// Milliseconds each generated token waits before it is computed (0: none): for testing
    /// streaming clients (timeouts, disconnects) with a decoder that is otherwise too fast to catch.
    public var tokenDelayMilliseconds = 0
    /// Milliseconds every computation (batch) waits before the model computes, stopping early when
    /// cancelled (0: none): for testing cancellation with a model that is otherwise too fast to catch.
    public var computeDelayMilliseconds = 0
    /// An OpenTelemetry collector's OTLP/HTTP traces URL (`http://HOST:4318/v1/traces`); nil: no tracing.
    public var traceEndpoint: String?
    /// Live sequences (stateful models' `sequence_id`s) at most; beyond it, starting one is refused (429).
    public var maxSequences = 1024
    /// Seconds a live sequence may stay without a request before its state is evicted.
    public var sequenceIdleTimeoutSeconds = 60.0

    public init() {}
}
