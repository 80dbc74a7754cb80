import BundleFormat
import SystemIO

/// Why a bundle could not be turned back into a model.
public enum DecompileError: Error, Equatable, Sendable, CustomStringConvertible {
    case bundle(BundleError)
    /// An ML program keeps weights in a weight file, which an `.mlmodel` cannot hold.
    case needsPackage(path: String)
    /// The output path exists; decompile never replaces anything.
    case outputExists(path: String)
    case write(SystemCallError)

    public var description: String {
        switch self {
        case .bundle(let error): error.description
        case .needsPackage(let path):
            "\(path): the model is an ML program whose weights live in a weight file; decompile to an .mlpackage path"
        case .outputExists(let path): "\(path): already exists; choose another output path"
        case .write(let error): "cannot write model: \(error)"
        }
    }
}
