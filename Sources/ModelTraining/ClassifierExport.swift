import Foundation
import ModelCompiler
import ModelSpec
import ModelValidation
import SystemIO

/// The trained image classifier as a Core ML pipeline classifier: the base
/// network cut at the feature output, then a GLM classifier whose class
/// labels are the folder names.
///
/// The same network, fit and metadata give the same bytes.
public struct ClassifierExport: Sendable {
    /// Output names, as Create ML's image classifiers name them.
    public static let labelOutput = "classLabel"
    public static let probabilitiesOutput = "classLabelProbs"

    public var labels: [String]
    public var fit: LogisticRegression.Fit
    public var author: String
    public var shortDescription: String
    public var version: String
    /// User-defined metadata (training and validation accuracy, options); written sorted by key.
    public var userDefined: [String: String]

    public init(labels: [String], fit: LogisticRegression.Fit, author: String = "", shortDescription: String = "",
                version: String = "", userDefined: [String: String] = [:]) {
        self.labels = labels
        self.fit = fit
        self.author = author
        self.shortDescription = shortDescription
        self.version = version
        self.userDefined = userDefined
    }

    /// The serialized `.mlmodel`.
    public func specificationBytes(network: FeatureNetwork) -> [UInt8] {
        let outputs = [
            FeatureDescription(name: Self.probabilitiesOutput, shortDescription: "The probability of each label", isOptional: false,
                               type: .dictionary(keyType: "stringKeyType")),
            FeatureDescription(name: Self.labelOutput, shortDescription: "The most likely label", isOptional: false, type: .string),
        ]
        let input = FeatureDescription(name: network.outputName, shortDescription: "The feature vector", isOptional: false,
                                       type: .multiArray(MultiArrayType(dataType: "FLOAT32", shape: network.featureShape)))
        return network.cut.classifierPipelineBytes(
            shape: network.featureShape, classifier: classifier, classifierInput: input, outputs: outputs,
            predictedFeatureName: Self.labelOutput, predictedProbabilitiesName: Self.probabilitiesOutput,
            metadata: Metadata(shortDescription: shortDescription, author: author, license: "", versionString: version,
                               userDefined: userDefined))
    }

    /// The GLM stage: for two labels one logistic row (the first label the
    /// reference), which gives exactly the softmax's probabilities; for more,
    /// one row per label (one-vs-rest), whose most likely label is the softmax's.
    private var classifier: GLMClassifierParameters {
        if labels.count == 2 {
            return GLMClassifierParameters(
                weights: [zip(fit.weights[1], fit.weights[0]).map { $0 - $1 }], offsets: [fit.offsets[1] - fit.offsets[0]],
                transform: .logit, classEncoding: .referenceClass, classLabels: .strings(labels))
        }
        return GLMClassifierParameters(weights: fit.weights, offsets: fit.offsets, transform: .logit, classEncoding: .oneVsRest,
                                       classLabels: .strings(labels))
    }

    /// Checks the model with modelc's own validation, then writes it to
    /// `path` atomically: an `.mlmodel` file, or an `.mlpackage` directory
    /// when `path` ends so (for an ML-program base, with a copy of the base's
    /// weight file; a network's weights are in its specification).
    ///
    /// - Throws: `TrainingError.outputNeedsPackage` (an ML-program base and a
    ///   path not ending in `.mlpackage`), `.invalidExport` (a bug) or `.write`.
    public func write(to path: String, network: FeatureNetwork) throws(TrainingError) {
        let bytes = specificationBytes(network: network)
        guard network.isProgram else {
            try Self.validate(bytes)
            if path.hasSuffix(".mlpackage") {
                try Self.writePackage(bytes, weights: nil, to: path)
                return
            }
            do {
                try AtomicFile.write(bytes, to: path)
            } catch {
                throw .write(error)
            }
            return
        }
        guard path.hasSuffix(".mlpackage") else { throw .outputNeedsPackage(path: path) }
        guard let weights = network.weightFile else {
            throw .baseModel(path: network.basePath, reason: "its weight file is gone")
        }
        // Validated as written (blob references resolved against the copied
        // weight file), in a scratch package first.
        let scratch = NSTemporaryDirectory() + "/modelc-train-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).mlpackage"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try Self.writePackage(bytes, weights: weights, to: scratch)
        try Self.validate(package: scratch)
        try Self.writePackage(bytes, weights: weights, to: path)
    }

    private static func writePackage(_ bytes: [UInt8], weights: String?, to path: String) throws(TrainingError) {
        do {
            try BundleDecompiler.writePackage(specification: bytes, weightFile: weights, to: path)
        } catch {
            switch error {
            case .write(let failure): throw .write(failure)
            default: throw .write(SystemCallError(call: "write", path: path, code: EIO))
            }
        }
    }

    /// Validates a written package.
    static func validate(package path: String) throws(TrainingError) {
        let file: ModelFile
        do {
            file = try ModelFile.open(path)
        } catch {
            throw .invalidExport(problems: [error.description])
        }
        let problems = ModelValidator.validate(file).filter { $0.severity == .error }
        guard problems.isEmpty else { throw .invalidExport(problems: problems.map(\.description)) }
    }

    /// Validates serialized model bytes (through a scratch file, as models are validated from files).
    static func validate(_ bytes: [UInt8]) throws(TrainingError) {
        let scratch = NSTemporaryDirectory() + "/modelc-train-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).mlmodel"
        defer { unlink(scratch) }
        guard FileManager.default.createFile(atPath: scratch, contents: Data(bytes)) else {
            throw .write(SystemCallError(call: "open", path: scratch, code: errno == 0 ? EIO : errno))
        }
        let file: ModelFile
        do {
            file = try ModelFile.open(scratch)
        } catch {
            throw .invalidExport(problems: [error.description])
        }
        let problems = ModelValidator.validate(file).filter { $0.severity == .error }
        guard problems.isEmpty else { throw .invalidExport(problems: problems.map(\.description)) }
    }
}
