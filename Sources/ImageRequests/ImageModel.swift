import ImageDecoding
import ModelFeatures
import ModelRuntime
import ModelSpec

/// A model wrapped for image requests (Vision's `VNCoreMLModel`): which of
/// its inputs takes the image, at what sizes, and how its outputs become
/// observations.
///
/// The model is either held (`init(model:)`) or comes through a
/// `RunnableModelCache` (`init(contentsOf:cache:)`), which may evict it under
/// memory pressure and opens it again on the next request, unnoticed by the
/// caller. Immutable; safe to share between threads and requests.
public final class ImageModel: Sendable {
    enum Source: Sendable {
        case loaded(Model)
        case cached(RunnableModelCache)
    }

    let source: Source
    /// What names the model in errors: its path.
    public let path: String
    /// The model's description.
    public let summary: ModelSummary
    /// The input the image goes to.
    public let imageInput: String
    /// That input's declared type: size, size flexibility and colour space.
    public let imageType: ImageType
    /// Values for the model's other inputs (Vision's `featureProvider`).
    public let additionalInputs: [String: FeatureValue]
    /// Classifiers: the output holding the label → probability dictionary; `nil` otherwise.
    public let probabilitiesOutput: String?
    /// Classifiers and object detectors: the class labels in the model's order.
    public let labels: [String]
    /// Object detectors (a pipeline ending in non-maximum suppression): the
    /// outputs holding the boxes' confidences and coordinates; `nil` otherwise.
    public let detectionOutputs: DetectionOutputs?

    /// The two outputs of an object detector's non-maximum suppression stage.
    public struct DetectionOutputs: Sendable, Equatable {
        /// Boxes × classes confidences.
        public var confidence: String
        /// Boxes × 4: centre x, centre y, width, height, normalized to the
        /// model's input with the origin at the top left.
        public var coordinates: String
    }

    /// Wraps a model that is already open.
    ///
    /// - Parameters:
    ///   - imageInput: the image input to use when the model has several; by
    ///     default its first image input.
    ///   - additionalInputs: values for inputs other than the image that the
    ///     model requires.
    ///   - name: what names the model in errors; by default its path (for a
    ///     model compiled on the fly, the compiled bundle's).
    /// - Throws: `.notAnImageModel`, `.noSuchImageInput` or `.missingOtherInputs`.
    public convenience init(model: Model, imageInput: String? = nil,
                            additionalInputs: [String: FeatureValue] = [:], name: String? = nil) throws(ImageRequestError) {
        try self.init(source: .loaded(model), path: name ?? model.path, summary: model.summary,
                      imageInput: imageInput, additionalInputs: additionalInputs)
    }

    /// Wraps the model at `path` as `cache` holds it: it is opened now to
    /// read its description, and then leased from the cache for each request.
    ///
    /// - Throws: `.model` when it cannot be opened, or as `init(model:)`.
    public convenience init(contentsOf path: String, cache: RunnableModelCache, imageInput: String? = nil,
                            additionalInputs: [String: FeatureValue] = [:]) async throws(ImageRequestError) {
        let summary: ModelSummary
        do {
            let lease = try await cache.model(at: path)
            summary = lease.model.summary
            lease.release()
        } catch {
            throw .model(error)
        }
        try self.init(source: .cached(cache), path: path, summary: summary,
                      imageInput: imageInput, additionalInputs: additionalInputs)
    }

    private init(source: Source, path: String, summary: ModelSummary, imageInput: String?,
                 additionalInputs: [String: FeatureValue]) throws(ImageRequestError) {
        let images = summary.inputs.compactMap { input -> (String, ImageType)? in
            if case .image(let type) = input.type { (input.name, type) } else { nil }
        }
        guard let first = images.first else {
            throw .notAnImageModel(model: path, inputs: summary.inputs.map(\.name))
        }
        var chosen = first
        if let imageInput {
            guard let named = images.first(where: { $0.0 == imageInput }) else {
                throw .noSuchImageInput(model: path, name: imageInput, imageInputs: images.map(\.0))
            }
            chosen = named
        }
        let missing = summary.inputs.filter {
            $0.name != chosen.0 && !$0.isOptional && additionalInputs[$0.name] == nil
        }
        guard missing.isEmpty else {
            throw .missingOtherInputs(model: path, inputs: missing.map(\.name))
        }
        self.source = source
        self.path = path
        self.summary = summary
        self.imageInput = chosen.0
        self.imageType = chosen.1
        self.additionalInputs = additionalInputs
        let labels = summary.classLabels?.texts ?? []
        self.labels = labels
        probabilitiesOutput = labels.isEmpty ? nil : Self.probabilitiesOutput(of: summary)
        detectionOutputs = Self.detectionOutputs(of: summary)
    }

