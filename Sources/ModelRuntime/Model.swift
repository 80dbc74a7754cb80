import BundleFormat
import Dispatch
import Foundation
import SystemIO
import TensorRuntime
import ModelFeatures
import ModelLoader
import ModelSpec
import ModelValidation

/// How a model is run.
public struct ModelConfiguration: Sendable, Equatable {
    /// Threads used for a batch of predictions (and, for networks, within one);
    /// at least 1. Defaults to every core.
    public var threads: Int
    /// The function of a multi-function ML program to run (Core ML's
    /// `MLModelConfiguration.functionName`); `nil` runs the default function.
    public var functionName: String?

    public init(threads: Int = ProcessInfo.processInfo.activeProcessorCount, functionName: String? = nil) {
        self.threads = max(1, threads)
        self.functionName = functionName
    }
}

/// A model ready to run: opened, checked, and its engine prepared once.
///
/// Immutable and `Sendable`: one `Model` serves any number of concurrent
/// predictions. Every prediction checks its inputs against the model's
/// description first and gives the outputs the declared types.
public final class Model: Sendable {
    /// The path the model was opened from.
    public let path: String
    /// The model's interface, metadata and structure.
    public let summary: ModelSummary
    public let configuration: ModelConfiguration
    private let specification: Specification
    let engine: any PredictionEngine

    /// Whether the engine takes a rank-5 network's inputs with a sequence axis of any length
    /// (read once from the engine, not cast at every prediction).
    private let takesSequences: Bool
    /// The specification's size as protobuf: about what its unpacked tree takes.
    private let specificationBytes: Int

    /// Opens a compiled bundle (a directory with `manifest.json`) or a source
    /// `.mlmodel`/`.mlpackage`, and prepares it to run. A source model is
    /// validated first, as compiling it would (`ModelValidator`).
    ///
    /// - Throws: `ModelError` — the file at fault, the validation errors of a
    ///   source model (`.invalid`), or the model kind, layer or parameter that
    ///   cannot run here (refused now, not at prediction).
    public convenience init(contentsOf path: String, configuration: ModelConfiguration = ModelConfiguration()) throws(ModelError) {
        if FileManager.default.fileExists(atPath: path + "/" + BundleLayout.manifest) {
            let bundle: ModelBundle
            do {
                bundle = try ModelBundle.open(path)
            } catch {
                throw .bundle(error)
            }
            try self.init(specification: bundle.specification, bundle: bundle, modelDirectory: bundle.path, path: path,
                          configuration: configuration)
        } else {
            let file: ModelFile
            do {
                file = try ModelFile.open(path)
            } catch {
                throw .source(error)
            }
            let errors = ModelValidator.validate(file).filter { $0.severity == .error }
            guard errors.isEmpty else { throw .invalid(path: path, diagnostics: errors) }
            try self.init(specification: file.specification, bundle: nil, modelDirectory: file.modelDirectory, path: path,
                          configuration: configuration)
        }
    }

    /// Prepares an unpacked specification to run; network weights are read
    /// from `bundle` when the specification came from one.
    public init(specification: Specification, bundle: ModelBundle? = nil, modelDirectory: String? = nil, path: String,
                configuration: ModelConfiguration = ModelConfiguration()) throws(ModelError) {
        self.path = path
        self.specification = specification
        self.configuration = configuration
        specificationBytes = specification.packedSize
        var summary = ModelSummary(specification, blobs: nil)
        if summary.functionInterfaces.isEmpty {
            // A single-function program has only `main`.
            if let name = configuration.functionName, name != "main" || summary.modelType != "mlProgram" {
                throw .runtime(.unknownFunction(name: name, available: summary.modelType == "mlProgram" ? ["main"] : []))
            }
        } else if let name = configuration.functionName ?? summary.defaultFunctionName ?? summary.functionNames.first {
            guard let selected = summary.selectingFunction(name) else {
                throw .runtime(.unknownFunction(name: name, available: summary.functionNames))
            }
            summary = selected
        }
        self.summary = summary
        do {
            engine = try withExtendedLifetime(specification) { () throws(RuntimeError) -> any PredictionEngine in
                try EngineBuilder.engine(for: specification.model, summary: summary,
                                         context: EngineBuilder.Context(bundle: bundle, modelDirectory: modelDirectory ?? bundle?.path,
                                                                       threads: configuration.threads,
                                                                       functionName: summary.functionInterfaces.isEmpty ? nil
                                                                           : configuration.functionName ?? summary.defaultFunctionName))
            }
        } catch {
            throw .runtime(error)
        }
        takesSequences = (engine as? TensorEngine)?.takesSequences ?? false
    }

