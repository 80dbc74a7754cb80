import ModelFeatures

/// One label and how confident the model is in it (Vision's
/// `VNClassificationObservation`).
public struct ClassificationObservation: Sendable, Equatable {
    public var identifier: String
    /// The model's probability for the label, 0…1 for a calibrated classifier.
    public var confidence: Float

    public init(identifier: String, confidence: Float) {
        self.identifier = identifier
        self.confidence = confidence
    }
}

/// One output of a model that is not a classifier (Vision's
/// `VNCoreMLFeatureValueObservation`).
public struct FeatureValueObservation: Sendable {
    public var featureName: String
    public var featureValue: FeatureValue

    public init(featureName: String, featureValue: FeatureValue) {
        self.featureName = featureName
        self.featureValue = featureValue
    }
}

/// What one request found in one image.
public struct ImageRequestResult: Sendable {
    /// The observations: a classifier's labels, or every output of another model.
    public enum Observations: Sendable {
        /// Every label with its confidence, most confident first (ties in the model's label order).
        case classifications([ClassificationObservation])
        /// One observation per output, in the order the model declares them.
        case featureValues([FeatureValueObservation])
    }

    public let observations: Observations
    /// The model's path, for messages.
    public let model: String

    /// A classifier's observations, most confident first; empty for other models.
    public var classifications: [ClassificationObservation] {
        if case .classifications(let observations) = observations { observations } else { [] }
    }

    /// Another model's observations; empty for classifiers.
    public var featureValues: [FeatureValueObservation] {
        if case .featureValues(let observations) = observations { observations } else { [] }
    }

    /// The confidence for `label`.
    ///
    /// - Throws: `.unknownLabel` naming the model's labels when it has no
    ///   such label (or is not a classifier).
    public func confidence(of label: String) throws(ImageRequestError) -> Float {
        let observations = classifications
        guard let found = observations.first(where: { $0.identifier == label }) else {
            throw .unknownLabel(label: label, model: model, labels: observations.map(\.identifier).sorted())
        }
        return found.confidence
    }
}
