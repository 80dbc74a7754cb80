import BundleFormat
import ModelFetch
import ModelCompiler
import ModelFeatures
import ModelRuntime
import ModelSpec

/// The exit codes of `modelc`, one per kind of failure, stable across
/// releases and listed in docs/cli.md ("Exit codes"). The C interface (`ModelcC`) returns the
/// same numbers as its statuses, so a failure is classed alike whichever door
/// it came through.
public enum ExitCode: Int32, CaseIterable, Sendable {
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
    /// The output path holds something that is not a modelc bundle.
    case outputNotABundle = 73
    /// Writing failed: no space, no permission, I/O error.
    case cannotWrite = 74
    /// An ML program's weight file or a blob in it is unreadable or corrupt.
    case badWeightFile = 75
    /// The model fails validation.
    case invalidModel = 76
    /// A float32 weight does not fit in float16 (`--fp16`).
    case float16Overflow = 77
    /// The path is not a modelc bundle, or its files are missing or corrupt.
    case badBundle = 78
    /// The bundle was written by a newer modelc.
    case newerBundleFormat = 79
    /// The output path already exists (decompile never replaces anything).
    case outputExists = 80
    /// The download failed below HTTP (connection, timeout, refused redirect), retries included.
    case network = 81
    /// The server answered with an HTTP error status (retries included for 408, 429, 5xx).
    case httpStatus = 82
    /// The downloaded file's SHA-256 is not the pinned one; nothing was kept.
    case checksumMismatch = 83
    /// The file is larger than --max-size; nothing was kept.
    case tooLarge = 84
    /// Offline, and the cache has no copy of the URL.
    case offlineMiss = 85
    /// The URL is malformed or not http, https or file.
    case badURL = 86
    /// The archive is damaged, unsafe (paths or links leaving it, devices) or past a limit.
    case badArchive = 87
    /// The archive holds no model, several and no --member, or none matching --member.
    case memberNotFound = 88
    /// `cache verify` found damaged files (and removed them).
    case cacheDamaged = 89
    /// `build`: one or more models failed (each was reported); the others were built.
    case buildFailed = 90
    /// `build --frozen`: the build would change the lockfile.
    case lockfileChanged = 91
    /// `build`: the manifest (or the lockfile) is not valid.
    case invalidManifest = 92
    /// `predict`: an input is missing, of the wrong type or shape, or a value the model cannot take
    /// (in a batch: at least one case failed; the others were printed).
    case badInput = 93
    /// The model is of a kind (or holds a layer) that modelc does not run; refused at load.
    case unsupportedModel = 94
    /// `classify`: the model takes no image (or not the one named, or needs other inputs).
    case notAnImageModel = 95
    /// `classify --label`: the model has no such label (or is not a classifier).
    case unknownLabel = 96
    /// `classify`: an image could not be read or decoded (the other images were classified).
    case badImage = 97
    /// `train`, `evaluate`: the labelled folders are refused (fewer than two labels, too few images
    /// in a label, a directory that cannot be listed).
    case badTrainingData = 98
    /// `train`: the base model cannot be cut into a feature extractor (not a neural network or ML
    /// program on an image, no final classification layers, an unknown --feature-output).
    case badBaseModel = 99
    /// `evaluate`: the model is not a classifier with an image input.
    case notAnImageClassifier = 100
    /// `serve`: the address or port cannot be listened on (in use, not local, not numeric).
    case cannotListen = 101
    /// `serve`: the TLS certificate or key is missing, unreadable or refused.
    case badTLS = 102
    /// `serve`: the API key file is missing, unreadable or empty.
    case badAPIKeyFile = 103
    /// `serve`: the model directory is missing or unlistable, or the manifest cannot be built.
    case badModelRepository = 104
    /// `detect --faces`, `classify --regions faces`: the face detector (libModelcFaces.so, Debian's
    /// libdlib19.1) cannot be opened.
    case faceDetectorUnavailable = 105
    /// `predict --function`: the ML program has no function of that name (or is not a multi-function program).
    case unknownFunction = 106
    /// `generate`: the model is not a decoder (no int32 token input, or no logits output).
    case notADecoder = 107
    /// `generate`: a prompt token is not an id of the model's vocabulary.
    case tokenOutsideVocabulary = 108
    /// `generate`: the prompt and the new tokens need more positions than the model's context.
    case contextExceeded = 109
    /// A prediction stopped through its cancellation (a served request whose deadline passed or whose
    /// client went away); no command cancels its own predictions.
    case cancelled = 110
    /// `serve --trace-endpoint`: the URL is not an http or https URL with a host (or libcurl is missing).
    case badTraceEndpoint = 111
    /// `serve`: the gRPC port cannot be listened on (in use, not local), or the gRPC library
    /// (libModelcGRPC.so, Debian's libgrpc++1.51) cannot be opened.
    case cannotListenGRPC = 112

    public init(_ error: ModelSpecError) {
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

    public init(_ error: CompileError) {
        self = switch error {
        case .source(let error): ExitCode(error)
        case .invalid: .invalidModel
        case .sourceWeights: .badWeightFile
        case .float16Overflow: .float16Overflow
        case .outputNotABundle: .outputNotABundle
        case .write: .cannotWrite
        case .encoding: .internalError
        }
    }

    public init(_ error: BundleError) {
        self = switch error {
        case .newerFormat: .newerBundleFormat
        case .unreadable: .cannotRead
        default: .badBundle
        }
    }

    public init(_ error: FetchError) {
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

    public init(_ error: RuntimeError) {
        self = switch error {
        case .unsupportedModel, .unsupportedLayer: .unsupportedModel
        case .invalidParameters: .invalidModel
        case .cannotOpen: .cannotRead
        case .unknownFunction: .unknownFunction
        case .missingInput, .wrongType, .wrongShape, .wrongImageSize, .invalidValue: .badInput
        case .cancelled: .cancelled
        }
    }

    public init(_ error: ModelError) {
        self = switch error {
        case .bundle(let error): ExitCode(error)
        case .source(let error): ExitCode(error)
        case .invalid: .invalidModel
        case .runtime(let error): ExitCode(error)
        }
    }
}

extension ExitCode {
    public init(_ error: GenerationError) {
        self = switch error {
        case .notADecoder: .notADecoder
        case .emptyPrompt: .usage
        case .tokenOutsideVocabulary: .tokenOutsideVocabulary
        case .contextExceeded: .contextExceeded
        case .prediction(let error): ExitCode(error)
        }
    }
}
