import CoreMLSchema
import ModelSpec

/// Checks a Core ML model against the rules Core ML's own validator enforces
/// before it compiles or loads a model.
public enum ModelValidator {
    /// The newest specification version this validator knows.
    public static let newestSpecificationVersion: Int32 = 10

    /// Every problem found in `model` (not just the first), in the order of
    /// the model's structure.
    ///
    /// Never throws and never crashes on hostile input: counts and sizes are
    /// checked before use, products are computed with overflow checks. ML
    /// program weight files are opened to read their blob records, not the
    /// weights themselves.
    public static func validate(_ model: ModelFile) -> [Diagnostic] {
        withExtendedLifetime(model.specification) {
            var sink = DiagnosticSink()
            let context = ValidationContext(file: model, blobs: BlobMetadataReader(model: model))
            ModelRules.check(model.specification.root, context: context, sink: &sink)
            return sink.diagnostics
        }
    }
}

/// What the rules need beyond the message they look at.
struct ValidationContext {
    let file: ModelFile
    let blobs: BlobMetadataReader
}

/// The rules every model obeys, and the dispatch to the rules of its type.
enum ModelRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, context: ValidationContext, sink: inout DiagnosticSink) {
        let spec = model.pointee
        let version = spec.specificationversion
        let type = spec.type_case

        if version < 1 || version > ModelValidator.newestSpecificationVersion {
            sink.error("spec.version.range",
                       "specification version \(version) is outside 1...\(ModelValidator.newestSpecificationVersion)")
        }
        if type == CORE_ML__SPECIFICATION__MODEL__TYPE__NOT_SET {
            sink.error("model.type.unset", "no model type is set (neuralNetwork, mlProgram, pipeline, …)")
        }
        let typeName = modelTypeName(model)
        if let required = minimumVersion(of: type), version < required {
            sink.error("spec.version.feature",
                       "\(typeName) models need specification version \(required), the model has \(version)")
        }
        if spec.isupdatable != 0 {
            if version < 4 {
                sink.error("spec.version.feature",
                           "updatable models need specification version 4, the model has \(version)")
            }
            if !updatableTypes.contains(type) {
                sink.error("update.type", "\(typeName) models cannot be updatable; only neural networks, k-nearest neighbors and pipelines can")
            }
        }

        FeatureRules.check(model, sink: &sink)

        switch type {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            NeuralNetworkRules.check(model, sink: &sink)
            UpdatableRules.check(model, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR:
            PipelineRules.check(model, context: context, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM:
            ProgramRules.check(model, context: context, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_REGRESSOR:
            TreeEnsembleRules.check(model, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_REGRESSOR:
            LinearModelRules.checkGLM(model, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_REGRESSOR:
            LinearModelRules.checkSVM(model, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER:
            NearestNeighborsRules.check(model, sink: &sink)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ONE_HOT_ENCODER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_FEATURE_VECTORIZER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_ARRAY_FEATURE_EXTRACTOR,
             CORE_ML__SPECIFICATION__MODEL__TYPE_SCALER:
            FeatureEngineeringRules.check(model, sink: &sink)
        default:
            break
        }
        ClassifierRules.check(model, sink: &sink)
    }

    /// The schema name of the model's type (`neuralNetwork`, …), or `model`.
    static func modelTypeName(_ model: UnsafePointer<CoreML__Specification__Model>) -> String {
        let type = model.pointee.type_case
        guard type != CORE_ML__SPECIFICATION__MODEL__TYPE__NOT_SET else { return "untyped" }
        return MessageView(model).fieldName(number: type.rawValue) ?? "unknown(\(type.rawValue))"
    }

    static let updatableTypes: Set<CoreML__Specification__Model__TypeCase> = [
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR,
        CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR,
    ]

    /// The specification version that introduced a model type, where later than 1.
    static func minimumVersion(of type: CoreML__Specification__Model__TypeCase) -> Int32? {
        switch type {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_BAYESIAN_PROBIT_REGRESSOR,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NON_MAXIMUM_SUPPRESSION,
             CORE_ML__SPECIFICATION__MODEL__TYPE_TEXT_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_WORD_TAGGER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_VISION_FEATURE_PRINT:
            3
        case CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_ITEM_SIMILARITY_RECOMMENDER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_LINKED_MODEL,
             CORE_ML__SPECIFICATION__MODEL__TYPE_SOUND_ANALYSIS_PREPROCESSING,
             CORE_ML__SPECIFICATION__MODEL__TYPE_GAZETTEER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_WORD_EMBEDDING:
            4
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM:
            6
        case CORE_ML__SPECIFICATION__MODEL__TYPE_CLASS_CONFIDENCE_THRESHOLDING:
            8
        default:
            nil
        }
    }
}
