/// Why a build could not start or could not finish as asked. A failing model
/// is not a `BuildError`: it is reported in its `ModelOutcome` and the others
/// are still built.
public enum BuildError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The manifest file is missing or unreadable.
    case unreadableManifest(path: String, reason: String)
    /// The manifest is not what `BuildManifest` describes; `location` is a
    /// JSON path such as `models[2].sha256`.
    case invalidManifest(path: String, location: String, reason: String)
    /// The lockfile exists but cannot be read as one.
    case invalidLockfile(path: String, reason: String)
    /// `--frozen`, and the build would change the lockfile: each line says what.
    case lockfileWouldChange(path: String, changes: [String])
    /// Writing the lockfile (or creating the output directory) failed.
    case write(path: String, reason: String)

    public var description: String {
        switch self {
        case .unreadableManifest(let path, let reason): "\(path): \(reason)"
        case .invalidManifest(let path, let location, let reason): "\(path)\(location.isEmpty ? "" : ": " + location): \(reason)"
        case .invalidLockfile(let path, let reason): "\(path): not a modelc lockfile: \(reason)"
        case .lockfileWouldChange(let path, let changes):
            "\(path): --frozen, but the build would change it: " + changes.joined(separator: "; ")
        case .write(let path, let reason): "\(path): \(reason)"
        }
    }
}
