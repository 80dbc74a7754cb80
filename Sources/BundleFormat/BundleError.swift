import ModelSpec

/// Why a bundle cannot be used. Each case names the bundle or the file at fault.
public enum BundleError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `manifest.json`: not a modelc bundle.
    case notABundle(path: String)
    case unreadable(path: String, reason: String)
    /// Written by a newer modelc.
    case newerFormat(path: String, version: Int, supported: Int)
    case malformedFile(path: String, detail: String)
    case missingFile(path: String)
    case sizeMismatch(path: String, expected: UInt64, found: UInt64)
    case digestMismatch(path: String, expected: String, found: String)
    case weightFile(BlobFileError)
    case specification(ModelSpecError)
    /// The weight index and the weight file or specification disagree.
    case inconsistentIndex(path: String, detail: String)
    /// A weight file reference of `model.spec` or `model.mil` names no blob of
    /// the bundle's weight file, or one that cannot hold its tensor's values.
    case unresolvedReference(path: String, reference: String, detail: String)

    public var description: String {
        switch self {
        case .notABundle(let path):
            "\(path): not a modelc bundle (no \(BundleLayout.manifest))"
        case .unreadable(let path, let reason):
            "\(path): cannot read: \(reason)"
        case .newerFormat(let path, let version, let supported):
            "\(path): bundle format version \(version) is newer than this modelc reads (\(supported)); upgrade modelc"
        case .malformedFile(let path, let detail):
            "\(path): malformed: \(detail)"
        case .missingFile(let path):
            "\(path): missing from the bundle"
        case .sizeMismatch(let path, let expected, let found):
            "\(path): \(found) bytes, the manifest records \(expected)"
        case .digestMismatch(let path, let expected, let found):
            "\(path): SHA-256 \(found), the manifest records \(expected)"
        case .weightFile(let error):
            error.description
        case .specification(let error):
            error.description
        case .inconsistentIndex(let path, let detail):
            "\(path): \(detail)"
        case .unresolvedReference(let path, let reference, let detail):
            "\(path): weight reference \(reference): \(detail)"
        }
    }
}
