/// Why a model could not be read.
///
/// Every case names the file at fault and reads as one line for a person.
/// Command-line tools map each case to its own exit code (docs/cli.md, "Exit codes").
public enum ModelSpecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The path does not exist, cannot be opened, or is not a file or directory.
    case cannotRead(path: String, reason: String)
    /// The file holds no bytes at all.
    case emptyFile(path: String)
    /// The bytes are not a Core ML model (another format, or not protobuf).
    case notCoreML(path: String, detail: String)
    /// The file ends inside a field: it was cut short, e.g. by a failed download.
    case truncated(path: String, detail: String)
    /// The bytes are protobuf but break rules the reader enforces on hostile
    /// input: nesting deeper than allowed, strings that are not UTF-8, fields of
    /// the wrong wire type.
    case malformed(path: String, detail: String)
    /// The model type is not one this schema (coremltools 9.0) knows.
    case unknownModelType(path: String, fieldNumbers: [UInt32])
    /// A directory that is not a valid `.mlpackage`.
    case notAPackage(path: String, reason: String)
    /// A path named inside a package points outside it.
    case unsafePackagePath(path: String, entry: String)

    /// The file or directory at fault.
    public var path: String {
        switch self {
        case .cannotRead(let path, _), .emptyFile(let path), .notCoreML(let path, _),
             .truncated(let path, _), .malformed(let path, _), .unknownModelType(let path, _),
             .notAPackage(let path, _), .unsafePackagePath(let path, _):
            path
        }
    }

    public var description: String {
        switch self {
        case .cannotRead(let path, let reason):
            "\(path): cannot read: \(reason)"
        case .emptyFile(let path):
            "\(path): empty file (0 bytes), not a Core ML model"
        case .notCoreML(let path, let detail):
            "\(path): not a Core ML model: \(detail)"
        case .truncated(let path, let detail):
            "\(path): truncated Core ML model: \(detail)"
        case .malformed(let path, let detail):
            "\(path): malformed Core ML model: \(detail)"
        case .unknownModelType(let path, let numbers):
            "\(path): unknown model type (field \(numbers.map(String.init).joined(separator: ", "))); "
                + "this modelc knows the Core ML schema of coremltools 9.0"
        case .notAPackage(let path, let reason):
            "\(path): not an .mlpackage: \(reason)"
        case .unsafePackagePath(let path, let entry):
            "\(path): package names a path outside itself: \"\(entry)\""
        }
    }
}
