import CoreMLSchema
import ModelFeatures
import ModelSpec

/// Prepares the engine of a classic (non-network, non-pipeline) model.
public enum ClassicModelFactory {
    /// The engine for `model`, or `nil` when it is not a classic model kind.
    ///
    /// - Throws: `RuntimeError.invalidParameters` when the parameters
    ///   contradict each other.
    public static func engine(
        for model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface
    ) throws(RuntimeError) -> (any PredictionEngine)? {
        let spec = model.pointee
        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_REGRESSOR:
            return try spec.glmregressor.map { model throws(RuntimeError) in try GLMRegressorEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER:
            return try spec.glmclassifier.map { model throws(RuntimeError) in try GLMClassifierEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_REGRESSOR:
            return try spec.treeensembleregressor.map { model throws(RuntimeError) in try TreeEnsembleRegressorEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER:
            return try spec.treeensembleclassifier.map { model throws(RuntimeError) in try TreeEnsembleClassifierEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_REGRESSOR:
            return try spec.supportvectorregressor.map { model throws(RuntimeError) in try SupportVectorRegressorEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_CLASSIFIER:
            return try spec.supportvectorclassifier.map { model throws(RuntimeError) in try SupportVectorClassifierEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER:
            return try spec.knearestneighborsclassifier.map { model throws(RuntimeError) in try NearestNeighborsClassifierEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NORMALIZER:
            return spec.normalizer.map { NormalizerEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SCALER:
            return spec.scaler.map { ScalerEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ONE_HOT_ENCODER:
            return spec.onehotencoder.map { OneHotEncoderEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_IMPUTER:
            return try spec.imputer.map { model throws(RuntimeError) in try ImputerEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_DICT_VECTORIZER:
            return spec.dictvectorizer.map { DictVectorizerEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_FEATURE_VECTORIZER:
            return spec.featurevectorizer.map { FeatureVectorizerEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ARRAY_FEATURE_EXTRACTOR:
            return spec.arrayfeatureextractor.map { ArrayFeatureExtractorEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_CATEGORICAL_MAPPING:
            return spec.categoricalmapping.map { CategoricalMappingEngine($0.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NON_MAXIMUM_SUPPRESSION:
            return try spec.nonmaximumsuppression.map { model throws(RuntimeError) in try NonMaximumSuppressionEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ITEM_SIMILARITY_RECOMMENDER:
            return try spec.itemsimilarityrecommender.map { model throws(RuntimeError) in try ItemSimilarityRecommenderEngine(model.pointee, interface: interface) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_IDENTITY:
            return IdentityEngine(interface: interface)
        default:
            return nil
        }
    }
}
