/// The parameters of a classic model kind (not a network, program or
/// pipeline), as plain values: what `ClassicModels` evaluates.
///
/// Read once from the specification by `ClassicModel(_:)`; the values are the
/// schema's, unchecked (an engine refuses parameters that contradict each
/// other). A sub-message the file leaves out is `nil` where that matters.
public enum ClassicModel: Sendable, Equatable {
    case glmRegressor(GLMRegressorParameters)
    case glmClassifier(GLMClassifierParameters)
    case treeEnsembleRegressor(TreeEnsembleRegressorParameters)
    case treeEnsembleClassifier(TreeEnsembleClassifierParameters)
    case supportVectorRegressor(SupportVectorRegressorParameters)
    case supportVectorClassifier(SupportVectorClassifierParameters)
    case kNearestNeighborsClassifier(NearestNeighborsClassifierParameters)
    case normalizer(NormalizerParameters)
    case scaler(ScalerParameters)
    case oneHotEncoder(OneHotEncoderParameters)
    case imputer(ImputerParameters)
    case dictVectorizer(DictVectorizerParameters)
    case featureVectorizer(FeatureVectorizerParameters)
    case arrayFeatureExtractor(ArrayFeatureExtractorParameters)
    case categoricalMapping(CategoricalMappingParameters)
    case nonMaximumSuppression(NonMaximumSuppressionParameters)
    case itemSimilarityRecommender(ItemSimilarityRecommenderParameters)
    case identity
}

/// A string or an int64: a category, a default label, a value on unknown.
public enum CategoryValue: Sendable, Equatable {
    case string(String)
    case int64(Int64)
}

// MARK: Linear models

/// The function applied to a linear model's scores.
public enum LinkFunction: Sendable, Equatable {
    case none, logit, probit
}

/// `GLMRegressor`: one weight row and offset per target.
public struct GLMRegressorParameters: Sendable, Equatable {
    public var weights: [[Double]]
    public var offsets: [Double]
    /// `none`, `logit` or `probit` (`postEvaluationTransform`).
    public var transform: LinkFunction
}

/// `GLMClassifier`: one weight row per class, or one for two classes.
public struct GLMClassifierParameters: Sendable, Equatable {
    /// `classEncoding`: how the rows relate to the classes.
    public enum ClassEncoding: Sendable, Equatable {
        /// One row for two classes, the first class the reference.
        case referenceClass
        /// One row per class.
        case oneVsRest
    }

    public var weights: [[Double]]
    public var offsets: [Double]
    /// `logit` or `probit` (`postEvaluationTransform`); never `none`.
    public var transform: LinkFunction
    public var classEncoding: ClassEncoding
    /// `nil` when the model sets none.
    public var classLabels: ClassLabels?

    package init(weights: [[Double]], offsets: [Double], transform: LinkFunction, classEncoding: ClassEncoding,
                 classLabels: ClassLabels?) {
        self.weights = weights
        self.offsets = offsets
        self.transform = transform
        self.classEncoding = classEncoding
        self.classLabels = classLabels
    }
}

// MARK: Tree ensembles

/// `TreeEnsembleParameters`: every node of every tree.
public struct TreeEnsembleParameters: Sendable, Equatable {
    public var nodes: [TreeNode]
    public var numPredictionDimensions: UInt64
    /// Empty, or one value per prediction dimension.
    public var basePredictionValue: [Double]
}

/// One node of a tree ensemble (`TreeEnsembleParameters.TreeNode`).
public struct TreeNode: Sendable, Equatable {
    /// `nodeBehavior`: a leaf, or the comparison a branch makes.
    public enum Behavior: Sendable, Equatable {
        case branchOnValueLessThanEqual, branchOnValueLessThan
        case branchOnValueGreaterThanEqual, branchOnValueGreaterThan
        case branchOnValueEqual, branchOnValueNotEqual
        case leafNode
        /// A value the schema does not define.
        case unknown(UInt32)
    }

    /// What a leaf adds to one prediction dimension (`EvaluationInfo`).
    public struct Evaluation: Sendable, Equatable {
        public var evaluationIndex: UInt64
        public var evaluationValue: Double
    }

