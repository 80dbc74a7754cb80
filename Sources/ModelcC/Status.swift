import BundleFormat
import ImageDecoding
import ModelCompiler
import ModelFeatures
import ModelFetch
import ModelRuntime
import ModelSpec
#if canImport(Glibc)
import Glibc
#endif

/// The status codes of the C interface: 0 for success, otherwise the class
/// of failure as the CLI's exit codes number it (README, "Exit codes"), so
/// a caller maps errors the same way whichever door it came through.
enum Status: Int32 {
    case ok = 0
    /// A bug in modelc, or a handle the caller passed that is not one.
    case internalError = 1
    /// A bad argument: a NULL pointer, an unknown data type or pixel format, a negative dimension.
    case usage = 64
    case notCoreML = 65
    case cannotRead = 66
    case emptyFile = 67
    case truncated = 68
    case malformed = 69
    case unknownModelType = 70
    case notAPackage = 71
    case unsafePackagePath = 72
    case outputNotABundle = 73
    case cannotWrite = 74
    case badWeightFile = 75
    case invalidModel = 76
    case float16Overflow = 77
    case badBundle = 78
    case newerBundleFormat = 79
    case network = 81
    case httpStatus = 82
    case checksumMismatch = 83
    case tooLarge = 84
    case offlineMiss = 85
    case badURL = 86
    case badArchive = 87
    case memberNotFound = 88
    case badInput = 93
    case unsupportedModel = 94
    case badImage = 97

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

    init(_ error: CompileError) {
        self = switch error {
        case .source(let error): Status(error)
        case .invalid: .invalidModel
        case .sourceWeights: .badWeightFile
        case .float16Overflow: .float16Overflow
        case .outputNotABundle: .outputNotABundle
        case .write: .cannotWrite
        case .encoding: .internalError
        }
    }

    init(_ error: BundleError) {
        self = switch error {
        case .newerFormat: .newerBundleFormat
        case .unreadable: .cannotRead
        default: .badBundle
        }
    }

    init(_ error: FetchError) {
        self = switch error {
        case .download(.unsupportedScheme), .download(.badURL): .badURL
        case .download(.http): .httpStatus
        case .download(.network), .download(.redirect): .network
        case .download(.checksumMismatch): .checksumMismatch
        case .download(.tooLarge): .tooLarge
        case .download(.write), .cache: .cannotWrite
        case .offlineMiss: .offlineMiss
        case .archive(.memberNotFound), .archive(.ambiguousMember): .memberNotFound
        case .archive(.write): .cannotWrite
        case .archive, .notAnArchive: .badArchive
        }
    }

    init(_ error: RuntimeError) {
        self = switch error {
        case .unsupportedModel, .unsupportedLayer: .unsupportedModel
        case .invalidParameters: .invalidModel
        case .cannotOpen: .cannotRead
        case .missingInput, .wrongType, .wrongShape, .wrongImageSize, .invalidValue: .badInput
        }
    }

    init(_ error: ModelError) {
        self = switch error {
        case .bundle(let error): Status(error)
        case .source(let error): Status(error)
        case .runtime(let error): Status(error)
        }
    }
}

/// A failure crossing the C interface: its status and one-line message.
struct Failure: Error {
    let status: Status
    let message: String

    init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    init(_ error: RuntimeError) { self.init(Status(error), error.description) }
    init(_ error: ModelError) { self.init(Status(error), error.description) }
}

/// The calling thread's last error, read with `modelc_last_error`.
enum LastError {
    /// One thread's status and message (a C string it owns).
    private final class Slot {
        var status: Int32 = 0
        var message: UnsafeMutablePointer<CChar>? = strdup("")

        func replace(status: Int32, message text: String) {
            free(message)
            self.status = status
            message = strdup(text)
        }

        deinit { free(message) }
    }

    /// The thread-specific key, made once; a thread's slot is released when the thread ends.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
        }
        return key
    }()

    private static var slot: Slot {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<Slot>.fromOpaque(pointer).takeUnretainedValue()
        }
        let slot = Slot()
        pthread_setspecific(key, Unmanaged.passRetained(slot).toOpaque())
        return slot
    }

    /// Records `failure` for this thread and returns its status.
    static func set(_ failure: Failure) -> Int32 {
        slot.replace(status: failure.status.rawValue, message: failure.message)
        return failure.status.rawValue
    }

    static func clear() {
        let slot = slot
        if slot.status != 0 { slot.replace(status: 0, message: "") }
    }

    static var status: Int32 { slot.status }

    /// The message, valid until the thread's next failing call into the interface.
    static var message: UnsafePointer<CChar>? { UnsafePointer(slot.message) }
}

/// Runs `body`, turning a thrown `Failure` into a status and the thread's last error.
func guarded(_ body: () throws(Failure) -> Void) -> Int32 {
    do {
        try body()
        LastError.clear()
        return 0
    } catch {
        return LastError.set(error)
    }
}