    /// Bytes of memory the model holds now, roughly: its specification (as
    /// unpacked; a compiled bundle's keeps no weights) and its engine's
    /// `PredictionEngine.residentBytes` — decoded and packed weights, and for
    /// networks every plan and pooled prediction state made so far. The
    /// weight file is not counted: the tensor engine keeps an ML program's
    /// float weights where that file is mapped, and its pages are the file's
    /// (released once packed, read back only where a kernel reads them).
    public var residentBytes: Int { specificationBytes + engine.residentBytes }

    /// Plans the tensor engine for inputs of `shapes` (by name) ahead of a
    /// prediction with them; other engines plan nothing. Errors are left for
    /// that prediction to report.
    /// `lastRowOf`: for `prediction(from:using:lastRowOf:)` with that output.
    func preparePrediction(shapes: [String: [Int]], lastRowOf: String? = nil) {
        (engine as? TensorEngine)?.prepare(shapes: shapes, lastRowOf: lastRowOf)
    }

    /// Lets the memory a prediction with inputs of `shapes` worked in go to
    /// the predictions of other shapes (`TensorEngine.releaseStates`): after a
    /// decoder's prompt, whose shapes its steps never have. `lastRowOf`: of
    /// `prediction(from:using:lastRowOf:)` with that output.
    func releasePredictionMemory(shapes: [String: [Int]], lastRowOf: String? = nil) {
        (engine as? TensorEngine)?.releaseStates(shapes: shapes, lastRowOf: lastRowOf)
    }

    /// The class labels of a classifier, in the model's order; empty otherwise.
    public var classLabels: [String] { summary.classLabels?.texts ?? [] }

    /// The outputs for one set of inputs.
    ///
    /// - Throws: `RuntimeError` naming the input at fault (missing, of the
    ///   wrong type or shape) or the value the model cannot take.
    public func prediction(from inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        try prediction(from: inputs, cancellation: nil)
    }

    /// The outputs for one set of inputs, stopped with `RuntimeError.cancelled`
    /// at the next operation once `cancellation` is cancelled (from another
    /// thread: a server whose client went away or whose deadline passed).
    public func prediction(from inputs: [String: FeatureValue],
                           cancellation: PredictionCancellation?) throws(RuntimeError) -> [String: FeatureValue] {
        let checked = try InputChecker.check(inputs, against: summary.inputs, sequences: takesSequences)
        return OutputConformer.conform(try engine.predict(checked, cancellation: cancellation), to: summary.outputs)
    }

    /// A new state for a stateful ML program (Core ML's `MLModel.makeState()`):
    /// every state the program declares, zero-filled; `nil` when the model
    /// runs on an engine without states.
    public func makeState() -> ModelState? {
        (engine as? TensorEngine).map { ModelState(engine: $0, state: $0.makeState()) }
    }

    /// The outputs for one set of inputs, reading and updating `state`
    /// (Core ML's `prediction(from:using:)`). One prediction at a time may use a state.
    ///
    /// - Throws: `RuntimeError` as `prediction(from:)`, and `.invalidValue`
    ///   when the state was made by another model.
    public func prediction(from inputs: [String: FeatureValue], using state: ModelState) throws(RuntimeError) -> [String: FeatureValue] {
        let engine = try engine(of: state)
        let checked = try InputChecker.check(inputs, against: summary.inputs, sequences: takesSequences)
        return OutputConformer.conform(try engine.predict(checked, state: state.state), to: summary.outputs)
    }