    public var treeID: UInt64
    public var nodeID: UInt64
    public var behavior: Behavior
    public var branchFeatureIndex: UInt64
    public var branchFeatureValue: Double
    public var trueChildNodeID: UInt64
    public var falseChildNodeID: UInt64
    public var missingValueTracksTrueChild: Bool
    public var evaluationInfo: [Evaluation]
}

/// A tree ensemble's `postEvaluationTransform`.
public enum TreeEnsembleTransform: Sendable, Equatable {
    case none, softmax, logistic, softmaxWithZeroReference
}

/// `TreeEnsembleRegressor`.
public struct TreeEnsembleRegressorParameters: Sendable, Equatable {
    /// `nil` when the model has no `treeEnsemble` message.
    public var treeEnsemble: TreeEnsembleParameters?
    public var transform: TreeEnsembleTransform
}

/// `TreeEnsembleClassifier`.
public struct TreeEnsembleClassifierParameters: Sendable, Equatable {
    /// `nil` when the model has no `treeEnsemble` message.
    public var treeEnsemble: TreeEnsembleParameters?
    public var transform: TreeEnsembleTransform
    public var classLabels: ClassLabels?
}

// MARK: Support vector machines

/// An SVM's `Kernel`, with the schema's zero for a parameter message left out.
public enum SupportVectorKernel: Sendable, Equatable {
    case linear
    case rbf(gamma: Double)
    case polynomial(degree: Int, gamma: Double, c: Double)
    case sigmoid(gamma: Double, c: Double)
    /// A `Kernel` message with no kernel type set.
    case unset
}

/// An SVM's support vectors as the file stores them.
public enum SupportVectorSet: Sendable, Equatable {
    /// One value per dimension, a row per vector.
    case dense([[Double]])
    /// A row per vector of (index, value) pairs; libsvm's indices start at 1.
    case sparse([[SparseValue]])

    public struct SparseValue: Sendable, Equatable {
        public var index: Int32
        public var value: Double
    }
}

/// `SupportVectorRegressor`.
public struct SupportVectorRegressorParameters: Sendable, Equatable {
    /// `nil` when the model has no `kernel` message.
    public var kernel: SupportVectorKernel?
    /// `nil` when the model has neither dense nor sparse support vectors.
    public var supportVectors: SupportVectorSet?
    /// α, one per support vector (`coefficients.alpha`).
    public var coefficients: [Double]
    public var rho: Double
}

/// `SupportVectorClassifier`.
public struct SupportVectorClassifierParameters: Sendable, Equatable {
    /// `nil` when the model has no `kernel` message.
    public var kernel: SupportVectorKernel?
    /// `nil` when the model has neither dense nor sparse support vectors.
    public var supportVectors: SupportVectorSet?
    /// `coefficients[j].alpha`: each support vector's coefficient against class j.
    public var coefficients: [[Double]]
    public var rho: [Double]
    public var probA: [Double]
    public var probB: [Double]
    public var numberOfSupportVectorsPerClass: [Int32]
    public var classLabels: ClassLabels?
}

// MARK: Nearest neighbours

/// `KNearestNeighborsClassifier`.
public struct NearestNeighborsClassifierParameters: Sendable, Equatable {
    /// `NearestNeighborsIndex`.
    public struct Index: Sendable, Equatable {
        /// How the index is searched.
        public enum Kind: Sendable, Equatable {
            case linear
            /// `singleKdTreeIndex`; `leafSize` is `nil` when its message is left out.
            case singleKdTree(leafSize: Int32?)
            /// No index type set.
            case unset
        }

        public var numberOfDimensions: Int32
        public var floatSamples: [[Float]]
        public var kind: Kind
    }

    /// `nil` when the model has no `nearestNeighborsIndex` message.
    public var index: Index?
    /// `numberOfNeighbors.defaultValue`; `nil` when that message is left out.
    public var numberOfNeighbors: Int64?
    /// `inverseDistanceWeighting` rather than `uniformWeighting` (or none).
    public var inverseDistanceWeighting: Bool
    public var defaultLabel: CategoryValue?
    public var classLabels: ClassLabels?
}

// MARK: Feature engineering

