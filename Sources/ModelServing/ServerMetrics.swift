import Foundation
import SystemIO

/// Counters and histograms of a server, written as Prometheus text. Triton's
/// metric names where Triton has one (`nv_inference_…`), `modelc_…` otherwise.
public final class ServerMetrics: Sendable {
    /// Upper bounds of the latency histograms' buckets, in seconds.
    public static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct ModelCounters {
        var success = 0
        var failures: [String: Int] = [:]
        var inferences = 0
        var executions = 0
        var requestMicroseconds: UInt64 = 0
        var queueMicroseconds: UInt64 = 0
        var computeMicroseconds: UInt64 = 0
        var buckets = [Int](repeating: 0, count: ServerMetrics.bucketBounds.count)
        var latencyCount = 0
        var latencySum = 0.0
        /// Generations: arrival to first token, and between consecutive tokens.
        var firstToken = Histogram()
        var token = Histogram()
        var tokens = 0
        /// Requests answered (success or failure), by protocol (`http`, `grpc`).
        var byProtocol: [String: Int] = [:]
    }

    /// Observations of one latency, in `bucketBounds` (cumulative counts, as Prometheus has them).
    struct Histogram {
        var buckets = [Int](repeating: 0, count: ServerMetrics.bucketBounds.count)
        var count = 0
        var sum = 0.0

        mutating func observe(_ seconds: Double) {
            for (index, bound) in ServerMetrics.bucketBounds.enumerated() where seconds <= bound { buckets[index] += 1 }
            count += 1
            sum += seconds
        }
    }

    private let models = Locked<[String: ModelCounters]>([:])

    public init() {}

    /// A request answered successfully after `queue` + `compute` nanoseconds of `total`;
    /// `protocol` is the protocol it came over (`http`, `grpc`).
    public func recordSuccess(model: String, protocol transport: String = "http", totalNanoseconds: UInt64, queueNanoseconds: UInt64,
                              computeNanoseconds: UInt64) {
        models.withLock { models in
            var counters = models[model] ?? ModelCounters()
            counters.success += 1
            counters.byProtocol[transport, default: 0] += 1
            counters.inferences += 1
            counters.requestMicroseconds += totalNanoseconds / 1000
            counters.queueMicroseconds += queueNanoseconds / 1000
            counters.computeMicroseconds += computeNanoseconds / 1000
            Self.observe(&counters, seconds: Double(totalNanoseconds) / 1e9)
            models[model] = counters
        }
    }

    /// One execution of `model` (a batch of any size).
    public func recordExecution(model: String) {
        models.withLock { $0[model, default: ModelCounters()].executions += 1 }
    }

    /// A request to `model` that failed, with the reason label (`REJECTED`, `BACKEND`, …).
    public func recordFailure(model: String, protocol transport: String = "http", reason: String, totalNanoseconds: UInt64) {
        models.withLock { models in
            var counters = models[model] ?? ModelCounters()
            counters.failures[reason, default: 0] += 1
            counters.byProtocol[transport, default: 0] += 1
            counters.requestMicroseconds += totalNanoseconds / 1000
            Self.observe(&counters, seconds: Double(totalNanoseconds) / 1e9)
            models[model] = counters
        }
    }

    /// A generation's token was chosen: the first `seconds` after the request arrived
    /// (queueing and prefill included), a later one `seconds` after the token before it.
    public func recordToken(model: String, first: Bool, seconds: Double) {
        models.withLock { models in
            var counters = models[model] ?? ModelCounters()
            if first { counters.firstToken.observe(seconds) } else { counters.token.observe(seconds) }
            counters.tokens += 1
            models[model] = counters
        }
    }

    private static func observe(_ counters: inout ModelCounters, seconds: Double) {
        for (index, bound) in bucketBounds.enumerated() where seconds <= bound { counters.buckets[index] += 1 }
        counters.latencyCount += 1
        counters.latencySum += seconds
    }

    /// Process-wide values sampled when the metrics are read.
    public struct Gauges: Sendable {
        public var queueDepth: Int
        public var inFlight: Int
        /// Computations stopped because every request they served stopped waiting (deadline passed).
        public var canceledComputations: Int = 0
        public var loads: Int
        public var failedLoads: Int
        public var evictions: Int
        public var residentBytes: Int
        public var residentModels: Int
    }

