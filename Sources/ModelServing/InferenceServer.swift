import Dispatch
import Foundation
import ModelCompiler
import ModelLoader
import CSystemShims

/// `modelc serve`: an `InferenceService` behind an `HTTPServer` (and a `GRPCServer`), the model
/// cache watching memory pressure, its events in the log, and a drain on
/// SIGTERM or SIGINT.
public final class InferenceServer: Sendable {
    public let service: InferenceService
    private let http: HTTPServer
    private let grpc: GRPCServer?
    private let log: ServerLog
    /// The port listened on (the one asked for, or the one picked for port 0).
    public var port: Int { http.port }
    /// The gRPC port listened on, nil without gRPC.
    public var grpcPort: Int? { grpc?.port }

    /// Starts serving `repository`.
    ///
    /// - Throws: `ServingError.cannotListen`, `.cannotListenGRPC`, `.badTLS`, or `.badTraceEndpoint` (checked first).
    public init(repository: ModelRepository, options: ServerOptions, log: ServerLog) throws(ServingError) {
        if let endpoint = options.traceEndpoint, let problem = OTLPHTTPSender.problem(with: endpoint) {
            throw .badTraceEndpoint(url: endpoint, reason: problem)
        }
        // One malloc arena per core rather than eight: with a thread per connection, memory a model
        // freed in one arena was not reused by loads in another, and evicted models' pages stayed.
        _ = modelc_malloc_arena_max(Int32(clamping: max(2, ProcessInfo.processInfo.activeProcessorCount)))
        let tracer = options.traceEndpoint.map { Self.tracer($0, log: log) }
        let service = InferenceService(repository: repository, options: options, log: log, tracer: tracer)
        self.service = service
        self.log = log
        // Ready once every port listens (a client may use gRPC as soon as REST says ready).
        service.starting.withLock { $0 = true }
        let cache = service.cache
        // Observed before any port listens: a request cannot load a model before its line can be written.
        // Written on the thread that loads or evicts, not by a task reading `cache.events`:
        // a line raised just before SIGTERM is in the log when the drain ends and the process exits.
        cache.observe { event in
            switch event {
            case .loaded(let path, let bytes):
                log.write("info", "model loaded", [("model", InferenceService.name(of: path)), ("bytes", String(bytes))])
            case .loadFailed(let path, let error):
                log.write("error", "model load failed", [("model", InferenceService.name(of: path)), ("error", error.description)])
            case .evicted(let path, let bytes, let reason):
                // The evicted model's memory goes back to the system, not only to malloc.
                _ = modelc_malloc_trim()
                log.write("info", "model evicted", [("model", InferenceService.name(of: path)), ("bytes", String(bytes)), ("reason", reason.rawValue)])
            case .pressure(let text):
                log.write("info", "memory pressure", [("detail", text)])
            }
        }
        let configuration = HTTPServerConfiguration(host: options.host, port: options.port, tlsCertificate: options.tlsCertificate,
                                                    tlsKey: options.tlsKey, maxBodyBytes: options.maxBodyBytes,
                                                    maxConnections: options.maxConnections)
        do {
            http = try HTTPServer(configuration: configuration, logger: { line in log.write("warning", line) }) { request in
                service.handle(request)
            }
        } catch {
            service.shutdown()
            throw error
        }
        if let grpcPort = options.grpcPort {
            let configuration = GRPCServerConfiguration(host: options.host, port: grpcPort, tlsCertificate: options.tlsCertificate,
                                                        tlsKey: options.tlsKey, maxMessageBytes: options.maxBodyBytes,
                                                        maxCalls: options.maxConnections)
            do {
                grpc = try GRPCServer(configuration: configuration, logger: { line in log.write("warning", line) }) { call in
                    service.handle(call)
                }
            } catch {
                http.quiesce()
                http.stop()
                service.shutdown()
                throw error
            }
        } else {
            grpc = nil
        }
        cache.watchSystemPressure()
        service.starting.withLock { $0 = false }
        log.write("info", "listening", [("address", "\(options.tls ? "https" : "http")://\(Self.hostText(options.host)):\(http.port)"),
                                        ("models", repository.directory), ("budget", String(options.memoryBudget)),
                                        ("threads", String(options.threads)), ("max_batch", String(options.maxBatch))]
                  + (options.traceEndpoint.map { [("trace_endpoint", $0)] } ?? [])
                  + (grpc.map { [("grpc", "\(Self.hostText(options.host)):\($0.port)")] } ?? []))
    }

