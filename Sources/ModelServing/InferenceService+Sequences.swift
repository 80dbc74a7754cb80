import Dispatch
import Foundation
import ModelFeatures
import ModelLoader
import ModelRuntime
import ModelSpec

/// A live sequence's state: the model it was made by (leased, so the model stays loaded while the
/// sequence lives) and its `ModelState`.
public struct SequenceModelState: Sendable {
    public let model: Model
    public let state: ModelState
}

/// Triton's sequence extension for stateful models (ML programs that declare states): requests
/// with `sequence_id` run on that sequence's state, kept by a `SequenceStore` between them.
///
/// Transport-free: `submitInSequence` takes the parsed `SequenceParameters` and the converted
/// inputs, so the REST and gRPC paths share it. A request of a sequence is computed alone
/// (`InferenceScheduler.submit(compute:)`): the engine has no batched stateful prediction, so
/// requests of different sequences run side by side on different workers, not in one batch.
extension InferenceService {
    typealias Sequences = SequenceStore<SequenceModelState>

    static func makeSequences(options: ServerOptions, cache: Cache) -> Sequences {
        Sequences(maxSequences: options.maxSequences,
                  idleTimeoutNanoseconds: UInt64(max(0, options.sequenceIdleTimeoutSeconds) * 1e9),
                  reserve: { cache.reserve($0) }, unreserve: { cache.unreserve($0) })
    }

    /// Queues a request that names a sequence (`sequence.id` set), on its sequence's state, and
    /// waits for its outcome as `InferenceScheduler.submit` does.
    ///
    /// - Throws: `.badRequest` when the model declares no state (naming the parameter), and what
    ///   `SequenceStore.acquire` throws (unknown sequence, limits, deadline).
    func submitInSequence(model name: String, path: String, summary: ModelSummary, sequence: SequenceParameters,
                          inputs: [String: FeatureValue], deadline: DispatchTime, timeoutMilliseconds: Int,
                          clientGone: (@Sendable () -> Bool)?) throws(RequestError) -> JobOutcome {
        guard let id = sequence.id else {
            return scheduler.submit(path: path, inputs: inputs, deadline: deadline, timeoutMilliseconds: timeoutMilliseconds, clientGone: clientGone)
        }
        guard !summary.states.isEmpty else {
            throw .badRequest("model '\(name)' has no state: 'parameters.\(sequence.firstMeaningful ?? "sequence_id")' is only for stateful models (ML programs that declare states)")
        }
        let cache = self.cache
        let turn = try sequences.acquire(.init(model: name, id: id), start: sequence.start, deadline: deadline.uptimeNanoseconds,
                                         timeoutMilliseconds: timeoutMilliseconds, clientGone: clientGone) { () throws(RequestError) in
            let lease: ResourceLease<Model>
            switch Self.lease(path, in: cache) {
            case .success(let leased): lease = leased
            case .failure(let error): throw .loadFailed(model: name, reason: error.description)
            }
            guard let state = lease.model.makeState() else {
                lease.release()
                throw .badRequest("model '\(name)' runs on an engine without states: 'parameters.sequence_id' cannot be served")
            }
            return .init(state: SequenceModelState(model: lease.model, state: state), bytes: state.bytes, release: { lease.release() })
        }
        let outcome = scheduler.submit(path: path, inputs: inputs, deadline: deadline, timeoutMilliseconds: timeoutMilliseconds,
                                       clientGone: clientGone) { cancellation in
            self.compute(inputs, on: turn, model: name, cancellation: cancellation)
        }
        switch outcome.result {
        case .success: sequences.release(turn, end: sequence.end)
        case .failure(let error): sequences.abandon(turn, because: error)
        }
        return outcome
    }

    /// One request's prediction on its sequence's state, on a worker. Not stopped part-way by
    /// `cancellation` (a state would be left half-updated); a request given up before it starts is
    /// not computed.
    private func compute(_ inputs: [String: FeatureValue], on turn: Sequences.Turn, model name: String,
                         cancellation: PredictionCancellation) -> Result<(Model, Result<[String: FeatureValue], RequestError>), RequestError> {
        let model = turn.state.model
        guard sequences.beginComputing(turn) else { return .failure(.clientGone) }
        if options.computeDelayMilliseconds > 0, !Self.delay(options.computeDelayMilliseconds, cancellation) {
            sequences.finishComputing(turn, touched: false)
            return .success((model, .failure(.timedOut(milliseconds: options.timeoutMilliseconds))))
        }
        metrics.recordExecution(model: name)
        let started = DispatchTime.now().uptimeNanoseconds
        let result = Result { () throws(RuntimeError) in try model.prediction(from: inputs, using: turn.state.state) }
            .mapError { Self.requestError($0, model: model.path) }
        statistics.recordExecution(model: name, batchSize: 1, computeNanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        // Inputs the model refuses are refused before anything runs: the state is as it was.
        let touched = if case .failure(.badRequest) = result { false } else { true }
        sequences.finishComputing(turn, touched: touched)
        return .success((model, result))
    }

    /// Evicts idle sequences every `interval` seconds until the service shuts down, logging each.
    func startSequenceReaper() {
        let interval = min(1.0, max(0.01, options.sequenceIdleTimeoutSeconds / 4))
        let thread = Thread { [weak self] in
            while let service = self, !service.sequencesStopped.withLock({ $0 }) {
                for key in service.sequences.evictIdle() {
                    service.log.write("info", "sequence evicted", [("model", key.model), ("sequence_id", key.id.description), ("reason", "idle")])
                }
                Thread.sleep(forTimeInterval: interval)
            }
        }
        thread.name = "modelc-sequences"
        thread.start()
    }

    /// The drain's end: every sequence's state freed, new ones refused.
    func stopSequences() {
        sequencesStopped.withLock { $0 = true }
        let live = sequences.live
        sequences.endAll(.shutdown)
        if live > 0 { log.write("info", "sequences ended", [("live", String(live)), ("reason", "shutdown")]) }
    }

    /// `/metrics` lines for sequences, per model.
    func sequenceMetricsText() -> String {
        let counts = sequences.countsByModel.sorted { $0.key < $1.key }
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            text += ServerMetrics.family(name, type, help, samples)
        }
        func labels(_ model: String, _ extra: String = "") -> String { ServerMetrics.labels(model, extra) }
        family("modelc_sequences_live", "gauge", "Live sequences (a state kept between a sequence's requests)",
               counts.map { (labels($0.key), String($0.value.live)) })
        family("modelc_sequence_state_bytes", "gauge", "Bytes of the live sequences' states (counted against --memory-budget)",
               counts.map { (labels($0.key), String($0.value.bytes)) })
        family("modelc_sequences_started_total", "counter", "Sequences started (sequence_start)",
               counts.map { (labels($0.key), String($0.value.started)) })
        family("modelc_sequences_ended_total", "counter", "Sequences ended, by reason (idle evictions are counted apart)",
               counts.flatMap { model in
                   SequenceEnding.allCases.filter { $0 != .idle && model.value.ended[$0] != nil }
                       .map { (labels(model.key, ",reason=\"\($0.rawValue)\""), String(model.value.ended[$0] ?? 0)) }
               })
        family("modelc_sequences_evicted_total", "counter", "Sequences evicted after --sequence-idle-timeout without a request",
               counts.map { (labels($0.key), String($0.value.ended[.idle] ?? 0)) })
        return text
    }
}
