import Dispatch
import Foundation
import ModelCompiler
import ModelFeatures
import ModelLoader
import ModelRuntime
import ModelSpec
import SystemIO

/// The Open Inference Protocol (REST) over a model repository: routes
/// requests, loads models on first use through a memory-budgeted cache,
/// queues inferences for the scheduler, and answers. No HTTP here: an
/// `InferenceServer` feeds it requests, tests call `handle(_:)` directly.
///
/// Thread-safe; one request's failure never affects another.
public final class InferenceService: Sendable {
    /// The loaded models, within the memory budget.
    public typealias Cache = ResourceCache<Model, ModelLoadError>

    /// What a model takes and gives, kept after the model is evicted.
    struct Description: Sendable {
        let summary: ModelSummary
        let labels: [String]
    }

    public let repository: ModelRepository
    public let options: ServerOptions
    public let cache: Cache
    public let metrics = ServerMetrics()
    /// Triton's statistics extension (`GET /v2/models/NAME/stats`).
    public let statistics = StatisticsRecorder()
    /// Where inference requests' spans go (`--trace-endpoint`); nil: not traced.
    public let tracer: TraceExporter?
    let scheduler: InferenceScheduler
    /// The live sequences of stateful models (`sequence_id`), their states within the budget.
    let sequences: Sequences
    let sequencesStopped = Locked(false)
    let log: ServerLog
    private let descriptions = Locked<[String: Description]>([:])
    /// Models unloaded through the repository API.
    private let unloaded = Locked<Set<String>>([])
    private let draining = Locked(false)
    /// Set while an `InferenceServer` starts its listeners: not ready until every port listens.
    let starting = Locked(false)
    /// When draining: the end of the drain (uptime nanoseconds), which no request's deadline passes.
    let drainEnd = Locked<UInt64?>(nil)
    let handling = Locked(0)
    let answeredCount = Locked(0)
    /// The version served for every model.
    static let version = "1"
    /// The platform model metadata names.
    static let platform = "coreml"

    /// - Parameter tracer: exports each inference request's spans; nil traces nothing.
    public init(repository: ModelRepository, options: ServerOptions, log: ServerLog, tracer: TraceExporter? = nil) {
        self.repository = repository
        self.options = options
        self.log = log
        self.tracer = tracer
        let configuration = ModelConfiguration(threads: 1)
        cache = Cache(budget: options.memoryBudget) { path throws(ModelLoadError) in
            try repository.load(path, configuration: configuration)
        }
        let cache = self.cache
        sequences = Self.makeSequences(options: options, cache: cache)
        let metrics = self.metrics
        let statistics = self.statistics
        scheduler = InferenceScheduler(
            workers: options.threads, maxBatch: options.maxBatch,
            batchDelayNanoseconds: UInt64(options.batchDelayMilliseconds) * 1_000_000, capacity: options.queueCapacity
        ) { path, batch, cancellation in
            let lease: ResourceLease<Model>
            switch InferenceService.lease(path, in: cache) {
            case .success(let leased): lease = leased
            case .failure(let error): return .failure(.loadFailed(model: InferenceService.name(of: path), reason: error.description))
            }
            defer { lease.release() }
            let model = lease.model
            metrics.recordExecution(model: InferenceService.name(of: path))
            let results: [Result<[String: FeatureValue], RuntimeError>]
            let started = DispatchTime.now().uptimeNanoseconds
            if options.computeDelayMilliseconds > 0, !InferenceService.delay(options.computeDelayMilliseconds, cancellation) {
                results = batch.map { _ in .failure(.cancelled) }
            } else if batch.count == 1 {
                results = [Result { () throws(RuntimeError) in try model.prediction(from: batch[0], cancellation: cancellation) }]
            } else {
                results = model.predictions(from: batch)
            }
            statistics.recordExecution(model: InferenceService.name(of: path), batchSize: batch.count,
                                       computeNanoseconds: DispatchTime.now().uptimeNanoseconds - started)
            return .success((model, results.map { $0.mapError { InferenceService.requestError($0, model: path) } }))
        }
        startSequenceReaper()
    }