    /// `prediction(from:using:)` (`prediction(from:)` without a state), giving
    /// output `output` as its last row only where the tensor engine runs the
    /// model (`TensorEngine.predict(_:state:lastRowOf:)`): a decoder's logits,
    /// of which a generator reads the last position's.
    func prediction(from inputs: [String: FeatureValue], using state: ModelState?, lastRowOf output: String) throws(RuntimeError) -> [String: FeatureValue] {
        let tensorEngine: TensorEngine
        if let state {
            tensorEngine = try engine(of: state)
        } else if let engine = engine as? TensorEngine {
            tensorEngine = engine
        } else {
            return try prediction(from: inputs)
        }
        let checked = try InputChecker.check(inputs, against: summary.inputs, sequences: takesSequences)
        return OutputConformer.conform(try tensorEngine.predict(checked, state: state?.state, lastRowOf: output), to: summary.outputs)
    }

    /// This model's tensor engine, which made `state`; `.invalidValue` when another model made it.
    private func engine(of state: ModelState) throws(RuntimeError) -> TensorEngine {
        guard let engine = engine as? TensorEngine, engine === state.engine else {
            throw .invalidValue(feature: "state", detail: "the state was made by another model")
        }
        return engine
    }

    /// The outputs for one set of inputs, computed off the caller's task.
    public func prediction(from inputs: [String: FeatureValue]) async throws(RuntimeError) -> [String: FeatureValue] {
        let result: Result<[String: FeatureValue], RuntimeError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { () throws(RuntimeError) in try self.prediction(from: inputs) })
            }
        }
        return try result.get()
    }

    /// The outputs for many sets of inputs, in order, computed on up to
    /// `configuration.threads` threads. A set that fails gives its error in
    /// its place; the others still run.
    public func predictions(from batch: [[String: FeatureValue]]) -> [Result<[String: FeatureValue], RuntimeError>] {
        let threads = min(configuration.threads, batch.count)
        guard threads > 1 else { return predictions(of: batch[...]) }
        let results = ResultSlots(count: batch.count)
        let chunk = (batch.count + threads - 1) / threads
        DispatchQueue.concurrentPerform(iterations: threads) { worker in
            let range = min(batch.count, worker * chunk)..<min(batch.count, (worker + 1) * chunk)
            results.store(predictions(of: batch[range]), at: range.lowerBound)
        }
        return results.values
    }

    /// One thread's share of a batch: every set checked, the good ones handed
    /// to the engine together, the outputs conformed.
    private func predictions(of slice: ArraySlice<[String: FeatureValue]>) -> [Result<[String: FeatureValue], RuntimeError>] {
        var results = [Result<[String: FeatureValue], RuntimeError>?](repeating: nil, count: slice.count)
        var checked: [[String: FeatureValue]] = []
        var positions: [Int] = []
        checked.reserveCapacity(slice.count)
        positions.reserveCapacity(slice.count)
        for (offset, inputs) in slice.enumerated() {
            do throws(RuntimeError) {
                checked.append(try InputChecker.check(inputs, against: summary.inputs, sequences: takesSequences))
                positions.append(offset)
            } catch {
                results[offset] = .failure(error)
            }
        }
        for (position, result) in zip(positions, engine.predictions(checked)) {
            results[position] = result.map { OutputConformer.conform($0, to: summary.outputs) }
        }
        return results.map { $0 ?? .failure(.invalidValue(feature: "batch", detail: "not computed")) }
    }
}

/// The state of a stateful ML program between predictions (Core ML's `MLState`).
public final class ModelState: Sendable {
    let engine: TensorEngine
    let state: ProgramState

    init(engine: TensorEngine, state: ProgramState) {
        self.engine = engine
        self.state = state
    }

    /// The names of the program's states.
    public var names: [String] { state.names }

    /// Bytes of memory the state holds (its values; a server counts them against its budget).
    public var bytes: Int { state.bytes }
}

/// One slot per prediction of a batch, each written by exactly one worker.
private final class ResultSlots: Sendable {
    private let slots: Locked<[Result<[String: FeatureValue], RuntimeError>?]>

    init(count: Int) { slots = Locked(Array(repeating: nil, count: count)) }

    func store(_ results: [Result<[String: FeatureValue], RuntimeError>], at start: Int) {
        slots.withLock { slots in
            for (offset, result) in results.enumerated() { slots[start + offset] = result }
        }
    }

    var values: [Result<[String: FeatureValue], RuntimeError>] {
        slots.withLock { slots in slots.map { $0 ?? .failure(.invalidValue(feature: "batch", detail: "not computed")) } }
    }
}
