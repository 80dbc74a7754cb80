import Foundation
import SystemIO

/// A count and the nanoseconds it took in all, as Triton's statistics extension reports each
/// duration (`{"count": N, "ns": T}`).
public struct DurationStatistic: Sendable, Equatable {
    public var count: UInt64 = 0
    public var nanoseconds: UInt64 = 0

    public init(count: UInt64 = 0, nanoseconds: UInt64 = 0) {
        self.count = count
        self.nanoseconds = nanoseconds
    }

    mutating func add(_ nanoseconds: UInt64) {
        count += 1
        self.nanoseconds &+= nanoseconds
    }

    var json: [String: Any] { ["count": count, "ns": nanoseconds] }
}

/// How long one answered inference spent in each stage, in nanoseconds; the stages do not overlap,
/// so their sum is at most `total`.
public struct RequestTiming: Sendable, Equatable {
    /// From the request's arrival (its body read) to its answer encoded.
    public var total: UInt64
    /// Waiting for a worker (and for its batch to fill).
    public var queue: UInt64 = 0
    /// Reading the inputs out of the body and converting them to the model's features.
    public var input: UInt64 = 0
    /// The batch's computation (every request of a batch is given the whole batch's time).
    public var compute: UInt64 = 0
    /// Converting the outputs to tensors and encoding the answer.
    public var output: UInt64 = 0
    /// The requests computed together with this one, itself included (0: never computed).
    public var batchSize: Int = 0

    public init(total: UInt64, queue: UInt64 = 0, input: UInt64 = 0, compute: UInt64 = 0, output: UInt64 = 0, batchSize: Int = 0) {
        self.total = total
        self.queue = queue
        self.input = input
        self.compute = compute
        self.output = output
        self.batchSize = batchSize
    }
}

/// One model's statistics since the server started, in the shape of Triton's statistics
/// extension (`GET /v2/models/NAME/stats`).
public struct ModelStatistics: Sendable, Equatable {
    /// The durations of one batch size's executions.
    public struct Batch: Sendable, Equatable {
        /// Executions of this size; their inputs' and outputs' conversions (summed over the batch's
        /// requests) and their computations.
        public var computeInput = DurationStatistic()
        public var computeInfer = DurationStatistic()
        public var computeOutput = DurationStatistic()
    }

    /// When the last inference request for the model arrived, in milliseconds since 1970 (0: none yet).
    public var lastInference: UInt64 = 0
    /// Successful inferences (each request is one inference).
    public var inferenceCount: UInt64 = 0
    /// Model executions (a batch of any size is one).
    public var executionCount: UInt64 = 0
    /// Successful requests, from arrival to answer.
    public var success = DurationStatistic()
    /// Failed requests, from arrival to the failure.
    public var fail = DurationStatistic()
    /// Successful requests' time waiting for a worker.
    public var queue = DurationStatistic()
    public var computeInput = DurationStatistic()
    public var computeInfer = DurationStatistic()
    public var computeOutput = DurationStatistic()
    /// modelc has no response cache: always zero.
    public var cacheHit = DurationStatistic()
    public var cacheMiss = DurationStatistic()
    /// By batch size.
    public var batches: [Int: Batch] = [:]

    public init() {}

    /// Triton's `$model_stat` object.
    public func json(name: String, version: String) -> [String: Any] {
        [
            "name": name, "version": version, "last_inference": lastInference,
            "inference_count": inferenceCount, "execution_count": executionCount,
            "inference_stats": [
                "success": success.json, "fail": fail.json, "queue": queue.json,
                "compute_input": computeInput.json, "compute_infer": computeInfer.json, "compute_output": computeOutput.json,
                "cache_hit": cacheHit.json, "cache_miss": cacheMiss.json,
            ],
            "batch_stats": batches.keys.sorted().compactMap { size -> [String: Any]? in
                guard let batch = batches[size] else { return nil }
                return ["batch_size": size, "compute_input": batch.computeInput.json,
                        "compute_infer": batch.computeInfer.json, "compute_output": batch.computeOutput.json]
            },
        ]
    }
}

/// Collects every model's `ModelStatistics` as requests are answered and batches run.
///
/// Thread-safe.
public final class StatisticsRecorder: Sendable {
    private let models = Locked<[String: ModelStatistics]>([:])
    /// Milliseconds since 1970, now (a test may fix it).
    private let clock: @Sendable () -> UInt64

    public init(clock: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }) {
        self.clock = clock
    }

    /// A request to `model` answered successfully, its stages timed.
    public func recordSuccess(model: String, timing: RequestTiming) {
        let now = clock()
        models.withLock { models in
            var statistics = models[model] ?? ModelStatistics()
            statistics.lastInference = now
            statistics.inferenceCount += 1
            statistics.success.add(timing.total)
            statistics.queue.add(timing.queue)
            statistics.computeInput.add(timing.input)
            statistics.computeInfer.add(timing.compute)
            statistics.computeOutput.add(timing.output)
            if timing.batchSize > 0 {
                var batch = statistics.batches[timing.batchSize] ?? ModelStatistics.Batch()
                // Counted per execution (by `recordExecution`); the conversions add up over its requests.
                batch.computeInput.nanoseconds &+= timing.input
                batch.computeOutput.nanoseconds &+= timing.output
                statistics.batches[timing.batchSize] = batch
            }
            models[model] = statistics
        }
    }

    /// A request to `model` failed `nanoseconds` after it arrived.
    public func recordFailure(model: String, nanoseconds: UInt64) {
        let now = clock()
        models.withLock { models in
            var statistics = models[model] ?? ModelStatistics()
            statistics.lastInference = now
            statistics.fail.add(nanoseconds)
            models[model] = statistics
        }
    }

    /// One execution of `model`: `batchSize` requests computed together in `computeNanoseconds`.
    public func recordExecution(model: String, batchSize: Int, computeNanoseconds: UInt64) {
        models.withLock { models in
            var statistics = models[model] ?? ModelStatistics()
            statistics.executionCount += 1
            var batch = statistics.batches[batchSize] ?? ModelStatistics.Batch()
            batch.computeInfer.add(computeNanoseconds)
            batch.computeInput.count += 1
            batch.computeOutput.count += 1
            statistics.batches[batchSize] = batch
            models[model] = statistics
        }
    }

    /// The model's statistics so far (zero for a model never asked).
    public func statistics(for model: String) -> ModelStatistics {
        models.withLock { $0[model] } ?? ModelStatistics()
    }
}
