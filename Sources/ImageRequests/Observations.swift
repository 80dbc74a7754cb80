import ImageDecoding
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

/// An object an object detector found (Vision's `VNRecognizedObjectObservation`).
public struct RecognizedObjectObservation: Sendable, Equatable {
    /// Where the object is, normalized, origin at the lower left of the
    /// upright image (whatever the crop, scale and region of interest).
    public var boundingBox: NormalizedRect
    /// The most likely label's confidence.
    public var confidence: Float
    /// Every label with its confidence, most confident first (ties in the model's label order).
    public var labels: [ClassificationObservation]

    public init(boundingBox: NormalizedRect, confidence: Float, labels: [ClassificationObservation]) {
        self.boundingBox = boundingBox
        self.confidence = confidence
        self.labels = labels
    }
}

/// What one request found in one image.
public struct ImageRequestResult: Sendable {
    /// The observations: a classifier's labels, a detector's objects, or
    /// every output of another model.
    public enum Observations: Sendable {
        /// Every label with its confidence, most confident first (ties in the model's label order).
        case classifications([ClassificationObservation])
        /// The objects a detector kept after non-maximum suppression, in the order it kept them.
        case recognizedObjects([RecognizedObjectObservation])
        /// One observation per output, in the order the model declares them.
        case featureValues([FeatureValueObservation])
    }

    public let observations: Observations
    /// The model's path, for messages.
    public let model: String
    /// The upright image's size in pixels (as stored, before any shrinking),
    /// to turn normalized boxes into pixels.
    public let imageWidth: Int
    public let imageHeight: Int
    /// The part of the upright image the model's input showed (normalized,
    /// origin at the lower left; past the image where scale-fit added bars):
    /// where an output image or mask lies over the image.
    public let inputRegion: NormalizedRect

    public init(observations: Observations, model: String, imageWidth: Int = 0, imageHeight: Int = 0,
                inputRegion: NormalizedRect = .full) {
        self.observations = observations
        self.model = model
        self.imageWidth = imageWidth
        self.imageHeight = imageHeight
        self.inputRegion = inputRegion
    }

    /// The image outputs, by output name, in the model's order.
    public var images: [(name: String, image: PixelBuffer)] {
        featureValues.compactMap { observation in
            if case .image(let image) = observation.featureValue { (observation.featureName, image) } else { nil }
        }
    }

    /// A detector's objects; empty for other models.
    public var recognizedObjects: [RecognizedObjectObservation] {
        if case .recognizedObjects(let observations) = observations { observations } else { [] }
    }

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
