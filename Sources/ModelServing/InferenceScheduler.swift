import Dispatch
import Foundation
import ModelFeatures
import ModelRuntime
import SystemIO

/// What became of one queued request.
public struct JobOutcome: Sendable {
    public var result: Result<[String: FeatureValue], RequestError>
    /// The model that computed it (for its labels), when it ran.
    public var model: Model?
    public var queueNanoseconds: UInt64
    public var computeNanoseconds: UInt64
    /// The requests computed together with this one (itself included).
    public var batchSize: Int
}

/// Runs one batch: the inputs of requests to the model at one path, computed
/// together. Returns the model and one result per request, in order, or one
/// error for all (the model could not be loaded).
/// `cancellation` is cancelled when every request of the batch has stopped waiting (its
/// deadline passed): the executor passes it to the model, which stops at the next operation.
public typealias BatchExecutor = @Sendable (_ path: String, _ batch: [[String: FeatureValue]], _ cancellation: PredictionCancellation)
    -> Result<(Model, [Result<[String: FeatureValue], RequestError>]), RequestError>

/// Computes one request alone, in place of the `BatchExecutor` (a request of a sequence, on its
/// state): its model and its result, or an error. `cancellation` as for a batch of one.
public typealias JobComputation = @Sendable (_ cancellation: PredictionCancellation)
    -> Result<(Model, Result<[String: FeatureValue], RequestError>), RequestError>

/// A bounded queue of inference requests served by a fixed number of worker
/// threads, with dynamic batching: a worker takes the oldest request and up to
/// `maxBatch - 1` more for the same model, waiting at most `batchDelay` from
/// the oldest one's arrival for them to come.
///
/// Tasks (`enqueue`: a generation) share the queue and the workers, one task per worker, never batched.
///
/// Thread-safe. `submit` blocks its caller (a connection's thread) until the
/// request is answered or its deadline passes.
public final class InferenceScheduler: @unchecked Sendable {
    fileprivate final class Job: @unchecked Sendable {
        let path: String
        let inputs: [String: FeatureValue]
        /// A task run alone instead of a prediction (a generation), given its queueing nanoseconds.
        let task: (@Sendable (UInt64) -> Void)?
        /// Computes this request alone instead of in a batch.
        let compute: JobComputation?
        let enqueued = DispatchTime.now().uptimeNanoseconds
        let done = DispatchSemaphore(value: 0)
        /// Set once, under `lock`.
        var outcome: JobOutcome?
        var cancelled = false
        /// The batch computing it, while one does (under `lock`).
        var running: RunningBatch?

        init(path: String, inputs: [String: FeatureValue], task: (@Sendable (UInt64) -> Void)? = nil, compute: JobComputation? = nil) {
            self.path = path
            self.inputs = inputs
            self.task = task
            self.compute = compute
        }

        /// Batched with other requests of its model (not a task, not computed alone).
        var batches: Bool { task == nil && compute == nil }
    }

    /// A batch being computed: its requests and the flag that stops it.
    fileprivate final class RunningBatch: @unchecked Sendable {
        let jobs: [Job]
        let cancellation = PredictionCancellation()

        init(jobs: [Job]) {
            self.jobs = jobs
        }
    }

    /// A task queued by `enqueue`, to withdraw while it waits.
    public struct Ticket: Sendable {
        fileprivate let job: Job
    }

    public let workers: Int
    public let maxBatch: Int
    public let batchDelayNanoseconds: UInt64
    public let capacity: Int
    private let execute: BatchExecutor
    /// Guards everything below and every job's `outcome` and `cancelled`.
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var gathering: Set<String> = []
    private var running = 0
    private var canceledCount = 0
    private var stopping = false
    private var threads: [Thread] = []

    /// Starts `workers` threads.
    public init(workers: Int, maxBatch: Int, batchDelayNanoseconds: UInt64, capacity: Int, execute: @escaping BatchExecutor) {
        self.workers = max(1, workers)
        self.maxBatch = max(1, maxBatch)
        self.batchDelayNanoseconds = batchDelayNanoseconds
        self.capacity = max(1, capacity)
        self.execute = execute
        for index in 0..<self.workers {
            let thread = Thread { self.work() }  // each thread keeps the scheduler until it returns
            thread.name = "modelc-infer-\(index)"
            thread.stackSize = 8 << 20
            threads.append(thread)
        }
        for thread in threads { thread.start() }
    }

