import CoreMLSchema
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
        let arena = MessageArena()
        return network.withBase {
            let cut = network.modelMessage(in: arena)
            let glm = classifierMessage(network: network, arena: arena)
            let base = cut.pointee.description?.pointee
            let inputs = elements(base?.input, base?.n_input ?? 0)
            let entries = userDefined.keys.sorted(by: utf8Order).map { key in
                arena.message(core_ml__specification__metadata__user_defined_entry__init) { (entry: inout CoreML__Specification__Metadata__UserDefinedEntry) in
                    entry.key = arena.string(key)
                    entry.value = arena.string(userDefined[key] ?? "")
                }
            }
            let metadata: UnsafeMutablePointer<CoreML__Specification__Metadata> = arena.message(core_ml__specification__metadata__init) { metadata in
                metadata.shortdescription = arena.string(shortDescription)
                metadata.author = arena.string(author)
                metadata.versionstring = arena.string(version)
                metadata.n_userdefined = entries.count
                metadata.userdefined = arena.pointers(entries)
            }
            let outputs = outputDescriptions(arena)
            let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
                description.n_input = inputs.count
                description.input = arena.pointers(inputs)
                description.n_output = outputs.count
                description.output = arena.pointers(outputs)
                description.predictedfeaturename = arena.string(Self.labelOutput)
                description.predictedprobabilitiesname = arena.string(Self.probabilitiesOutput)
                description.metadata = metadata
            }
            let pipeline: UnsafeMutablePointer<CoreML__Specification__Pipeline> = arena.message(core_ml__specification__pipeline__init) { pipeline in
                pipeline.n_models = 2
                pipeline.models = arena.pointers([cut, glm])
            }
            let classifier: UnsafeMutablePointer<CoreML__Specification__PipelineClassifier> = arena.message(core_ml__specification__pipeline_classifier__init) { classifier in
                classifier.pipeline = pipeline
            }
            let root: UnsafeMutablePointer<CoreML__Specification__Model> = arena.message(core_ml__specification__model__init) { model in
                model.specificationversion = cut.pointee.specificationversion
                model.description = description
                model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER
                model.pipelineclassifier = classifier
            }
            return SpecificationPacker.pack(root)
        }
    }

    private func outputDescriptions(_ arena: MessageArena) -> [UnsafeMutablePointer<CoreML__Specification__FeatureDescription>] {
        [arena.feature(Self.probabilitiesOutput, description: "The probability of each label", type: arena.stringDictionaryType()),
         arena.feature(Self.labelOutput, description: "The most likely label", type: arena.stringType())]
    }

    /// The GLM stage: for two labels one logistic row (the first label the
    /// reference), which gives exactly the softmax's probabilities; for more,
    /// one row per label (one-vs-rest), whose most likely label is the softmax's.
    private func classifierMessage(network: FeatureNetwork, arena: MessageArena) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        let rows: [[Double]]
        let offsets: [Double]
        let encoding: CoreML__Specification__GLMClassifier__ClassEncoding
        if labels.count == 2 {
            rows = [zip(fit.weights[1], fit.weights[0]).map { $0 - $1 }]
            offsets = [fit.offsets[1] - fit.offsets[0]]
            encoding = CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_ENCODING__ReferenceClass
        } else {
            rows = fit.weights
            offsets = fit.offsets
            encoding = CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_ENCODING__OneVsRest
        }
        let weightArrays = rows.map { row in
            arena.message(core_ml__specification__glmclassifier__double_array__init) { (array: inout CoreML__Specification__GLMClassifier__DoubleArray) in
                array.n_value = row.count
                array.value = arena.array(row)
            }
        }
        let classLabels: UnsafeMutablePointer<CoreML__Specification__StringVector> = arena.message(core_ml__specification__string_vector__init) { vector in
            vector.n_vector = labels.count
            vector.vector = arena.strings(labels)
        }
        let glm: UnsafeMutablePointer<CoreML__Specification__GLMClassifier> = arena.message(core_ml__specification__glmclassifier__init) { glm in
            glm.n_weights = weightArrays.count
            glm.weights = arena.pointers(weightArrays)
            glm.n_offset = offsets.count
            glm.offset = arena.array(offsets)
            glm.postevaluationtransform = CORE_ML__SPECIFICATION__GLMCLASSIFIER__POST_EVALUATION_TRANSFORM__Logit
            glm.classencoding = encoding
            glm.class_labels_case = CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_LABELS_STRING_CLASS_LABELS
            glm.stringclasslabels = classLabels
        }
        let input = arena.feature(network.outputName, description: "The feature vector",
                                  type: arena.arrayType(shape: network.featureShape, dataType: CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32))
        let outputs = outputDescriptions(arena)
        let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
            description.n_input = 1
            description.input = arena.pointers([input])
            description.n_output = outputs.count
            description.output = arena.pointers(outputs)
            description.predictedfeaturename = arena.string(Self.labelOutput)
            description.predictedprobabilitiesname = arena.string(Self.probabilitiesOutput)
        }
        return arena.message(core_ml__specification__model__init) { model in
            model.specificationversion = 1
            model.description = description
            model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER
            model.glmclassifier = glm
        }
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
