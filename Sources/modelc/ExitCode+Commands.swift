import ExitCodes
import ImageRequests
import ModelCompiler
import ModelTraining

/// The exit codes of the failures only the command line meets: image
/// requests, training and decompiling.
extension ExitCode {
    init(_ error: ImageRequestError) {
        self = switch error {
        case .notAnImageModel, .noSuchImageInput, .missingOtherInputs: .notAnImageModel
        case .unknownLabel: .unknownLabel
        case .image(.invalidRegionOfInterest), .image(.invalidSize): .usage
        case .image: .badImage
        case .model(let error): ExitCode(error)
        case .cachedModelNeedsAsync: .internalError
        case .faces(.libraryUnavailable): .faceDetectorUnavailable
        case .faces(.failed): .badImage
        }
    }

    init(_ error: TrainingError) {
        self = switch error {
        case .unreadableDirectory, .tooFewLabels, .tooFewImages: .badTrainingData
        case .baseModel, .extraction: .badBaseModel
        case .invalidOption, .outputNeedsPackage: .usage
        case .invalidExport: .internalError
        case .model: .notAnImageClassifier
        case .write: .cannotWrite
        }
    }

    init(_ error: DecompileError) {
        self = switch error {
        case .bundle(let error): ExitCode(error)
        case .needsPackage: .usage
        case .outputExists: .outputExists
        case .write: .cannotWrite
        }
    }
}