    /// Stops taking work once what is queued is done, then exports the spans left (2 s at most:
    /// the drain's budget is `--timeout` plus the 5 s the answers have to be sent).
    public func shutdown() {
        scheduler.shutdown()
        stopSequences()
        tracer?.shutdown(timeout: 2)
    }

    /// Health says not ready from now on; requests are still answered, by `end` at the latest
    /// (a request still computing then is answered 503, shutting down).
    public func beginDraining(until end: DispatchTime? = nil) {
        drainEnd.withLock { $0 = end?.uptimeNanoseconds }
        draining.withLock { $0 = true }
    }

    public var isDraining: Bool { draining.withLock { $0 } }

    /// Requests being handled now.
    public var requestsInProgress: Int { handling.withLock { $0 } }

    /// Requests answered since the start (any status).
    public var requestsAnswered: Int { answeredCount.withLock { $0 } }

    /// Answers one request (any thread).
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        handling.withLock { $0 += 1 }
        defer {
            answeredCount.withLock { $0 += 1 }
            handling.withLock { $0 -= 1 }
        }
        var response: HTTPResponse
        do {
            response = try route(request)
        } catch {
            response = .error(error.status, error.description, headers: Self.extraHeaders(for: error))
            if error.status >= 500 {
                log.write("error", error.description, [("method", request.method), ("path", request.path), ("status", String(error.status))])
            }
        }
        if isDraining { response.headers.append(("Connection", "close")) }
        return response
    }

    private static func extraHeaders(for error: RequestError) -> [(String, String)] {
        switch error {
        case .overloaded, .timedOut, .shuttingDown, .tooManySequences, .sequenceMemory: [("Retry-After", "1")]
        case .unauthorized: [("WWW-Authenticate", "Bearer")]
        default: []
        }
    }

    private func route(_ request: HTTPRequest) throws(RequestError) -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if parts == ["v2", "health", "live"] { return try only("GET", request) { .json(200, ["live": true]) } }
        if parts == ["v2", "health", "ready"] {
            return try only("GET", request) {
                if isDraining { return .error(503, "server is shutting down") }
                return starting.withLock { $0 } ? .error(503, "server is starting") : .json(200, ["ready": true])
            }
        }
        try authorize(request)
        if parts == ["metrics"] {
            return try only("GET", request) {
                HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")], body: Array(metricsText().utf8))
            }
        }
        if parts == ["v2"] { return try only("GET", request) { .json(200, serverMetadata) } }
        if parts == ["v2", "models", "stats"] { return try only("GET", request) { allModelStatistics() } }
        if parts.count >= 3, parts[0] == "v2", parts[1] == "models" {
            let name = parts[2]
            var rest = Array(parts.dropFirst(3))
            if rest.count >= 2, rest[0] == "versions" {
                guard rest[1] == Self.version else { throw .unknownVersion(model: name, version: rest[1]) }
                rest.removeFirst(2)
            }
            switch rest {
            case []: return try only("GET", request) { () throws(RequestError) in try modelMetadata(name) }
            case ["ready"]:
                return try only("GET", request) { () throws(RequestError) in
                    _ = try describe(name)
                    return .json(200, ["name": name, "ready": true])
                }
            case ["infer"]: return try only("POST", request) { () throws(RequestError) in try infer(name, request) }
            case ["stats"]: return try only("GET", request) { () throws(RequestError) in try modelStatistics(name) }
            case ["generate"]:
                return try only("POST", request) { () throws(RequestError) in try generate(name, request, streaming: false) }
            case ["generate_stream"]:
                return try only("POST", request) { () throws(RequestError) in try generate(name, request, streaming: true) }
            default: throw .notFound(request.path)
            }
        }
        if parts == ["v2", "repository", "index"] { return try only("POST", request) { repositoryIndex(request) } }
        if parts.count == 5, parts[0] == "v2", parts[1] == "repository", parts[2] == "models" {
            let name = parts[3]
            switch parts[4] {
            case "load": return try only("POST", request) { () throws(RequestError) in try load(name) }
            case "unload": return try only("POST", request) { () throws(RequestError) in try unload(name) }
            default: throw .notFound(request.path)
            }
        }
        throw .notFound(request.path)
    }

    private func only(_ method: String, _ request: HTTPRequest,
                      _ body: () throws(RequestError) -> HTTPResponse) throws(RequestError) -> HTTPResponse {
        guard request.method == method || (method == "GET" && request.method == "HEAD") else {
            throw .methodNotAllowed(method: request.method, path: request.path)
        }
        return try body()
    }

    /// Checks the API key in constant time (when one is set).
    private func authorize(_ request: HTTPRequest) throws(RequestError) {
        try authorize(authorization: request.header("Authorization"), apiKey: request.header("X-API-Key"))
    }

    /// Checks the key given in an `Authorization: Bearer KEY` or `X-API-Key: KEY` header (or gRPC metadata).
    func authorize(authorization: String?, apiKey: String?) throws(RequestError) {
        guard let key = options.apiKey else { return }
        var given = apiKey ?? ""
        if let authorization, authorization.lowercased().hasPrefix("bearer ") {
            given = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        guard Self.constantTimeEqual(Array(given.utf8), Array(key.utf8)) else { throw .unauthorized }
    }

    /// Compares every byte whatever the first difference, so the time taken
    /// does not tell how much of a guess was right.
    static func constantTimeEqual(_ left: [UInt8], _ right: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count) | (left.count == right.count ? 0 : 1)
        let length = max(left.count, right.count)
        for index in 0..<length {
            let a = index < left.count ? left[index] : 0
            let b = index < right.count ? right[index] : 0
            difference |= a ^ b
        }
        return difference == 0
    }

    var serverMetadata: [String: Any] {
        ["name": Self.serverName, "version": BundleCompiler.compilerVersion, "extensions": Self.extensions]
    }

    static let serverName = "modelc"
    /// The protocol extensions served (REST; gRPC names the same).
    static let extensions = ["classification", "binary_tensor_data", "model_repository", "schedule_policy", "generate", "statistics",
                             "sequence", "sequence(string_id)"]

    // MARK: Models

    /// The model's path; unknown (or gone from disk: then dropped from the cache) → 404; unloaded → 400.
    private func resolve(_ name: String) throws(RequestError) -> String {
        guard let path = repository.path(for: name) else {
            let known = "\(repository.directory)/"
            let stale = descriptions.withLock { descriptions in
                descriptions.keys.filter { $0.hasPrefix(known) && Self.name(of: $0) == name }
            }
            for path in stale {
                descriptions.withLock { _ = $0.removeValue(forKey: path) }
                cache.evict(at: path)
                sequences.endAll(model: name, .unloaded)
                log.write("info", "model removed from the repository", [("model", name)])
            }
            throw .unknownModel(name)
        }
        guard !unloaded.withLock({ $0.contains(name) }) else { throw .modelUnloaded(name) }
        return path
    }

    /// The model's path and description, loading it (once, however many ask) when not known yet.
    func describe(_ name: String) throws(RequestError) -> (String, Description) {
        let path = try resolve(name)
        if let description = descriptions.withLock({ $0[path] }) { return (path, description) }
        switch Self.lease(path, in: cache) {
        case .success(let lease):
            defer { lease.release() }
            let description = Description(summary: lease.model.summary, labels: lease.model.classLabels)
            descriptions.withLock { $0[path] = description }
            return (path, description)
        case .failure(let error):
            throw .loadFailed(model: name, reason: error.description)
        }
    }

    /// A lease on the model at `path`, loaded on this thread when it is not
    /// in (connection and worker threads may block). It needs no thread of a
    /// shared pool: a request waiting on a task or Dispatch job would wait
    /// for as long as unrelated work keeps that pool busy.
    static func lease(_ path: String, in cache: Cache) -> Result<ResourceLease<Model>, ModelLoadError> {
        Result { () throws(ModelLoadError) in try cache.modelBlocking(at: path) }
    }

    /// Waits `milliseconds` (the test knob `computeDelayMilliseconds`) as a slow model would compute,
    /// looking at `cancellation` every 5 ms as the engine does between operations; false when cancelled.
    static func delay(_ milliseconds: Int, _ cancellation: PredictionCancellation) -> Bool {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        while DispatchTime.now().uptimeNanoseconds < end {
            if cancellation.isCancelled { return false }
            usleep(5_000)
        }
        return !cancellation.isCancelled
    }

    /// The model's name in the repository: its file's name without the extension (no file system call:
    /// the executor asks on every computation).
    static func name(of path: String) -> String {
        let file = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(path[path.utf8.index(after: $0)...]) } ?? path
        for suffix in ModelRepository.extensions where file.hasSuffix(suffix) { return String(file.dropLast(suffix.count)) }
        return file
    }

    static func requestError(_ error: RuntimeError, model path: String) -> RequestError {
        switch error {
        case .missingInput, .wrongType, .wrongShape, .wrongImageSize, .invalidValue: .badRequest(error.description)
        default: .inferenceFailed(model: name(of: path), reason: error.description)
        }
    }

    /// A tensor of a model's metadata: -1 in `shape` for a size the request chooses.
    struct TensorMetadata: Equatable {
        var name: String
        var datatype: TensorDataType
        var shape: [Int]
    }

    /// What a model takes and gives, as the protocol describes it (loading the model when not known yet).
    func metadata(of name: String) throws(RequestError) -> (inputs: [TensorMetadata], outputs: [TensorMetadata]) {
        let (_, description) = try describe(name)
        func tensors(_ features: [FeatureDescription]) -> [TensorMetadata] {
            features.compactMap { feature in
                guard let (datatype, shape) = TensorConversion.metadata(for: feature.type, classLabelCount: description.labels.count) else { return nil }
                return TensorMetadata(name: feature.name, datatype: datatype, shape: shape)
            }
        }
        return (tensors(description.summary.inputs), tensors(description.summary.outputs))
    }

    private func modelMetadata(_ name: String) throws(RequestError) -> HTTPResponse {
        let (inputs, outputs) = try metadata(of: name)
        func json(_ tensors: [TensorMetadata]) -> [[String: Any]] {
            tensors.map { ["name": $0.name, "datatype": $0.datatype.rawValue, "shape": $0.shape] }
        }
        return .json(200, ["name": name, "versions": [Self.version], "platform": Self.platform,
                           "inputs": json(inputs), "outputs": json(outputs)])
    }

    private func repositoryIndex(_ request: HTTPRequest) -> HTTPResponse {
        var readyOnly = false
        if !request.body.isEmpty, let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] {
            readyOnly = object["ready"] as? Bool ?? false
        }
        let resident = Set(cache.residentPaths)
        let unloaded = self.unloaded.withLock { $0 }
        var entries: [[String: Any]] = []
        for name in repository.names() {
            guard let path = repository.path(for: name) else { continue }
            let standardized = Cache.key(for: path)
            let state: String
            let reason: String
            if unloaded.contains(name) {
                (state, reason) = ("UNAVAILABLE", "unloaded")
            } else if resident.contains(standardized) {
                (state, reason) = ("READY", "")
            } else {
                (state, reason) = ("UNAVAILABLE", "not loaded (loads on first request)")
            }
            if readyOnly, state != "READY" { continue }
            entries.append(["name": name, "version": Self.version, "state": state, "reason": reason])
        }
        return .json(200, entries)
    }

    private func load(_ name: String) throws(RequestError) -> HTTPResponse {
        guard repository.path(for: name) != nil else { throw .unknownModel(name) }
        unloaded.withLock { _ = $0.remove(name) }
        let (path, _) = try describe(name)
        // describe may have answered from what it knew: make sure the model itself is in.
        switch Self.lease(path, in: cache) {
        case .success(let lease): lease.release()
        case .failure(let error): throw .loadFailed(model: name, reason: error.description)
        }
        log.write("info", "model loaded on request", [("model", name)])
        return .json(200, [String: Any]())
    }

    private func unload(_ name: String) throws(RequestError) -> HTTPResponse {
        guard let path = repository.path(for: name) else { throw .unknownModel(name) }
        unloaded.withLock { _ = $0.insert(name) }
        descriptions.withLock { _ = $0.removeValue(forKey: path) }
        sequences.endAll(model: name, .unloaded)
        cache.evict(at: path)
        log.write("info", "model unloaded on request", [("model", name)])
        return .json(200, [String: Any]())
    }

    // MARK: Inference

    private func infer(_ name: String, _ request: HTTPRequest) throws(RequestError) -> HTTPResponse {
        let arrival = DispatchTime.now().uptimeNanoseconds
        let trace = tracer == nil ? nil : RequestTrace(arrival: arrival, traceparent: request.header("traceparent"))
        let call = InferCall(protocol: .http, arrival: arrival, clientDeadline: nil, clientGone: request.clientGone,
                             trace: trace, path: request.path)
        return try infer(name, call) { () throws(RequestError) in
            if let encoding = request.header("Content-Encoding"), !encoding.isEmpty, encoding.lowercased() != "identity" {
                throw .unsupportedEncoding(encoding)
            }
            return try InferRequest.decode(body: request.body, headerLength: request.header("Inference-Header-Content-Length"),
                                           limits: .init(maxTensorBytes: options.maxTensorBytes))
        } encode: { answer in
            InferResponseEncoder.encode(model: name, version: Self.version, id: answer.id, outputs: answer.outputs)
        }
    }

    /// The protocol a request came over, for the metrics' `protocol` label.
    enum Transport: String {
        case http, grpc
    }

    /// How one inference request arrived: over which protocol, when, what bounds it, where its spans go.
    struct InferCall {
        var `protocol`: Transport
        /// Uptime nanoseconds.
        var arrival: UInt64
        /// The client's own deadline (uptime nanoseconds); the sooner of it and `--timeout` wins.
        var clientDeadline: UInt64?
        /// Whether the client has gone (the request is then given up).
        var clientGone: (@Sendable () -> Bool)?
        var trace: RequestTrace?
        /// What the spans name the request by.
        var path: String
    }

    /// What an inference gives back, before a protocol writes it.
    struct InferAnswer {
        var id: String?
        var outputs: [InferResponseEncoder.Output]
    }

    /// Runs one inference on model `name` and counts it in the metrics, statistics and traces:
    /// `decode` reads the request once the model is known, `encode` writes the answer.
    func infer<Response>(_ name: String, _ call: InferCall, decode: () throws(RequestError) -> InferRequest,
                         encode: (InferAnswer) -> Response) throws(RequestError) -> Response {
        var stages = InferStages(arrival: call.arrival)
        do {
            let answer = try inferOnce(name, call, stages: &stages, decode: decode)
            let response = encode(answer)
            stages.outputEnd = DispatchTime.now().uptimeNanoseconds
            let end = DispatchTime.now().uptimeNanoseconds
            let timing = stages.timing(end: end)
            metrics.recordSuccess(model: name, protocol: call.protocol.rawValue, totalNanoseconds: timing.total, queueNanoseconds: timing.queue,
                                  computeNanoseconds: timing.compute)
            statistics.recordSuccess(model: name, timing: timing)
            if let trace = call.trace { tracer?.submit(trace.spans(stages, end: end, model: name, path: call.path, protocol: call.protocol, failure: nil)) }
            return response
        } catch {
            let end = DispatchTime.now().uptimeNanoseconds
            // Failures are counted for the models the repository has, not for any name a client sends.
            if error != .unknownModel(name) {
                metrics.recordFailure(model: name, protocol: call.protocol.rawValue, reason: error.metricReason, totalNanoseconds: end - stages.arrival)
                statistics.recordFailure(model: name, nanoseconds: end - stages.arrival)
            }
            if let trace = call.trace { tracer?.submit(trace.spans(stages, end: end, model: name, path: call.path, protocol: call.protocol, failure: error)) }
            throw error
        }
    }

    private func inferOnce(_ name: String, _ call: InferCall, stages: inout InferStages,
                           decode: () throws(RequestError) -> InferRequest) throws(RequestError) -> InferAnswer {
        let (path, description) = try describe(name)
        stages.inputStart = DispatchTime.now().uptimeNanoseconds
        let decoded = try decode()
        let declaredInputs = Dictionary(description.summary.inputs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var inputs: [String: FeatureValue] = [:]
        for tensor in decoded.inputs {
            guard let declared = declaredInputs[tensor.name] else {
                throw .badRequest("model '\(name)' has no input '\(tensor.name)' (its inputs: \(description.summary.inputs.map(\.name).joined(separator: ", ")))")
            }
            inputs[tensor.name] = try TensorConversion.featureValue(tensor, for: declared)
        }
        let outputNames = Set(description.summary.outputs.map(\.name))
        for output in decoded.outputs where !outputNames.contains(output.name) {
            throw .badRequest("model '\(name)' has no output '\(output.name)' (its outputs: \(description.summary.outputs.map(\.name).joined(separator: ", ")))")
        }
        var timeout = options.timeoutMilliseconds
        var ownDeadline = stages.arrival + UInt64(timeout) * 1_000_000
        if let clientDeadline = call.clientDeadline, clientDeadline < ownDeadline {
            ownDeadline = clientDeadline
            timeout = Int((clientDeadline - min(stages.arrival, clientDeadline) + 500_000) / 1_000_000)
            if clientDeadline <= DispatchTime.now().uptimeNanoseconds { throw .timedOut(milliseconds: timeout) }
        }
        stages.queued = DispatchTime.now().uptimeNanoseconds
        let drainEnd = drainEnd.withLock { $0 }
        let deadline = DispatchTime(uptimeNanoseconds: min(ownDeadline, drainEnd ?? .max))
        let outcome = try submitInSequence(model: name, path: path, summary: description.summary, sequence: decoded.sequence ?? .init(id: nil),
                                           inputs: inputs, deadline: deadline, timeoutMilliseconds: timeout, clientGone: call.clientGone)
        stages.queueNanoseconds = outcome.queueNanoseconds
        stages.computeNanoseconds = outcome.computeNanoseconds
        stages.batchSize = outcome.batchSize
        if let drainEnd, drainEnd < ownDeadline, case .failure(.timedOut) = outcome.result { throw .shuttingDown }
        let values = try outcome.result.get()
        stages.outputStart = DispatchTime.now().uptimeNanoseconds
        let labels = outcome.model?.classLabels ?? description.labels
        let requested = decoded.outputs.isEmpty
            ? description.summary.outputs.map { InferRequest.RequestedOutput(name: $0.name, binary: nil, classification: nil) }
            : decoded.outputs
        var outputs: [InferResponseEncoder.Output] = []
        for output in requested {
            guard var value = values[output.name] else { continue }
            let binary = output.binary ?? decoded.binaryOutput
            if let count = output.classification {
                // A classifier's label output is classified by its probabilities.
                if case .string = value, let probabilities = description.summary.predictedProbabilitiesName, let scores = values[probabilities] {
                    value = scores
                } else if case .int64 = value, let probabilities = description.summary.predictedProbabilitiesName, let scores = values[probabilities] {
                    value = scores
                }
                guard let tensor = TensorConversion.classification(name: output.name, value: value, labels: labels, count: count) else {
                    throw .badRequest("output '\(output.name)' holds no scores to classify")
                }
                outputs.append(.init(tensor: tensor, binary: binary))
            } else {
                outputs.append(.init(tensor: TensorConversion.tensor(name: output.name, value: value, labels: labels), binary: binary))
            }
        }
        return InferAnswer(id: decoded.id, outputs: outputs)
    }

    // MARK: Statistics

    /// `GET /v2/models/NAME/stats`: 404 for a model the repository does not have, 400 for one unloaded.
    private func modelStatistics(_ name: String) throws(RequestError) -> HTTPResponse {
        _ = try resolve(name)
        return .json(200, ["model_stats": [statistics.statistics(for: name).json(name: name, version: Self.version)]])
    }

    /// `GET /v2/models/stats`: every model of the repository, by name (zeros for one never asked).
    private func allModelStatistics() -> HTTPResponse {
        let names = repository.names().sorted()
        return .json(200, ["model_stats": names.map { statistics.statistics(for: $0).json(name: $0, version: Self.version) }])
    }

    func metricsText() -> String {
        let statistics = cache.statistics
        return metrics.text(.init(queueDepth: scheduler.depth, inFlight: scheduler.inFlight,
                                  canceledComputations: scheduler.canceledComputations, loads: statistics.loads,
                                  failedLoads: statistics.failedLoads, evictions: statistics.evictions,
                                  residentBytes: statistics.bytesResident, residentModels: statistics.modelsResident))
            + sequenceMetricsText() + (tracer?.metricsText() ?? "")
    }
}