/// `Normalizer`.
public struct NormalizerParameters: Sendable, Equatable {
    public enum Norm: Sendable, Equatable { case lMax, l1, l2 }
    public var norm: Norm
}

/// `Scaler`: `(x + shiftValue) × scaleValue`.
public struct ScalerParameters: Sendable, Equatable {
    public var shiftValue: [Double]
    public var scaleValue: [Double]
}

/// `OneHotEncoder`.
public struct OneHotEncoderParameters: Sendable, Equatable {
    /// `stringCategories` or `int64Categories` (held in the two forms of class labels).
    public var categories: ClassLabels
    public var outputSparse: Bool
    /// `handleUnknown` is `IgnoreUnknown`, not `ErrorOnUnknown`.
    public var ignoreUnknown: Bool
}

/// `Imputer`.
public struct ImputerParameters: Sendable, Equatable {
    /// A value standing for "missing" (`replaceValue`).
    public enum ReplaceValue: Sendable, Equatable { case double(Double), int64(Int64), string(String) }
    /// The value put in its place (`imputedValue`).
    public enum ImputedValue: Sendable, Equatable {
        case double(Double), int64(Int64), string(String)
        case doubles([Double]), int64s([Int64])
        case stringDictionary([String: Double]), int64Dictionary([Int64: Double])
    }

    /// `nil` when the model sets none.
    public var replaceValue: ReplaceValue?
    /// `nil` when the model sets none.
    public var imputedValue: ImputedValue?
}

/// `DictVectorizer`: a dictionary's keys in the order of the output array.
public struct DictVectorizerParameters: Sendable, Equatable {
    /// `stringToIndex` or `int64ToIndex` (held in the two forms of class labels).
    public var keys: ClassLabels
}

/// `FeatureVectorizer`.
public struct FeatureVectorizerParameters: Sendable, Equatable {
    /// One entry of `inputList`.
    public struct Column: Sendable, Equatable {
        public var inputColumn: String
        public var inputDimensions: UInt64
    }

    public var inputList: [Column]
}

/// `ArrayFeatureExtractor`.
public struct ArrayFeatureExtractorParameters: Sendable, Equatable {
    public var extractIndex: [UInt64]
}

/// `CategoricalMapping`.
public struct CategoricalMappingParameters: Sendable, Equatable {
    public enum Mapping: Sendable, Equatable {
        case stringToInt64([String: Int64])
        case int64ToString([Int64: String])
    }

    /// `nil` when the model sets no map.
    public var mapping: Mapping?
    /// `valueOnUnknown`; `nil` when the model sets none.
    public var valueOnUnknown: CategoryValue?
}

// MARK: Detection and recommendation

/// `NonMaximumSuppression`; a feature name the model leaves out is empty.
public struct NonMaximumSuppressionParameters: Sendable, Equatable {
    public var iouThreshold: Double
    public var confidenceThreshold: Double
    /// `pickTop.perClass`; false when `pickTop` is left out.
    public var perClass: Bool
    public var confidenceInputFeatureName: String
    public var coordinatesInputFeatureName: String
    public var iouThresholdInputFeatureName: String
    public var confidenceThresholdInputFeatureName: String
    public var confidenceOutputFeatureName: String
    public var coordinatesOutputFeatureName: String
}

/// `ItemSimilarityRecommender`; a feature name the model leaves out is empty.
public struct ItemSimilarityRecommenderParameters: Sendable, Equatable {
    /// One item's similar items (`ConnectedItem`s of `SimilarItems`).
    public struct SimilarItems: Sendable, Equatable {
        public struct Item: Sendable, Equatable {
            public var itemID: UInt64
            public var similarityScore: Double
        }

        public var itemID: UInt64
        public var similarItemList: [Item]
        public var itemScoreAdjustment: Double
    }

    public var itemItemSimilarities: [SimilarItems]
    public var itemStringIDs: [String]
    public var itemInt64IDs: [Int64]
    public var itemInputFeatureName: String
    public var numRecommendationsInputFeatureName: String
    public var itemRestrictionInputFeatureName: String
    public var itemExclusionInputFeatureName: String
    public var recommendedItemListOutputFeatureName: String
    public var recommendedItemScoreOutputFeatureName: String
}
