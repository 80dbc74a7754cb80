import CoreMLSchema
import ModelSpec

/// Why a base model cannot be cut where asked.
package struct CutRefusal: Error, Equatable, Sendable {
    /// One line for a person: `"x" is a model input, not an operation output`.
    package var reason: String

    package init(reason: String) {
        self.reason = reason
    }
}

/// A base neural network or ML program cut at one feature, and the models
/// training writes from it: the cut alone (to extract features), and the
/// trained classifier (the cut, then a GLM classifier).
///
/// The cut's layers or operations point into the base's tree: it keeps the
/// base's `ModelFile`, and with it the tree, alive. Neither changes after
/// the cut is made, so it may be shared across threads.
package struct ModelCut: @unchecked Sendable {
    private enum Kept {
        case layers([UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>], NetworkParts)
        case program(ProgramCut)
    }

    /// The parts every kind of neural network shares.
    private struct NetworkParts {
        var layers: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>?>?
        var n_layers: Int
        var preprocessing: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__NeuralNetworkPreprocessing>?>?
        var n_preprocessing: Int
        var arrayMapping: CoreML__Specification__NeuralNetworkMultiArrayShapeMapping
        var imageMapping: CoreML__Specification__NeuralNetworkImageShapeMapping
    }

    private let file: ModelFile
    private let kept: Kept
    /// The value the cut ends at.
    package let feature: String

    /// Cuts the neural network of `file` at `feature`, keeping the layers at
    /// `layers` (indices in the network's order, as `ModelSummary.layers`
    /// lists them); `nil` when `file` is not a neural network.
    package init?(network file: ModelFile, keeping layers: [Int], feature: String) {
        guard let network = Self.network(file.specification.root.pointee) else { return nil }
        let all = elements(network.layers, network.n_layers)
        self.file = file
        self.feature = feature
        kept = .layers(layers.map { all[$0] }, network)
    }

    /// Cuts the main function (or the first) of the ML program of `file` at
    /// `featureOutput`, or at the input of its final `linear`/`matmul` when
    /// `nil`; `nil` when `file` is not an ML program.
    ///
    /// - Throws: `CutRefusal` naming what is missing.
    package init?(program file: ModelFile, featureOutput: String?) throws(CutRefusal) {
        let root = file.specification.root.pointee
        guard root.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM, let program = root.mlprogram else { return nil }
        let cut = try ProgramCut(program: program, featureOutput: featureOutput)
        self.file = file
        feature = cut.feature
        kept = .program(cut)
    }

    /// An ML program's cut: the operation reading the feature in the base
    /// (automatic choice), the operations other than `const` kept and in the
    /// base, and the feature's declared shape and element count; `nil` for a
    /// neural network.
    package var program: (consumer: String?, keptOperations: Int, baseOperations: Int, shape: [Int64], count: Int)? {
        guard case .program(let cut) = kept else { return nil }
        return (cut.consumer, cut.keptOperations, cut.baseOperations, cut.shape, cut.count)
    }

    /// The cut's output: the feature, or for a float16 program variable its float32 cast.
    package var output: String {
        if case .program(let cut) = kept { cut.output } else { feature }
    }

    /// The serialized cut: the base's inputs, one float32 multi-array output
    /// of `shape`.
    package func specificationBytes(shape: [Int64]) -> [UInt8] {
        let arena = MessageArena()
        return withExtendedLifetime(file) { SpecificationPacker.pack(message(shape: shape, arena: arena)) }
    }

    /// The serialized pipeline classifier: the cut (its output of `shape`),
    /// then `classifier` reading it as `classifierInput` and giving `outputs`.
    ///
    /// The user-defined metadata is written sorted by key in UTF-8 byte order,
    /// so the same values give the same bytes.
    package func classifierPipelineBytes(
        shape: [Int64], classifier: GLMClassifierParameters, classifierInput: FeatureDescription, outputs: [FeatureDescription],
        predictedFeatureName: String, predictedProbabilitiesName: String, metadata: Metadata
    ) -> [UInt8] {
        let arena = MessageArena()
        return withExtendedLifetime(file) {
            let cut = message(shape: shape, arena: arena)
            let glm = classifierMessage(classifier, input: classifierInput, outputs: outputs,
                                        predictedFeatureName: predictedFeatureName,
                                        predictedProbabilitiesName: predictedProbabilitiesName, arena: arena)
            let base = cut.pointee.description?.pointee
            let inputs = elements(base?.input, base?.n_input ?? 0)
            let entries = metadata.userDefined.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { key in
                arena.message(core_ml__specification__metadata__user_defined_entry__init) { (entry: inout CoreML__Specification__Metadata__UserDefinedEntry) in
                    entry.key = arena.string(key)
                    entry.value = arena.string(metadata.userDefined[key] ?? "")
                }
            }
            let metadataMessage: UnsafeMutablePointer<CoreML__Specification__Metadata> = arena.message(core_ml__specification__metadata__init) { message in
                message.shortdescription = arena.string(metadata.shortDescription)
                message.author = arena.string(metadata.author)
                if !metadata.license.isEmpty { message.license = arena.string(metadata.license) }
                message.versionstring = arena.string(metadata.versionString)
                message.n_userdefined = entries.count
                message.userdefined = arena.pointers(entries)
            }
            let outputMessages = outputs.map(arena.feature)
            let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
                description.n_input = inputs.count
                description.input = arena.pointers(inputs)
                description.n_output = outputMessages.count
                description.output = arena.pointers(outputMessages)
                description.predictedfeaturename = arena.string(predictedFeatureName)
                description.predictedprobabilitiesname = arena.string(predictedProbabilitiesName)
                description.metadata = metadataMessage
            }
            let pipeline: UnsafeMutablePointer<CoreML__Specification__Pipeline> = arena.message(core_ml__specification__pipeline__init) { pipeline in
                pipeline.n_models = 2
                pipeline.models = arena.pointers([cut, glm])
            }
            let pipelineClassifier: UnsafeMutablePointer<CoreML__Specification__PipelineClassifier> = arena.message(core_ml__specification__pipeline_classifier__init) { classifier in
                classifier.pipeline = pipeline
            }
            let root: UnsafeMutablePointer<CoreML__Specification__Model> = arena.message(core_ml__specification__model__init) { model in
                model.specificationversion = cut.pointee.specificationversion
                model.description = description
                model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER
                model.pipelineclassifier = pipelineClassifier
            }
            return SpecificationPacker.pack(root)
        }
    }

    /// The GLM classifier stage; `classifier.classLabels` are written as given.
    private func classifierMessage(
        _ classifier: GLMClassifierParameters, input: FeatureDescription, outputs: [FeatureDescription],
        predictedFeatureName: String, predictedProbabilitiesName: String, arena: MessageArena
    ) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        let weightArrays = classifier.weights.map { row in
            arena.message(core_ml__specification__glmclassifier__double_array__init) { (array: inout CoreML__Specification__GLMClassifier__DoubleArray) in
                array.n_value = row.count
                array.value = arena.array(row)
            }
        }
        let glm: UnsafeMutablePointer<CoreML__Specification__GLMClassifier> = arena.message(core_ml__specification__glmclassifier__init) { glm in
            glm.n_weights = weightArrays.count
            glm.weights = arena.pointers(weightArrays)
            glm.n_offset = classifier.offsets.count
            glm.offset = arena.array(classifier.offsets)
            glm.postevaluationtransform = classifier.transform == .probit
                ? CORE_ML__SPECIFICATION__GLMCLASSIFIER__POST_EVALUATION_TRANSFORM__Probit
                : CORE_ML__SPECIFICATION__GLMCLASSIFIER__POST_EVALUATION_TRANSFORM__Logit
            glm.classencoding = switch classifier.classEncoding {
            case .referenceClass: CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_ENCODING__ReferenceClass
            case .oneVsRest: CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_ENCODING__OneVsRest
            }
            switch classifier.classLabels {
            case .strings(let labels)?:
                glm.class_labels_case = CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_LABELS_STRING_CLASS_LABELS
                glm.stringclasslabels = arena.message(core_ml__specification__string_vector__init) { vector in
                    vector.n_vector = labels.count
                    vector.vector = arena.strings(labels)
                }
            case .int64s(let labels)?:
                glm.class_labels_case = CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_LABELS_INT64_CLASS_LABELS
                glm.int64classlabels = arena.message(core_ml__specification__int64_vector__init) { vector in
                    vector.n_vector = labels.count
                    vector.vector = arena.array(labels)
                }
            case nil:
                break
            }
        }
        let inputMessage = arena.feature(input)
        let outputMessages = outputs.map(arena.feature)
        let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
            description.n_input = 1
            description.input = arena.pointers([inputMessage])
            description.n_output = outputMessages.count
            description.output = arena.pointers(outputMessages)
            description.predictedfeaturename = arena.string(predictedFeatureName)
            description.predictedprobabilitiesname = arena.string(predictedProbabilitiesName)
        }
        return arena.message(core_ml__specification__model__init) { model in
            model.specificationversion = 1
            model.description = description
            model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER
            model.glmclassifier = glm
        }
    }

    private static func network(_ model: CoreML__Specification__Model) -> NetworkParts? {
        switch model.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            model.neuralnetworkclassifier.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            model.neuralnetworkregressor.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK:
            model.neuralnetwork.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        default:
            nil
        }
    }

    /// The cut as a `neuralNetwork` or `mlProgram` model message in `arena`,
    /// its layers or operations pointing into the base's tree.
    private func message(shape: [Int64], arena: MessageArena) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        let base = file.specification.root.pointee
        guard case .layers(let layers, let network) = kept else {
            guard case .program(let programCut) = kept else { preconditionFailure("two kinds of cut") }
            return programCut.modelMessage(base: base, arena: arena)
        }
        let baseDescription = base.description?.pointee
        let inputs = elements(baseDescription?.input, baseDescription?.n_input ?? 0)
        let output = arena.feature(FeatureDescription(
            name: feature, shortDescription: "The feature vector: the base network's \"\(feature)\"", isOptional: false,
            type: .multiArray(MultiArrayType(dataType: "FLOAT32", shape: shape))))
        let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
            description.n_input = inputs.count
            description.input = arena.pointers(inputs)
            description.n_output = 1
            description.output = arena.pointers([output])
        }
        let message: UnsafeMutablePointer<CoreML__Specification__NeuralNetwork> = arena.message(core_ml__specification__neural_network__init) { cut in
            cut.n_layers = layers.count
            cut.layers = arena.pointers(layers)
            cut.n_preprocessing = network.n_preprocessing
            cut.preprocessing = network.preprocessing
            cut.arrayinputshapemapping = network.arrayMapping
            cut.imageinputshapemapping = network.imageMapping
        }
        return arena.message(core_ml__specification__model__init) { model in
            model.specificationversion = max(base.specificationversion, 1)
            model.description = description
            model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK
            model.neuralnetwork = message
        }
    }
}
