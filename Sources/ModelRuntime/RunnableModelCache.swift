import ModelFeatures
import ModelLoader

/// Models ready to run — plan, decoded and packed weights, pooled prediction
/// states — kept within a memory budget: a `ResourceCache` of `Model`s.
///
/// A model is opened and prepared once however many ask at the same time
/// (`model(at:)`), counted at its `Model.residentBytes` (measured again each
/// time a lease comes back, as its states grow), evicted least recently used
/// first when unleased models exceed the budget or memory is short
/// (`watch(_:)`, `watchSystemPressure()`), and prepared again, transparently,
/// on the next request. `prediction(from:at:)` holds a lease for the length of
/// the prediction, so a running prediction's model is never evicted.
public typealias RunnableModelCache = ResourceCache<Model, ModelError>

/// A runnable model handed out by a `RunnableModelCache`; see `ResourceLease`.
public typealias RunnableModelLease = ResourceLease<Model>

extension Model: CachedResource {}

extension ResourceCache where Resource == Model, Failure == ModelError {
    /// A cache of at most `budget` bytes of unleased models, each opened with
    /// `Model(contentsOf:configuration:)` (a compiled bundle, or a source
    /// `.mlmodel`/`.mlpackage`) and `configuration`.
    public convenience init(budget: Int, configuration: ModelConfiguration = ModelConfiguration()) {
        self.init(budget: budget) { path throws(ModelError) in
            try Model(contentsOf: path, configuration: configuration)
        }
    }

    /// The outputs of the model at `path` for `inputs`: the model is leased
    /// (opened and prepared first if it is not in the cache) for the length of
    /// the prediction, which runs off the caller's task.
    ///
    /// - Throws: `ModelError` — the model cannot be opened or prepared
    ///   (every request waiting for that load gets the error), or
    ///   `.runtime` with the prediction's `RuntimeError` (an input missing,
    ///   of the wrong type or shape, a value the model cannot take).
    public func prediction(from inputs: [String: FeatureValue], at path: String) async throws(ModelError) -> [String: FeatureValue] {
        let lease = try await model(at: path)
        defer { lease.release() }
        do {
            return try await lease.model.prediction(from: inputs)
        } catch {
            throw .runtime(error)
        }
    }
}
