import ModelFeatures
import ModelSpec

/// Prepares the engine of a classic (non-network, non-pipeline) model.
public enum ClassicModelFactory {
    /// The engine for `model`.
    ///
    /// - Throws: `RuntimeError.invalidParameters` when the parameters
    ///   contradict each other.
    public static func engine(for model: ClassicModel, interface: ModelInterface) throws(RuntimeError) -> any PredictionEngine {
        switch model {
        case .glmRegressor(let parameters): try GLMRegressorEngine(parameters, interface: interface)
        case .glmClassifier(let parameters): try GLMClassifierEngine(parameters, interface: interface)
        case .treeEnsembleRegressor(let parameters): try TreeEnsembleRegressorEngine(parameters, interface: interface)
        case .treeEnsembleClassifier(let parameters): try TreeEnsembleClassifierEngine(parameters, interface: interface)
        case .supportVectorRegressor(let parameters): try SupportVectorRegressorEngine(parameters, interface: interface)
        case .supportVectorClassifier(let parameters): try SupportVectorClassifierEngine(parameters, interface: interface)
        case .kNearestNeighborsClassifier(let parameters): try NearestNeighborsClassifierEngine(parameters, interface: interface)
        case .normalizer(let parameters): NormalizerEngine(parameters, interface: interface)
        case .scaler(let parameters): ScalerEngine(parameters, interface: interface)
        case .oneHotEncoder(let parameters): OneHotEncoderEngine(parameters, interface: interface)
        case .imputer(let parameters): try ImputerEngine(parameters, interface: interface)
        case .dictVectorizer(let parameters): DictVectorizerEngine(parameters, interface: interface)
        case .featureVectorizer(let parameters): FeatureVectorizerEngine(parameters, interface: interface)
        case .arrayFeatureExtractor(let parameters): ArrayFeatureExtractorEngine(parameters, interface: interface)
        case .categoricalMapping(let parameters): CategoricalMappingEngine(parameters, interface: interface)
        case .nonMaximumSuppression(let parameters): try NonMaximumSuppressionEngine(parameters, interface: interface)
        case .itemSimilarityRecommender(let parameters): try ItemSimilarityRecommenderEngine(parameters, interface: interface)
        case .identity: IdentityEngine(interface: interface)
        }
    }
}
