/// Something that computes a model's outputs from its inputs: a classic
/// model's evaluator, a network's plan, a pipeline of engines.
///
/// Engines are prepared once per loaded model and are immutable afterwards,
/// so one engine serves concurrent predictions. Inputs have been checked
/// against the model's description before `predict` is called; engines
/// still refuse values their parameters cannot take (an unknown category).
public protocol PredictionEngine: Sendable {
    /// The outputs for one set of inputs, keyed by feature name.
    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue]

    /// The outputs for one set of inputs, stopping with `RuntimeError.cancelled`
    /// once `cancellation` is cancelled: engines that run many steps look at it
    /// between steps; the default looks once, before it starts.
    func predict(_ inputs: [String: FeatureValue], cancellation: PredictionCancellation?) throws(RuntimeError) -> [String: FeatureValue]

    /// The outputs for many sets of checked inputs, in order, each a result of
    /// its own. Engines that gain from seeing rows together (tree ensembles,
    /// which walk each tree for many rows while it is in the cache) implement
    /// it; the default predicts one set after another.
    func predictions(_ batch: [[String: FeatureValue]]) -> [Result<[String: FeatureValue], RuntimeError>]

    /// Bytes of memory the engine holds now, roughly: its parameters as
    /// prepared (decoded, packed), and for engines that keep memory between
    /// predictions (a network's plans and pooled states) that memory too.
    /// A model cache counts it against its budget, reading it after every
    /// lease, so it must be cheap. See `ResidentBytes` for what "roughly" means.
    var residentBytes: Int { get }
}

extension PredictionEngine {
    public func predict(_ inputs: [String: FeatureValue], cancellation: PredictionCancellation?) throws(RuntimeError) -> [String: FeatureValue] {
        try cancellation?.check()
        return try predict(inputs)
    }

    public func predictions(_ batch: [[String: FeatureValue]]) -> [Result<[String: FeatureValue], RuntimeError>] {
        batch.map { inputs in Result { () throws(RuntimeError) in try predict(inputs) } }
    }
}