    private static func hostText(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// The exporter of spans to `endpoint` (an OTLP/HTTP traces URL, checked). The service name
    /// is `OTEL_SERVICE_NAME` when set (OpenTelemetry's variable), else `modelc`.
    private static func tracer(_ endpoint: String, log: ServerLog) -> TraceExporter {
        let sender = OTLPHTTPSender(url: endpoint)
        let name = ProcessInfo.processInfo.environment["OTEL_SERVICE_NAME"].flatMap { $0.isEmpty ? nil : $0 } ?? "modelc"
        return TraceExporter(source: .init(serviceName: name, serviceVersion: BundleCompiler.compilerVersion), log: { failing, message in
            if failing {
                log.write("warning", "trace export failing (spans dropped until it works)", [("endpoint", endpoint), ("error", message)])
            } else {
                log.write("info", message, [("endpoint", endpoint)])
            }
        }, send: { body in sender.post(body) })
    }

    /// Catches SIGTERM and SIGINT from now on, for `runUntilSignalled()`: call it
    /// before the server is made, so that a signal sent as soon as the server
    /// answers is kept for the drain instead of killing the process or being lost.
    public static func catchTerminationSignals() {
        _ = modelc_catch_termination()
    }

    /// Serves until SIGTERM or SIGINT, then drains (see `drain()`). A signal caught since
    /// `catchTerminationSignals()` counts.
    public func runUntilSignalled() {
        Self.catchTerminationSignals()
        modelc_wait_termination()
        drain()
    }

    /// Drains and stops, within `--timeout` (plus up to 5 s for answers being sent):
    /// - health turns not ready, and the listening socket closes: new connections are refused;
    /// - open connections with no request under way (idle keep-alive, or no whole request line
    ///   yet) are closed at once;
    /// - a request whose request line had arrived is served: its headers and body may still
    ///   arrive, it is answered (`Connection: close`), then its connection closes;
    /// - when `--timeout` has passed since the drain began, connections whose request body is
    ///   still incomplete are closed unanswered, and a request still computing is answered 503;
    /// - gRPC: new calls are refused UNAVAILABLE at once, calls under way are answered as requests
    ///   are (UNAVAILABLE when still computing at the end);
    /// then the server stops.
    public func drain() {
        let started = DispatchTime.now()
        let end = started + .milliseconds(service.options.timeoutMilliseconds)
        log.write("info", "draining", [("in_progress", String(http.requestsInProgress + (grpc?.callsInProgress ?? 0)))])
        service.beginDraining(until: end)
        http.quiesce()
        // New gRPC calls are refused UNAVAILABLE; those under way are answered as HTTP requests are.
        grpc?.shutdown(graceMilliseconds: service.options.timeoutMilliseconds + 5_000)
        func underWay() -> Bool { http.requestsInProgress > 0 || (grpc?.callsInProgress ?? 0) > 0 }
        while underWay(), DispatchTime.now() < end { usleep(5_000) }
        let unfinished = http.closeUnfinished()
        if unfinished > 0 {
            log.write("warning", "closed connections whose request did not arrive whole", [("connections", String(unfinished))])
        }
        // Answers computed by `end` may still be being sent; their connections close once they are.
        let sent = DispatchTime.now() + .seconds(5)
        while underWay(), DispatchTime.now() < sent { usleep(5_000) }
        grpc?.stop()
        http.stop()
        service.shutdown()
        log.write("info", "stopped", [("answered", String(service.requestsAnswered)),
                                      ("drain_ms", String((DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000))])
    }
}

extension ServerOptions {
    var tls: Bool { tlsCertificate != nil }
}
