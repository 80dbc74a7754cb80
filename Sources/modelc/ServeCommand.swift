import ArgumentParsing
import ExitCodes
import Foundation
import ModelFetch
import ModelServing

/// `modelc serve [MODEL_DIR | --manifest models.json] [options]`: the Open
/// Inference Protocol over HTTP; everything but reading options is in ModelServing.
enum ServeCommand {
    static let spec = CommandSpec(
        name: "serve",
        abstract: "Serve models over the Open Inference Protocol (KServe v2 / Triton, REST and gRPC) until SIGTERM.",
        discussion: """
            MODEL_DIR holds bundles (NAME.mlmodelc) and source models (NAME.mlmodel, NAME.mlpackage,
            compiled on first use into the cache); NAME is the model's name in URLs. --manifest builds a
            'modelc build' manifest (fetched, pinned, compiled) and serves the result. Models load on first
            request and are evicted least recently used beyond --memory-budget or on memory pressure.
            Endpoints: /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME[/versions/1][/ready|/infer],
            /v2/models/NAME/generate and /generate_stream (decoders: token ids in, token ids out, the
            stream as server-sent events), /v2/models[/NAME[/versions/1]]/stats (Triton's statistics),
            /v2/repository/index, /v2/repository/models/NAME/load|unload, /metrics.
            gRPC (--grpc-port): inference.GRPCInferenceService's ServerLive, ServerReady, ModelReady,
            ServerMetadata, ModelMetadata and ModelInfer.
            --trace-endpoint sends each inference request's spans (the request; deserialize, queue,
            compute, serialize), continuing a W3C traceparent header's trace, to an OpenTelemetry
            collector in OTLP/HTTP JSON, in batches from a background thread.
            Stateful models (ML programs with states) keep one state per sequence between requests
            that carry Triton's sequence_id / sequence_start / sequence_end parameters, within
            --memory-budget and --max-sequences; a sequence idle --sequence-idle-timeout is evicted.
            SIGTERM (or SIGINT) drains: requests under way are answered (within --timeout), idle
            connections closed, then modelc exits 0.
            """,
        arguments: [PositionalSpec(name: "MODEL_DIR", help: "The directory of models to serve.", isOptional: true)],
        options: [
            OptionSpec(name: "manifest", valueName: "FILE", help: "Build and serve the models of a manifest instead."),
            OptionSpec(name: "host", valueName: "ADDRESS", help: "Numeric address to listen on (default 127.0.0.1)."),
            OptionSpec(name: "port", valueName: "N", help: "Port (default 8080; 0 picks a free one)."),
            OptionSpec(name: "grpc-port", valueName: "N", help: "gRPC port, same host, TLS and key (default 8001; 0: no gRPC)."),
            OptionSpec(name: "memory-budget", valueName: "SIZE", help: "Bytes the loaded models may take, e.g. 512M (default 2G)."),
            OptionSpec(name: "threads", valueName: "N", help: "Requests computed at once (default: every core)."),
            OptionSpec(name: "max-batch", valueName: "N", help: "Requests to one model computed together (default 1)."),
            OptionSpec(name: "batch-delay", valueName: "MS", help: "Wait up to MS for a batch to fill (default 0)."),
            OptionSpec(name: "queue", valueName: "N", help: "Requests waiting at most; then 503 + Retry-After (default 256)."),
            OptionSpec(name: "timeout", valueName: "MS", help: "Per-request deadline from arrival, and the SIGTERM drain's (default 30000)."),
            OptionSpec(name: "max-body", valueName: "SIZE", help: "Largest request body (default 64M); larger → 413, unread."),
            OptionSpec(name: "max-tensor", valueName: "SIZE", help: "Largest tensor in a request (default 64M)."),
            OptionSpec(name: "tls-cert", valueName: "FILE", help: "PEM certificate (chain); with --tls-key, serve HTTPS."),
            OptionSpec(name: "tls-key", valueName: "FILE", help: "PEM private key."),
            OptionSpec(name: "api-key-file", valueName: "FILE", help: "Require this key (Authorization: Bearer KEY) except on health."),
            OptionSpec(name: "log-format", valueName: "FORMAT", help: "text (default) or json, on standard error."),
            OptionSpec(name: "trace-endpoint", valueName: "URL",
                       help: "OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (default: no tracing)."),
            OptionSpec(name: "max-sequences", valueName: "N", help: "Live sequences of stateful models at most; then 429 (default 1024)."),
            OptionSpec(name: "sequence-idle-timeout", valueName: "SECONDS",
                       help: "Evict a sequence's state after this long without a request (default 60)."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        let usage = Modelc.usageLine(for: spec)
        func invalid(_ option: String, _ value: String, _ reason: String) -> ExitCode {
            Modelc.usageFailure(.invalidValue(option: option, value: value, reason: reason), usage: usage)
        }
        var options = ServerOptions()
        if let host = arguments.value("host") { options.host = host }
        if let text = arguments.value("port") {
            guard let port = Int(text), (0...65535).contains(port) else { return invalid("port", text, "expected 0 to 65535") }
            options.port = port
        }
        options.grpcPort = 8001
        if let text = arguments.value("grpc-port") {
            guard let port = Int(text), (0...65535).contains(port) else { return invalid("grpc-port", text, "expected 0 (no gRPC) to 65535") }
            options.grpcPort = port == 0 ? nil : port
        }
        for (name, apply) in [("memory-budget", { (value: UInt64) in options.memoryBudget = Int(clamping: value) }),
                              ("max-body", { options.maxBodyBytes = $0 }),
                              ("max-tensor", { options.maxTensorBytes = Int(clamping: $0) })] as [(String, (UInt64) -> Void)] {
            guard let text = arguments.value(name) else { continue }
            guard let bytes = parseByteSize(text), bytes > 0 else { return invalid(name, text, "expected a size such as 512M or 2G") }
            apply(bytes)
        }
        for (name, apply) in [("threads", { (value: Int) in options.threads = value }), ("max-batch", { options.maxBatch = $0 }),
                              ("max-sequences", { options.maxSequences = $0 }),
                              ("queue", { options.queueCapacity = $0 }), ("timeout", { options.timeoutMilliseconds = $0 })]
            as [(String, (Int) -> Void)] {
            guard let text = arguments.value(name) else { continue }
            guard let value = Int(text), value >= 1 else { return invalid(name, text, "expected a positive integer") }
            apply(value)
        }
        if let text = arguments.value("sequence-idle-timeout") {
            guard let value = Double(text), value > 0, value.isFinite else { return invalid("sequence-idle-timeout", text, "expected seconds > 0") }
            options.sequenceIdleTimeoutSeconds = value
        }
        if let text = arguments.value("batch-delay") {
            guard let value = Int(text), value >= 0 else { return invalid("batch-delay", text, "expected milliseconds ≥ 0") }
            options.batchDelayMilliseconds = value
        }
        // For testing streaming clients against a small decoder (timeouts, disconnects): each token waits this long.
        if let text = ProcessInfo.processInfo.environment["MODELC_SERVE_TOKEN_DELAY_MS"], let value = Int(text), value > 0 {
            options.tokenDelayMilliseconds = value
        }
        // For testing cancellation (client gone, deadline) with a fast model: each computation first waits this long.
        if let text = ProcessInfo.processInfo.environment["MODELC_SERVE_COMPUTE_DELAY_MS"], let value = Int(text), value > 0 {
            options.computeDelayMilliseconds = value
        }
        let format: ServerLog.Format
        if let text = arguments.value("log-format") {
            guard let parsed = ServerLog.Format(rawValue: text) else { return invalid("log-format", text, "expected text or json") }
            format = parsed
        } else {
            format = .text
        }
        options.traceEndpoint = arguments.value("trace-endpoint")
        let directory = arguments[positional: "MODEL_DIR"]
        let manifest = arguments.value("manifest")
        if directory != nil, manifest != nil { return Modelc.usageFailure(.conflictingOptions("MODEL_DIR", "manifest"), usage: usage) }
        guard directory != nil || manifest != nil else {
            Output.error("\(Modelc.toolName): error: give MODEL_DIR or --manifest FILE\n\(usage)\n")
            return .usage
        }
        if (arguments.value("tls-cert") == nil) != (arguments.value("tls-key") == nil) {
            Output.error("\(Modelc.toolName): error: --tls-cert and --tls-key go together\n\(usage)\n")
            return .usage
        }
        do throws(ServingError) {
            if let certificate = arguments.value("tls-cert"), let key = arguments.value("tls-key") {
                options.tlsCertificate = try pem(certificate, kind: "CERTIFICATE")
                options.tlsKey = try pem(key, kind: "PRIVATE KEY")
            }
            if let keyFile = arguments.value("api-key-file") {
                guard let data = FileManager.default.contents(atPath: keyFile) else {
                    throw .apiKeyFile(path: keyFile, reason: FileManager.default.fileExists(atPath: keyFile) ? "cannot be read" : "does not exist")
                }
                let key = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                guard !key.isEmpty else { throw .apiKeyFile(path: keyFile, reason: "is empty") }
                options.apiKey = key
            }
            guard let cacheRoot = FetchCache.defaultRoot() else {
                throw .modelRepository(path: directory ?? manifest ?? "", reason: "no cache directory: set MODELC_CACHE (or HOME)")
            }
            let repository: ModelRepository
            if let manifest {
                repository = try ModelRepository.building(manifest: manifest, cacheRoot: cacheRoot, jobs: options.threads)
            } else {
                repository = try ModelRepository(directory: directory ?? ".", compileCache: cacheRoot)
            }
            // Before the server listens: a SIGTERM sent once it answers must reach the drain.
            InferenceServer.catchTerminationSignals()
            let server = try InferenceServer(repository: repository, options: options, log: ServerLog(format: format))
            server.runUntilSignalled()
            return .success
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return switch error {
            case .cannotListen: .cannotListen
            case .cannotListenGRPC: .cannotListenGRPC
            case .badTLS: .badTLS
            case .apiKeyFile: .badAPIKeyFile
            case .modelRepository: .badModelRepository
            case .badTraceEndpoint: .badTraceEndpoint
            }
        }
    }

    /// The PEM text of a TLS file, checked for the block it must hold.
    private static func pem(_ path: String, kind: String) throws(ServingError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .badTLS(reason: "\(path): \(FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist")")
        }
        let text = String(decoding: data, as: UTF8.self)
        guard text.contains("-----BEGIN"), text.contains(kind + "-----") else {
            throw .badTLS(reason: "\(path): not a PEM file holding a \(kind.lowercased())")
        }
        return text
    }
}
