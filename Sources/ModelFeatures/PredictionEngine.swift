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

    /// Bytes of memory the engine holds now, roughly: its parameters as
    /// prepared (decoded, packed), and for engines that keep memory between
    /// predictions (a network's plans and pooled states) that memory too.
    /// A model cache counts it against its budget, reading it after every
    /// lease, so it must be cheap. See `ResidentBytes` for what "roughly" means.
    var residentBytes: Int { get }
}
