import BundleFormat
import ModelFeatures
import ModelSpec
import ModelValidation

/// Why a model could not be opened and prepared to run.
public enum ModelError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The compiled bundle is missing, damaged or newer than this modelc.
    case bundle(BundleError)
    /// The source model file could not be read.
    case source(ModelSpecError)
    /// The source model breaks validation rules, as `modelc compile` would refuse it
    /// (`CompileError.invalid`); every error found is listed.
    case invalid(path: String, diagnostics: [Diagnostic])
    /// The model is read but cannot run here: an unsupported kind or
    /// inconsistent parameters. From `RunnableModelCache.prediction(from:at:)`
    /// also the prediction's error (an input at fault).
    case runtime(RuntimeError)

    public var description: String {
        switch self {
        case .bundle(let error): error.description
        case .source(let error): error.description
        case .invalid(let path, let diagnostics):
            "\(path): \(diagnostics.count) validation \(diagnostics.count == 1 ? "error" : "errors"): "
                + diagnostics.map(\.description).joined(separator: "; ")
        case .runtime(let error): error.description
        }
    }
}
