import ImageDecoding
import ModelFeatures

/// Runs an image model on the image of a handler (Vision's
/// `VNCoreMLRequest`): crops and scales the image to the model's input, runs
/// the model, and turns its outputs into observations.
///
/// A value: the same request may be performed by many handlers at once.
public struct ImageRequest: Sendable {
    public let model: ImageModel
    /// How the image is brought to the model's input size (default: centre crop).
    public var cropAndScale: CropAndScale
    /// The part of the upright image to use, origin at the lower left
    /// (default: all of it). Must lie within (0, 0, 1, 1).
    public var regionOfInterest: NormalizedRect

    public init(model: ImageModel, cropAndScale: CropAndScale = .centerCrop, regionOfInterest: NormalizedRect = .full) {
        self.model = model
        self.cropAndScale = cropAndScale
        self.regionOfInterest = regionOfInterest
    }

    /// The colour layout the model's image is decoded in.
    var pixelFormat: PixelBuffer.PixelFormat { model.takesGrayscale ? .gray : .rgb }

    /// The fitting for an upright image of `width` × `height` pixels.
    func fitting(imageWidth width: Int, imageHeight height: Int) -> ImageFitting {
        let area = regionOfInterest.isValid ? regionOfInterest.pixelSize(width: width, height: height) : (width, height)
        let size = model.inputSize(forImageWidth: area.0, height: area.1)
        return ImageFitting(width: size.width, height: size.height, cropAndScale: cropAndScale,
                            regionOfInterest: regionOfInterest)
    }

    /// The fitting when it does not depend on the image (a model of one size).
    var fixedFitting: ImageFitting? {
        model.hasFlexibleSize ? nil : fitting(imageWidth: 1, imageHeight: 1)
    }

    /// Observations from the model's outputs on `image`.
    func result(from outputs: [String: FeatureValue], image: FittedImage) -> ImageRequestResult {
        let (width, height) = (image.uprightWidth, image.uprightHeight)
        let region = image.uprightRect(fromTopLeftX: 0, y: 0, width: 1, height: 1)
        if let name = model.probabilitiesOutput, let dictionary = outputs[name]?.dictionaryValue {
            return ImageRequestResult(observations: .classifications(classifications(dictionary)), model: model.path,
                                      imageWidth: width, imageHeight: height)
        }
        if let detection = model.detectionOutputs,
           let confidence = outputs[detection.confidence]?.multiArrayValue,
           let coordinates = outputs[detection.coordinates]?.multiArrayValue {
            return ImageRequestResult(observations: .recognizedObjects(objects(confidence, coordinates, image: image)),
                                      model: model.path, imageWidth: width, imageHeight: height)
        }
        let declared = model.summary.outputs.map(\.name)
        let names = declared.filter { outputs[$0] != nil } + outputs.keys.filter { !declared.contains($0) }.sorted()
        let values = names.compactMap { name in
            outputs[name].map { FeatureValueObservation(featureName: name, featureValue: $0) }
        }
        return ImageRequestResult(observations: .featureValues(values), model: model.path,
                                  imageWidth: width, imageHeight: height, inputRegion: region)
    }

    /// The rows NMS kept, boxes mapped back to the upright image. Rows of
    /// zeros (padding of a fixed-size output) are left out.
    private func objects(_ confidence: MultiArray, _ coordinates: MultiArray, image: FittedImage) -> [RecognizedObjectObservation] {
        let classes = confidence.shape.last ?? 0
        guard classes > 0 else { return [] }
        let rows = min(confidence.count / classes, coordinates.count / 4)
        let scores = confidence.doubles, boxes = coordinates.doubles
        var found: [RecognizedObjectObservation] = []
        for row in 0..<rows {
            let box = Array(boxes[(row * 4)..<(row * 4 + 4)])
            let rowScores = Array(scores[(row * classes)..<(row * classes + classes)])
            if box.allSatisfy({ $0 == 0 }), rowScores.allSatisfy({ $0 == 0 }) { continue }
            let names = (0..<classes).map { $0 < model.labels.count ? model.labels[$0] : String($0) }
            let labels = zip(names, rowScores).enumerated()
                .sorted { $0.element.1 != $1.element.1 ? $0.element.1 > $1.element.1 : $0.offset < $1.offset }
                .map { ClassificationObservation(identifier: $0.element.0, confidence: Float($0.element.1)) }
            let rect = image.uprightRect(fromTopLeftX: box[0] - box[2] / 2, y: box[1] - box[3] / 2,
                                         width: box[2], height: box[3])
            found.append(RecognizedObjectObservation(boundingBox: rect, confidence: labels.first?.confidence ?? 0,
                                                     labels: labels))
        }
        return found
    }

    private func classifications(_ dictionary: FeatureDictionary) -> [ClassificationObservation] {
        let order = Dictionary(model.labels.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let observations: [ClassificationObservation] = switch dictionary {
        case .strings(let entries):
            entries.map { ClassificationObservation(identifier: $0.key, confidence: Float($0.value)) }
        case .int64s(let entries):
            entries.map { ClassificationObservation(identifier: String($0.key), confidence: Float($0.value)) }
        }
        return observations.sorted {
            if $0.confidence != $1.confidence { return $0.confidence > $1.confidence }
            return (order[$0.identifier] ?? .max, $0.identifier) < (order[$1.identifier] ?? .max, $1.identifier)
        }
    }
}
