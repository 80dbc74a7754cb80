import ModelFeatures

// What each classic engine holds, for `PredictionEngine.residentBytes`: its
// parameter arrays and lookup tables as prepared. The model's interface (names
// and descriptions) is left out: it is small and the model keeps it anyway.

extension NormalizerEngine { var residentBytes: Int { 0 } }
extension IdentityEngine { var residentBytes: Int { 0 } }
extension NonMaximumSuppressionEngine { var residentBytes: Int { 0 } }

extension ScalerEngine {
    var residentBytes: Int { ResidentBytes.of(shift) + ResidentBytes.of(scale) }
}

extension OneHotEncoderEngine {
    var residentBytes: Int { ResidentBytes.of(categories) }
}

extension ImputerEngine {
    var residentBytes: Int {
        switch imputed {
        case .double, .int64, .string: 0
        case .doubles(let values): ResidentBytes.of(values)
        case .int64s(let values): ResidentBytes.of(values)
        case .stringDictionary(let values): ResidentBytes.of(values)
        case .int64Dictionary(let values): ResidentBytes.of(values)
        }
    }
}

extension DictVectorizerEngine {
    var residentBytes: Int { ResidentBytes.of(stringIndex) + ResidentBytes.of(int64Index) }
}

extension FeatureVectorizerEngine {
    var residentBytes: Int { ResidentBytes.of(columns.map(\.name)) + columns.count * MemoryLayout<Int>.stride }
}

extension ArrayFeatureExtractorEngine {
    var residentBytes: Int { ResidentBytes.of(indices) }
}

extension CategoricalMappingEngine {
    var residentBytes: Int { ResidentBytes.of(toInt64) + ResidentBytes.of(toString) }
}

extension GLMRegressorEngine {
    var residentBytes: Int { weights.reduce(ResidentBytes.of(offsets)) { $0 + ResidentBytes.of($1) } }
}

extension GLMClassifierEngine {
    var residentBytes: Int {
        weights.reduce(ResidentBytes.of(offsets) + ResidentBytes.of(labels)) { $0 + ResidentBytes.of($1) }
    }
}

extension NearestNeighborsClassifierEngine {
    var residentBytes: Int {
        ResidentBytes.of(samples) + ResidentBytes.of(sampleLabels) + ResidentBytes.of(classes)
            + ResidentBytes.of(classIndex) + (tree?.indexBytes ?? 0)
    }
}

extension SupportVectorRegressorEngine {
    var residentBytes: Int { ResidentBytes.of(vectors.values) + ResidentBytes.of(alpha) }
}

extension SupportVectorClassifierEngine {
    var residentBytes: Int {
        coefficients.reduce(0) { $0 + ResidentBytes.of($1) } + ResidentBytes.of(vectors.values)
            + ResidentBytes.of(rho) + ResidentBytes.of(probA) + ResidentBytes.of(probB)
            + ResidentBytes.of(starts) + ResidentBytes.of(counts) + ResidentBytes.of(labels)
    }
}

extension TreeForest {
    /// Bytes of the nodes, leaf values and base values.
    var residentBytes: Int {
        ResidentBytes.of(nodes) + ResidentBytes.of(roots) + ResidentBytes.of(leafValues) + ResidentBytes.of(base)
    }
}

extension TreeEnsembleRegressorEngine {
    var residentBytes: Int { forest.residentBytes }
}

extension TreeEnsembleClassifierEngine {
    var residentBytes: Int { forest.residentBytes + ResidentBytes.of(labels) }
}

extension ItemSimilarityRecommenderEngine {
    /// Bytes of the similarity lists and per-item shifts (identifiers not counted).
    var residentBytes: Int {
        similarities.reduce(0) { $0 + $1.count * MemoryLayout<(item: Int, score: Double)>.stride } + ResidentBytes.of(shifts)
    }
}
