import ModelSpec
import ModelValidation
import SystemIO

/// Why a model could not be compiled. Each case reads as one line naming
/// the thing at fault; the CLI maps each kind to its own exit code.
public enum CompileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The source could not be read as a model.
    case source(ModelSpecError)
    /// The model breaks validation rules; every error found is listed.
    case invalid(path: String, diagnostics: [Diagnostic])
    /// An ML program's weight file, or a blob in it, cannot be read.
    case sourceWeights(BlobFileError)
    /// A float32 weight is too large for float16 (`--fp16`).
    case float16Overflow(owner: String, role: String, value: Float)
    /// The output path holds something that is not a modelc bundle; it is
    /// never replaced.
    case outputNotABundle(path: String)
    /// Writing the bundle failed (no space, no permission, …); nothing was
    /// left at the output path.
    case write(SystemCallError)
    /// A bundle file could not be encoded (a bug).
    case encoding(String)

    public var description: String {
        switch self {
        case .source(let error):
            error.description
        case .invalid(let path, let diagnostics):
            "\(path): \(diagnostics.count) validation \(diagnostics.count == 1 ? "error" : "errors"); nothing was written"
        case .sourceWeights(let error):
            "cannot read model weights: \(error)"
        case .float16Overflow(let owner, let role, let value):
            "\(owner) \(role): value \(value) is outside the float16 range (±65504); compile without --fp16"
        case .outputNotABundle(let path):
            "\(path): exists and is not a modelc bundle; remove it or choose another output path"
        case .write(let error):
            "cannot write bundle: \(error)"
        case .encoding(let detail):
            "cannot encode bundle file: \(detail)"
        }
    }
}
