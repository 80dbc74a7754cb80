import ModelSpec

/// The exit codes of `modelc`, one per kind of failure, stable across
/// releases and listed in the README.
enum ExitCode: Int32, CaseIterable {
    case success = 0
    /// A bug in modelc.
    case internalError = 1
    /// A mistake on the command line (the BSD `EX_USAGE` value).
    case usage = 64
    case notCoreML = 65
    case cannotRead = 66
    case emptyFile = 67
    case truncated = 68
    case malformed = 69
    case unknownModelType = 70
    case notAPackage = 71
    case unsafePackagePath = 72

    init(_ error: ModelSpecError) {
        self = switch error {
        case .cannotRead: .cannotRead
        case .emptyFile: .emptyFile
        case .notCoreML: .notCoreML
        case .truncated: .truncated
        case .malformed: .malformed
        case .unknownModelType: .unknownModelType
        case .notAPackage: .notAPackage
        case .unsafePackagePath: .unsafePackagePath
        }
    }
}
