import CoreMLSchema

extension ClassicModel {
    /// The parameters of `model`, or `nil` when it is not a classic model kind
    /// (or its type's message is missing).
    init?(_ model: UnsafePointer<CoreML__Specification__Model>) {
        let spec = model.pointee
        let read: ClassicModel?
        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_REGRESSOR:
            read = spec.glmregressor.map { .glmRegressor(GLMRegressorParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER:
            read = spec.glmclassifier.map { .glmClassifier(GLMClassifierParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_REGRESSOR:
            read = spec.treeensembleregressor.map { .treeEnsembleRegressor(TreeEnsembleRegressorParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER:
            read = spec.treeensembleclassifier.map { .treeEnsembleClassifier(TreeEnsembleClassifierParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_REGRESSOR:
            read = spec.supportvectorregressor.map { .supportVectorRegressor(SupportVectorRegressorParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_CLASSIFIER:
            read = spec.supportvectorclassifier.map { .supportVectorClassifier(SupportVectorClassifierParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER:
            read = spec.knearestneighborsclassifier.map { .kNearestNeighborsClassifier(NearestNeighborsClassifierParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NORMALIZER:
            read = spec.normalizer.map { .normalizer(NormalizerParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SCALER:
            read = spec.scaler.map { .scaler(ScalerParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ONE_HOT_ENCODER:
            read = spec.onehotencoder.map { .oneHotEncoder(OneHotEncoderParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_IMPUTER:
            read = spec.imputer.map { .imputer(ImputerParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_DICT_VECTORIZER:
            read = spec.dictvectorizer.map { .dictVectorizer(DictVectorizerParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_FEATURE_VECTORIZER:
            read = spec.featurevectorizer.map { .featureVectorizer(FeatureVectorizerParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ARRAY_FEATURE_EXTRACTOR:
            read = spec.arrayfeatureextractor.map { .arrayFeatureExtractor(ArrayFeatureExtractorParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_CATEGORICAL_MAPPING:
            read = spec.categoricalmapping.map { .categoricalMapping(CategoricalMappingParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NON_MAXIMUM_SUPPRESSION:
            read = spec.nonmaximumsuppression.map { .nonMaximumSuppression(NonMaximumSuppressionParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ITEM_SIMILARITY_RECOMMENDER:
            read = spec.itemsimilarityrecommender.map { .itemSimilarityRecommender(ItemSimilarityRecommenderParameters($0.pointee)) }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_IDENTITY:
            read = .identity
        default:
            read = nil
        }
        guard let read else { return nil }
        self = read
    }
}

/// The rows of repeated `DoubleVector`-like messages (`values` under another name).
private func rows<Row>(_ base: UnsafeMutablePointer<UnsafeMutablePointer<Row>?>?, _ count: Int,
                       _ values: (Row) -> [Double]) -> [[Double]] {
    elements(base, count).map { values($0.pointee) }
}

// MARK: Linear models

extension GLMRegressorParameters {
    init(_ glm: CoreML__Specification__GLMRegressor) {
        weights = rows(glm.weights, glm.n_weights) { scalars($0.value, $0.n_value) }
        offsets = scalars(glm.offset, glm.n_offset)
        transform = switch glm.postevaluationtransform {
        case CORE_ML__SPECIFICATION__GLMREGRESSOR__POST_EVALUATION_TRANSFORM__Logit: .logit
        case CORE_ML__SPECIFICATION__GLMREGRESSOR__POST_EVALUATION_TRANSFORM__Probit: .probit
        default: .none
        }
    }
}

extension GLMClassifierParameters {
    init(_ glm: CoreML__Specification__GLMClassifier) {
        weights = rows(glm.weights, glm.n_weights) { scalars($0.value, $0.n_value) }
        offsets = scalars(glm.offset, glm.n_offset)
        transform = glm.postevaluationtransform == CORE_ML__SPECIFICATION__GLMCLASSIFIER__POST_EVALUATION_TRANSFORM__Probit
            ? .probit : .logit
        classEncoding = glm.classencoding == CORE_ML__SPECIFICATION__GLMCLASSIFIER__CLASS_ENCODING__OneVsRest
            ? .oneVsRest : .referenceClass
        classLabels = ClassLabels(classifier: glm)
    }
}

// MARK: Tree ensembles

extension TreeEnsembleParameters {
    init(_ parameters: CoreML__Specification__TreeEnsembleParameters) {
        nodes = elements(parameters.nodes, parameters.n_nodes).map { TreeNode($0.pointee) }
        numPredictionDimensions = parameters.numpredictiondimensions
        basePredictionValue = scalars(parameters.basepredictionvalue, parameters.n_basepredictionvalue)
    }
}

extension TreeNode {
    init(_ node: CoreML__Specification__TreeEnsembleParameters__TreeNode) {
        treeID = node.treeid
        nodeID = node.nodeid
        behavior = switch node.nodebehavior {
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueLessThanEqual: .branchOnValueLessThanEqual
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueLessThan: .branchOnValueLessThan
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueGreaterThanEqual: .branchOnValueGreaterThanEqual
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueGreaterThan: .branchOnValueGreaterThan
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueEqual: .branchOnValueEqual
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueNotEqual: .branchOnValueNotEqual
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__LeafNode: .leafNode
        default: .unknown(node.nodebehavior.rawValue)
        }
        branchFeatureIndex = node.branchfeatureindex
        branchFeatureValue = node.branchfeaturevalue
        trueChildNodeID = node.truechildnodeid
        falseChildNodeID = node.falsechildnodeid
        missingValueTracksTrueChild = node.missingvaluetrackstruechild != 0
        evaluationInfo = elements(node.evaluationinfo, node.n_evaluationinfo).map {
            Evaluation(evaluationIndex: $0.pointee.evaluationindex, evaluationValue: $0.pointee.evaluationvalue)
        }
    }
}

extension TreeEnsembleTransform {
    init(_ transform: CoreML__Specification__TreeEnsemblePostEvaluationTransform) {
        self = switch transform {
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Classification_SoftMax: .softmax
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Regression_Logistic: .logistic
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Classification_SoftMaxWithZeroClassReference:
            .softmaxWithZeroReference
        default: .none
        }
    }
}

extension TreeEnsembleRegressorParameters {
    init(_ model: CoreML__Specification__TreeEnsembleRegressor) {
        treeEnsemble = model.treeensemble.map { TreeEnsembleParameters($0.pointee) }
        transform = TreeEnsembleTransform(model.postevaluationtransform)
    }
}

extension TreeEnsembleClassifierParameters {
    init(_ model: CoreML__Specification__TreeEnsembleClassifier) {
        treeEnsemble = model.treeensemble.map { TreeEnsembleParameters($0.pointee) }
        transform = TreeEnsembleTransform(model.postevaluationtransform)
        classLabels = ClassLabels(classifier: model)
    }
}

// MARK: Support vector machines

extension SupportVectorKernel {
    init(_ kernel: CoreML__Specification__Kernel) {
        switch kernel.kernel_case {
        case CORE_ML__SPECIFICATION__KERNEL__KERNEL_LINEAR_KERNEL:
            self = .linear
        case CORE_ML__SPECIFICATION__KERNEL__KERNEL_RBF_KERNEL:
            self = .rbf(gamma: kernel.rbfkernel?.pointee.gamma ?? 0)
        case CORE_ML__SPECIFICATION__KERNEL__KERNEL_POLY_KERNEL:
            let poly = kernel.polykernel?.pointee
            self = .polynomial(degree: Int(poly?.degree ?? 0), gamma: poly?.gamma ?? 0, c: poly?.c ?? 0)
        case CORE_ML__SPECIFICATION__KERNEL__KERNEL_SIGMOID_KERNEL:
            let sigmoid = kernel.sigmoidkernel?.pointee
            self = .sigmoid(gamma: sigmoid?.gamma ?? 0, c: sigmoid?.c ?? 0)
        default:
            self = .unset
        }
    }
}

extension SupportVectorSet {
    /// The sparse vectors when `sparse`, else the dense ones; `nil` when that message is left out.
    init?(sparse: Bool, dense: UnsafeMutablePointer<CoreML__Specification__DenseSupportVectors>?,
          sparseVectors: UnsafeMutablePointer<CoreML__Specification__SparseSupportVectors>?) {
        if sparse {
            guard let vectors = sparseVectors?.pointee else { return nil }
            self = .sparse(elements(vectors.vectors, vectors.n_vectors).map { vector in
                elements(vector.pointee.nodes, vector.pointee.n_nodes).map { SparseValue(index: $0.pointee.index, value: $0.pointee.value) }
            })
        } else {
            guard let vectors = dense?.pointee else { return nil }
            self = .dense(rows(vectors.vectors, vectors.n_vectors) { scalars($0.values, $0.n_values) })
        }
    }
}

extension SupportVectorRegressorParameters {
    init(_ svr: CoreML__Specification__SupportVectorRegressor) {
        kernel = svr.kernel.map { SupportVectorKernel($0.pointee) }
        supportVectors = SupportVectorSet(
            sparse: svr.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_REGRESSOR__SUPPORT_VECTORS_SPARSE_SUPPORT_VECTORS,
            dense: svr.densesupportvectors, sparseVectors: svr.sparsesupportvectors)
        coefficients = svr.coefficients.map { scalars($0.pointee.alpha, $0.pointee.n_alpha) } ?? []
        rho = svr.rho
    }
}

extension SupportVectorClassifierParameters {
    init(_ svc: CoreML__Specification__SupportVectorClassifier) {
        kernel = svc.kernel.map { SupportVectorKernel($0.pointee) }
        supportVectors = SupportVectorSet(
            sparse: svc.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_CLASSIFIER__SUPPORT_VECTORS_SPARSE_SUPPORT_VECTORS,
            dense: svc.densesupportvectors, sparseVectors: svc.sparsesupportvectors)
        coefficients = rows(svc.coefficients, svc.n_coefficients) { scalars($0.alpha, $0.n_alpha) }
        rho = scalars(svc.rho, svc.n_rho)
        probA = scalars(svc.proba, svc.n_proba)
        probB = scalars(svc.probb, svc.n_probb)
        numberOfSupportVectorsPerClass = scalars(svc.numberofsupportvectorsperclass, svc.n_numberofsupportvectorsperclass)
        classLabels = ClassLabels(classifier: svc)
    }
}

// MARK: Nearest neighbours

extension NearestNeighborsClassifierParameters {
    init(_ knn: CoreML__Specification__KNearestNeighborsClassifier) {
        index = knn.nearestneighborsindex.map { Index($0.pointee) }
        numberOfNeighbors = knn.numberofneighbors?.pointee.defaultvalue
        inverseDistanceWeighting = knn.weighting_scheme_case
            == CORE_ML__SPECIFICATION__KNEAREST_NEIGHBORS_CLASSIFIER__WEIGHTING_SCHEME_INVERSE_DISTANCE_WEIGHTING
        defaultLabel = switch knn.default_class_label_case {
        case CORE_ML__SPECIFICATION__KNEAREST_NEIGHBORS_CLASSIFIER__DEFAULT_CLASS_LABEL_DEFAULT_STRING_LABEL:
            .string(text(knn.defaultstringlabel))
        case CORE_ML__SPECIFICATION__KNEAREST_NEIGHBORS_CLASSIFIER__DEFAULT_CLASS_LABEL_DEFAULT_INT64_LABEL:
            .int64(knn.defaultint64label)
        default:
            nil
        }
        classLabels = ClassLabels(classifier: knn)
    }
}

extension NearestNeighborsClassifierParameters.Index {
    init(_ index: CoreML__Specification__NearestNeighborsIndex) {
        numberOfDimensions = index.numberofdimensions
        floatSamples = elements(index.floatsamples, index.n_floatsamples).map { scalars($0.pointee.vector, $0.pointee.n_vector) }
        kind = switch index.index_type_case {
        case CORE_ML__SPECIFICATION__NEAREST_NEIGHBORS_INDEX__INDEX_TYPE_LINEAR_INDEX: .linear
        case CORE_ML__SPECIFICATION__NEAREST_NEIGHBORS_INDEX__INDEX_TYPE_SINGLE_KD_TREE_INDEX:
            .singleKdTree(leafSize: index.singlekdtreeindex?.pointee.leafsize)
        default: .unset
        }
    }
}

// MARK: Feature engineering

extension NormalizerParameters {
    init(_ normalizer: CoreML__Specification__Normalizer) {
        norm = switch normalizer.normtype {
        case CORE_ML__SPECIFICATION__NORMALIZER__NORM_TYPE__L1: .l1
        case CORE_ML__SPECIFICATION__NORMALIZER__NORM_TYPE__L2: .l2
        default: .lMax
        }
    }
}

extension ScalerParameters {
    init(_ scaler: CoreML__Specification__Scaler) {
        shiftValue = scalars(scaler.shiftvalue, scaler.n_shiftvalue)
        scaleValue = scalars(scaler.scalevalue, scaler.n_scalevalue)
    }
}

extension OneHotEncoderParameters {
    init(_ encoder: CoreML__Specification__OneHotEncoder) {
        categories = encoder.category_type_case == CORE_ML__SPECIFICATION__ONE_HOT_ENCODER__CATEGORY_TYPE_STRING_CATEGORIES
            ? .strings(encoder.stringcategories.map { strings($0.pointee.vector, $0.pointee.n_vector) } ?? [])
            : .int64s(encoder.int64categories.map { scalars($0.pointee.vector, $0.pointee.n_vector) } ?? [])
        outputSparse = encoder.outputsparse != 0
        ignoreUnknown = encoder.handleunknown == CORE_ML__SPECIFICATION__ONE_HOT_ENCODER__HANDLE_UNKNOWN__IgnoreUnknown
    }
}

extension ImputerParameters {
    init(_ imputer: CoreML__Specification__Imputer) {
        replaceValue = switch imputer.replace_value_case {
        case CORE_ML__SPECIFICATION__IMPUTER__REPLACE_VALUE_REPLACE_INT64_VALUE: .int64(imputer.replaceint64value)
        case CORE_ML__SPECIFICATION__IMPUTER__REPLACE_VALUE_REPLACE_STRING_VALUE: .string(text(imputer.replacestringvalue))
        case CORE_ML__SPECIFICATION__IMPUTER__REPLACE_VALUE_REPLACE_DOUBLE_VALUE: .double(imputer.replacedoublevalue)
        default: nil
        }
        switch imputer.imputed_value_case {
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_DOUBLE_VALUE: imputedValue = .double(imputer.imputeddoublevalue)
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_INT64_VALUE: imputedValue = .int64(imputer.imputedint64value)
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_STRING_VALUE: imputedValue = .string(text(imputer.imputedstringvalue))
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_DOUBLE_ARRAY:
            imputedValue = .doubles(imputer.imputeddoublearray.map { scalars($0.pointee.vector, $0.pointee.n_vector) } ?? [])
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_INT64_ARRAY:
            imputedValue = .int64s(imputer.imputedint64array.map { scalars($0.pointee.vector, $0.pointee.n_vector) } ?? [])
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_STRING_DICTIONARY:
            var entries: [String: Double] = [:]
            if let map = imputer.imputedstringdictionary?.pointee {
                for entry in elements(map.map, map.n_map) { entries[text(entry.pointee.key)] = entry.pointee.value }
            }
            imputedValue = .stringDictionary(entries)
        case CORE_ML__SPECIFICATION__IMPUTER__IMPUTED_VALUE_IMPUTED_INT64_DICTIONARY:
            var entries: [Int64: Double] = [:]
            if let map = imputer.imputedint64dictionary?.pointee {
                for entry in elements(map.map, map.n_map) { entries[entry.pointee.key] = entry.pointee.value }
            }
            imputedValue = .int64Dictionary(entries)
        default:
            imputedValue = nil
        }
    }
}

extension DictVectorizerParameters {
    init(_ vectorizer: CoreML__Specification__DictVectorizer) {
        if vectorizer.map_case == CORE_ML__SPECIFICATION__DICT_VECTORIZER__MAP_STRING_TO_INDEX, let keys = vectorizer.stringtoindex {
            self.keys = .strings(strings(keys.pointee.vector, keys.pointee.n_vector))
        } else {
            keys = .int64s(vectorizer.int64toindex.map { scalars($0.pointee.vector, $0.pointee.n_vector) } ?? [])
        }
    }
}

extension FeatureVectorizerParameters {
    init(_ vectorizer: CoreML__Specification__FeatureVectorizer) {
        inputList = elements(vectorizer.inputlist, vectorizer.n_inputlist).map {
            Column(inputColumn: text($0.pointee.inputcolumn), inputDimensions: $0.pointee.inputdimensions)
        }
    }
}

extension ArrayFeatureExtractorParameters {
    init(_ extractor: CoreML__Specification__ArrayFeatureExtractor) {
        extractIndex = scalars(extractor.extractindex, extractor.n_extractindex)
    }
}

extension CategoricalMappingParameters {
    init(_ mapping: CoreML__Specification__CategoricalMapping) {
        if mapping.mapping_type_case == CORE_ML__SPECIFICATION__CATEGORICAL_MAPPING__MAPPING_TYPE_STRING_TO_INT64_MAP,
           let map = mapping.stringtoint64map?.pointee {
            var entries: [String: Int64] = [:]
            for entry in elements(map.map, map.n_map) { entries[text(entry.pointee.key)] = entry.pointee.value }
            self.mapping = .stringToInt64(entries)
        } else if let map = mapping.int64tostringmap?.pointee {
            var entries: [Int64: String] = [:]
            for entry in elements(map.map, map.n_map) { entries[entry.pointee.key] = text(entry.pointee.value) }
            self.mapping = .int64ToString(entries)
        } else {
            self.mapping = nil
        }
        valueOnUnknown = switch mapping.value_on_unknown_case {
        case CORE_ML__SPECIFICATION__CATEGORICAL_MAPPING__VALUE_ON_UNKNOWN_STR_VALUE: .string(text(mapping.strvalue))
        case CORE_ML__SPECIFICATION__CATEGORICAL_MAPPING__VALUE_ON_UNKNOWN_INT64_VALUE: .int64(mapping.int64value)
        default: nil
        }
    }
}

// MARK: Detection and recommendation

extension NonMaximumSuppressionParameters {
    init(_ nms: CoreML__Specification__NonMaximumSuppression) {
        iouThreshold = nms.iouthreshold
        confidenceThreshold = nms.confidencethreshold
        perClass = nms.picktop?.pointee.perclass ?? 0 != 0
        confidenceInputFeatureName = text(nms.confidenceinputfeaturename)
        coordinatesInputFeatureName = text(nms.coordinatesinputfeaturename)
        iouThresholdInputFeatureName = text(nms.iouthresholdinputfeaturename)
        confidenceThresholdInputFeatureName = text(nms.confidencethresholdinputfeaturename)
        confidenceOutputFeatureName = text(nms.confidenceoutputfeaturename)
        coordinatesOutputFeatureName = text(nms.coordinatesoutputfeaturename)
    }
}

extension ItemSimilarityRecommenderParameters {
    init(_ model: CoreML__Specification__ItemSimilarityRecommender) {
        itemItemSimilarities = elements(model.itemitemsimilarities, model.n_itemitemsimilarities).map { entry in
            SimilarItems(
                itemID: entry.pointee.itemid,
                similarItemList: elements(entry.pointee.similaritemlist, entry.pointee.n_similaritemlist).map {
                    SimilarItems.Item(itemID: $0.pointee.itemid, similarityScore: $0.pointee.similarityscore)
                },
                itemScoreAdjustment: entry.pointee.itemscoreadjustment)
        }
        itemStringIDs = model.itemstringids.map { strings($0.pointee.vector, $0.pointee.n_vector) } ?? []
        itemInt64IDs = model.itemint64ids.map { scalars($0.pointee.vector, $0.pointee.n_vector) } ?? []
        itemInputFeatureName = text(model.iteminputfeaturename)
        numRecommendationsInputFeatureName = text(model.numrecommendationsinputfeaturename)
        itemRestrictionInputFeatureName = text(model.itemrestrictioninputfeaturename)
        itemExclusionInputFeatureName = text(model.itemexclusioninputfeaturename)
        recommendedItemListOutputFeatureName = text(model.recommendeditemlistoutputfeaturename)
        recommendedItemScoreOutputFeatureName = text(model.recommendeditemscoreoutputfeaturename)
    }
}