    /// The Prometheus text exposition (format 0.0.4).
    public func text(_ gauges: Gauges) -> String {
        let models = self.models.withLock { $0 }.sorted { $0.key < $1.key }
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            text += Self.family(name, type, help, samples)
        }
        func labels(_ model: String, _ extra: String = "") -> String { Self.labels(model, extra) }
        family("nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes",
               models.map { (labels($0.key), String($0.value.success)) })
        family("nv_inference_request_failure", "counter", "Number of failed inference requests, all batch sizes",
               models.flatMap { model in
                   model.value.failures.sorted { $0.key < $1.key }.map { (labels(model.key, ",reason=\"\($0.key)\""), String($0.value)) }
               })
        family("modelc_inference_requests_total", "counter", "Inference requests answered (success or failure), by protocol",
               models.flatMap { model in
                   model.value.byProtocol.sorted { $0.key < $1.key }.map { (labels(model.key, ",protocol=\"\($0.key)\""), String($0.value)) }
               })
        family("nv_inference_count", "counter", "Number of inferences performed (does not include cached requests)",
               models.map { (labels($0.key), String($0.value.inferences)) })
        family("nv_inference_exec_count", "counter", "Number of model executions performed (does not include cached requests)",
               models.map { (labels($0.key), String($0.value.executions)) })
        family("nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds (includes cached requests)",
               models.map { (labels($0.key), String($0.value.requestMicroseconds)) })
        family("nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds (includes cached requests)",
               models.map { (labels($0.key), String($0.value.queueMicroseconds)) })
        family("nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds (does not include cached requests)",
               models.map { (labels($0.key), String($0.value.computeMicroseconds)) })
        family("nv_inference_pending_request_count", "gauge", "Instantaneous number of pending requests awaiting execution (all models)",
               [("", String(gauges.queueDepth))])
        var histogram: [(String, String)] = []
        for (model, counters) in models {
            for (index, bound) in Self.bucketBounds.enumerated() {
                histogram.append((labels(model, ",le=\"\(bound)\""), String(counters.buckets[index])))
            }
            histogram.append((labels(model, ",le=\"+Inf\""), String(counters.latencyCount)))
        }
        text += "# HELP modelc_inference_request_duration_seconds Inference request latency, from arrival to answer\n"
        text += "# TYPE modelc_inference_request_duration_seconds histogram\n"
        for (labelText, value) in histogram { text += "modelc_inference_request_duration_seconds_bucket\(labelText) \(value)\n" }
        for (model, counters) in models {
            text += "modelc_inference_request_duration_seconds_sum\(labels(model)) \(counters.latencySum)\n"
            text += "modelc_inference_request_duration_seconds_count\(labels(model)) \(counters.latencyCount)\n"
        }
        func latencies(_ name: String, _ help: String, _ value: (ModelCounters) -> Histogram) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for (model, counters) in models where counters.tokens > 0 {
                let observed = value(counters)
                for (index, bound) in Self.bucketBounds.enumerated() {
                    text += "\(name)_bucket\(labels(model, ",le=\"\(bound)\"")) \(observed.buckets[index])\n"
                }
                text += "\(name)_bucket\(labels(model, ",le=\"+Inf\"")) \(observed.count)\n"
                text += "\(name)_sum\(labels(model)) \(observed.sum)\n"
                text += "\(name)_count\(labels(model)) \(observed.count)\n"
            }
        }
        latencies("modelc_generate_first_token_seconds", "Generation latency from arrival to the first token (queueing and prefill included)") { $0.firstToken }
        latencies("modelc_generate_token_seconds", "Generation latency of each later token, from the token before it") { $0.token }
        family("modelc_generate_tokens_total", "counter", "Tokens generated",
               models.filter { $0.value.tokens > 0 }.map { (labels($0.key), String($0.value.tokens)) })
        family("modelc_inference_queue_depth", "gauge", "Requests waiting for a worker", [("", String(gauges.queueDepth))])
        family("modelc_inference_in_flight", "gauge", "Requests being computed", [("", String(gauges.inFlight))])
        family("modelc_inference_computations_canceled_total", "counter",
               "Computations stopped at an operation boundary because every request they served stopped waiting",
               [("", String(gauges.canceledComputations))])
        family("modelc_model_loads_total", "counter", "Models loaded (first use and reloads after eviction)", [("", String(gauges.loads))])
        family("modelc_model_load_failures_total", "counter", "Model loads that failed", [("", String(gauges.failedLoads))])
        family("modelc_model_evictions_total", "counter", "Models evicted (budget, memory pressure, unload)", [("", String(gauges.evictions))])
        family("modelc_model_resident_bytes", "gauge", "Bytes held by the loaded models", [("", String(gauges.residentBytes))])
        family("modelc_models_resident", "gauge", "Models loaded now", [("", String(gauges.residentModels))])
        return text
    }

    /// One metric family in the text format: its help and type lines, then a line per sample (labels, value).
    static func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) -> String {
        var text = "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        for (labels, value) in samples { text += "\(name)\(labels) \(value)\n" }
        return text
    }

    /// A model's labels, `{model="NAME",version="1"}`, with `extra` (`,reason="…"`) before the brace.
    static func labels(_ model: String, _ extra: String = "") -> String {
        "{model=\"\(escape(model))\",version=\"1\"\(extra)}"
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}

/// Log lines on standard error, as text or one JSON object per line.
public struct ServerLog: Sendable {
    public enum Format: String, Sendable { case text, json }
    public let format: Format
    private let lock = Locked(())
    private let sink: @Sendable (String) -> Void

    /// A log on standard error.
    public init(format: Format) {
        self.init(format: format) { line in FileHandle.standardError.write(Data(line.utf8)) }
    }

    /// A log whose lines (each ending in a newline) go to `sink`, one at a time.
    public init(format: Format, sink: @escaping @Sendable (String) -> Void) {
        self.format = format
        self.sink = sink
    }

    /// Writes one line: `level` (`info`, `warning`, `error`), a message, and fields.
    public func write(_ level: String, _ message: String, _ fields: [(String, String)] = []) {
        let time = ISO8601DateFormatter().string(from: Date())
        let line: String
        switch format {
        case .text:
            line = "\(time) \(level) \(message)" + fields.map { " \($0.0)=\($0.1)" }.joined() + "\n"
        case .json:
            var object = ["time": time, "level": level, "message": message]
            for (key, value) in fields { object[key] = value }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            line = String(decoding: data, as: UTF8.self) + "\n"
        }
        lock.withLock { _ in sink(line) }
    }
}