    /// A detector's outputs: those of its last pipeline stage when that is
    /// non-maximum suppression. The stage names them in its parameters, which
    /// the summary does not keep; they are told apart by name ("coordinates"),
    /// else by the coordinates' 4 columns, else in the schema's order
    /// (confidence first).
    private static func detectionOutputs(of summary: ModelSummary) -> DetectionOutputs? {
        guard let last = summary.pipeline?.last, last.modelType == "nonMaximumSuppression" else { return nil }
        let arrays = last.outputs.filter { output in
            guard case .multiArray = output.type else { return false }
            return summary.outputs.contains { $0.name == output.name }
        }
        guard arrays.count == 2 else { return nil }
        func columns(_ feature: FeatureDescription) -> Int64? {
            if case .multiArray(let type) = feature.type { type.shape.last } else { nil }
        }
        let named = arrays.firstIndex { $0.name.lowercased().contains("coord") }
        let fours = arrays.indices.filter { columns(arrays[$0]) == 4 }
        let coordinates = named ?? (fours.count == 1 ? fours[0] : 1)
        return DetectionOutputs(confidence: arrays[1 - coordinates].name, coordinates: arrays[coordinates].name)
    }

    /// Whether requests on this model give recognized-object observations.
    public var isObjectDetector: Bool { detectionOutputs != nil }

    /// The classifier's probability dictionary: the declared one, or else
    /// the only dictionary output.
    private static func probabilitiesOutput(of summary: ModelSummary) -> String? {
        if let name = summary.predictedProbabilitiesName, !name.isEmpty,
           summary.outputs.contains(where: { $0.name == name }) {
            return name
        }
        let dictionaries = summary.outputs.filter { if case .dictionary = $0.type { true } else { false } }
        return dictionaries.count == 1 ? dictionaries[0].name : nil
    }

    /// Whether requests on this model give classification observations.
    public var isClassifier: Bool { probabilitiesOutput != nil }

    /// Whether the image is read in gray levels (else RGB).
    var takesGrayscale: Bool { imageType.space.isGrayscale }

    /// Whether the input size depends on the image (flexible sizes).
    var hasFlexibleSize: Bool { imageType.sizeFlexibility != nil }

    /// The size the model's image input is given for an upright image (its
    /// region of interest) of `width` × `height` pixels.
    ///
    /// A model of one size gets that size. Of enumerated sizes, the largest
    /// that fits within the image (the image is not enlarged), or the
    /// smallest when none does. Of size ranges, the image's own size brought
    /// into the ranges.
    public func inputSize(forImageWidth width: Int, height: Int) -> (width: Int, height: Int) {
        let declared = (width: Int(imageType.width), height: Int(imageType.height))
        switch imageType.sizeFlexibility {
        case nil:
            return declared
        case .enumerated(let sizes):
            let allowed = sizes.map { (width: Int($0.width), height: Int($0.height)) }
            let fitting = allowed.filter { $0.width <= width && $0.height <= height }
            let byArea: ((width: Int, height: Int), (width: Int, height: Int)) -> Bool = {
                ($0.width * $0.height, $0.width) < ($1.width * $1.height, $1.width)
            }
            return fitting.max(by: byArea) ?? allowed.min(by: byArea) ?? declared
        case .ranges(let widths, let heights):
            func clamped(_ size: Int, _ range: SizeRange) -> Int {
                let upper = range.upperBound < 0 ? Int.max : Int(range.upperBound)
                return min(max(size, Int(range.lowerBound), 1), upper)
            }
            return (clamped(width, widths), clamped(height, heights))
        }
    }

    /// The model's inputs with `image` as the image.
    func inputs(with image: PixelBuffer) -> [String: FeatureValue] {
        var inputs = additionalInputs
        inputs[imageInput] = .image(image)
        return inputs
    }

    /// Runs the model on the calling thread; for a held model only.
    func prediction(from inputs: [String: FeatureValue]) throws(ImageRequestError) -> [String: FeatureValue] {
        switch source {
        case .loaded(let model):
            do { return try model.prediction(from: inputs) } catch { throw .model(.runtime(error)) }
        case .cached:
            throw .cachedModelNeedsAsync(model: path)
        }
    }

    /// Runs the model off the caller's task, leasing it from the cache when it comes through one.
    func prediction(from inputs: [String: FeatureValue]) async throws(ImageRequestError) -> [String: FeatureValue] {
        switch source {
        case .loaded(let model):
            do { return try await model.prediction(from: inputs) } catch { throw .model(.runtime(error)) }
        case .cached(let cache):
            do { return try await cache.prediction(from: inputs, at: path) } catch { throw .model(error) }
        }
    }
}