    /// Requests waiting for a worker now.
    public var depth: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count
    }

    /// Computations stopped because every request of their batch stopped waiting.
    public var canceledComputations: Int {
        condition.lock()
        defer { condition.unlock() }
        return canceledCount
    }

    /// Requests being computed now.
    public var inFlight: Int {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// How often a waiting request looks whether its client is still there.
    static let clientPollNanoseconds: UInt64 = 20_000_000

    /// Queues the request and waits for its outcome until `deadline`, or until `clientGone` (asked
    /// every 20 ms while it waits, on the caller's thread) says its client left.
    /// `.overloaded` at once when the queue is full, `.timedOut` after the deadline, `.clientGone`.
    /// A request given up leaves the queue; its batch's computation is stopped at its next
    /// operation once every request of the batch has been given up.
    /// With `compute`, the request is computed alone by it, never batched.
    public func submit(path: String, inputs: [String: FeatureValue], deadline: DispatchTime, timeoutMilliseconds: Int,
                       clientGone: (@Sendable () -> Bool)? = nil, compute: JobComputation? = nil) -> JobOutcome {
        let job = Job(path: path, inputs: inputs, compute: compute)
        condition.lock()
        if stopping {
            condition.unlock()
            return JobOutcome(result: .failure(.shuttingDown), model: nil, queueNanoseconds: 0, computeNanoseconds: 0, batchSize: 0)
        }
        if queue.count >= capacity {
            let queued = queue.count
            condition.unlock()
            return JobOutcome(result: .failure(.overloaded(queued: queued)), model: nil, queueNanoseconds: 0, computeNanoseconds: 0, batchSize: 0)
        }
        queue.append(job)
        condition.broadcast()
        condition.unlock()
        var gone = false
        while true {
            let slice = clientGone == nil ? deadline
                : min(deadline, DispatchTime(uptimeNanoseconds: DispatchTime.now().uptimeNanoseconds + Self.clientPollNanoseconds))
            if job.done.wait(timeout: slice) == .success {
                condition.lock()
                defer { condition.unlock() }
                if let outcome = job.outcome { return outcome }
                break
            }
            if DispatchTime.now() >= deadline { break }
            if let clientGone, clientGone() {
                gone = true
                break
            }
        }
        condition.lock()
        defer { condition.unlock() }
        if let outcome = job.outcome { return outcome }
        job.cancelled = true
        queue.removeAll { $0 === job }
        // Computing, and nobody else waits for its batch: stop it at the next operation.
        if let batch = job.running, !batch.cancellation.isCancelled, batch.jobs.allSatisfy(\.cancelled) {
            batch.cancellation.cancel()
            canceledCount += 1
        }
        let waited = DispatchTime.now().uptimeNanoseconds - job.enqueued
        return JobOutcome(result: .failure(gone ? .clientGone : .timedOut(milliseconds: timeoutMilliseconds)), model: nil,
                          queueNanoseconds: waited, computeNanoseconds: 0, batchSize: 0)
    }

    /// Queues `task` to run alone on a worker (after the requests queued before it), holding that
    /// worker until it returns; it is given the nanoseconds it waited. Does not wait for it.
    ///
    /// - Returns: a ticket to withdraw it with, or `.overloaded` when the queue is full,
    ///   `.shuttingDown` once the scheduler stops.
    public func enqueue(path: String, task: @escaping @Sendable (_ queueNanoseconds: UInt64) -> Void) -> Result<Ticket, RequestError> {
        let job = Job(path: path, inputs: [:], task: task)
        condition.lock()
        defer { condition.unlock() }
        if stopping { return .failure(.shuttingDown) }
        if queue.count >= capacity { return .failure(.overloaded(queued: queue.count)) }
        queue.append(job)
        condition.broadcast()
        return .success(Ticket(job: job))
    }

    /// Takes a task out of the queue if no worker took it yet; whether it did.
    @discardableResult
    public func withdraw(_ ticket: Ticket) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let queued = queue.count
        queue.removeAll { $0 === ticket.job }
        return queue.count < queued
    }

    /// Lets the workers finish what is queued, then stop; returns once they have.
    public func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while running > 0 || !queue.isEmpty { _ = condition.wait(until: Date().addingTimeInterval(0.05)) }
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            var first: Job?
            while true {
                first = queue.first { !$0.batches || !gathering.contains($0.path) }
                if first != nil || (stopping && queue.isEmpty) { break }
                condition.wait()
            }
            guard let first else {
                condition.unlock()
                return
            }
            if let task = first.task {
                queue.removeAll { $0 === first }
                running += 1
                condition.unlock()
                task(DispatchTime.now().uptimeNanoseconds - first.enqueued)
                condition.lock()
                running -= 1
                condition.broadcast()
                condition.unlock()
                continue
            }
            if first.compute == nil, maxBatch > 1, batchDelayNanoseconds > 0 {
                gathering.insert(first.path)
                let until = Date().addingTimeInterval(Double(first.enqueued + batchDelayNanoseconds) / 1e9
                    - Double(DispatchTime.now().uptimeNanoseconds) / 1e9)
                while !stopping, queue.lazy.filter({ $0.path == first.path && $0.batches }).count < maxBatch, Date() < until {
                    _ = condition.wait(until: until)
                }
                gathering.remove(first.path)
            }
            var batch: [Job] = []
            var rest: [Job] = []
            if first.compute != nil {
                batch = [first]
                rest = queue.filter { $0 !== first }
            } else {
                for job in queue {
                    if job.path == first.path, job.batches, batch.count < maxBatch { batch.append(job) } else { rest.append(job) }
                }
            }
            queue = rest
            running += batch.count
            let computing = RunningBatch(jobs: batch)
            for job in batch { job.running = computing }
            condition.unlock()
            if !batch.isEmpty { run(computing) }
            condition.lock()
            running -= batch.count
            condition.broadcast()
            condition.unlock()
        }
    }

    private func run(_ computing: RunningBatch) {
        let batch = computing.jobs
        let started = DispatchTime.now().uptimeNanoseconds
        let result = if let compute = batch[0].compute {
            compute(computing.cancellation).map { model, result in (model, [result]) }
        } else {
            execute(batch[0].path, batch.map(\.inputs), computing.cancellation)
        }
        let finished = DispatchTime.now().uptimeNanoseconds
        condition.lock()
        for (index, job) in batch.enumerated() {
            let jobResult: Result<[String: FeatureValue], RequestError>
            var model: Model?
            switch result {
            case .success(let (loaded, results)):
                jobResult = results[index]
                model = loaded
            case .failure(let error):
                jobResult = .failure(error)
            }
            job.outcome = JobOutcome(result: jobResult, model: model, queueNanoseconds: started - job.enqueued,
                                     computeNanoseconds: finished - started, batchSize: batch.count)
            job.running = nil
        }
        condition.unlock()
        for job in batch { job.done.signal() }
    }
}
