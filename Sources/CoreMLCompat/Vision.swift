import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures
import SystemIO

/// How an image is turned upright: the EXIF orientations, with Apple's
/// case names and raw values (1–8).
public typealias CGImagePropertyOrientation = ImageOrientation

/// A confidence, 0…1.
public typealias VNConfidence = Float

/// How Vision brings an image to a model's input size, with Apple's raw values.
public enum VNImageCropAndScaleOption: UInt, Sendable {
    case centerCrop = 0, scaleFit = 1, scaleFill = 2

    var native: CropAndScale {
        switch self {
        case .centerCrop: .centerCrop
        case .scaleFit: .scaleFit
        case .scaleFill: .scaleFill
        }
    }
}

/// Options of an image request handler; accepted and ignored by modelc.
public struct VNImageOption: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let properties = VNImageOption(rawValue: "VNImageOptionProperties")
    public static let cameraIntrinsics = VNImageOption(rawValue: "VNImageOptionCameraIntrinsics")
    public static let ciContext = VNImageOption(rawValue: "VNImageOptionCIContext")
}

/// Why Vision failed, with Apple's error codes (Vision's `VNError`).
public struct VNError: Error, LocalizedError, CustomStringConvertible, Sendable {
    public enum Code: Int, Sendable {
        case requestCancelled = 1, invalidFormat = 2, operationFailed = 3, outOfBoundsError = 4, invalidOption = 5
        case ioError = 6, missingOption = 7, notImplemented = 8, internalError = 9, outOfMemory = 10, unknownError = 11
        case invalidOperation = 12, invalidImage = 13, invalidArgument = 14, invalidModel = 15
    }

    public let code: Code
    /// The message, naming the model, image or label at fault.
    public let description: String

    public var errorDescription: String? { description }

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    init(_ error: ImageRequestError) {
        let code: Code = switch error {
        case .notAnImageModel, .noSuchImageInput, .missingOtherInputs: .invalidModel
        case .image(.unreadable): .ioError
        case .image(.invalidRegionOfInterest), .image(.invalidSize): .invalidArgument
        case .image: .invalidImage
        case .model, .cachedModelNeedsAsync: .operationFailed
        case .unknownLabel: .invalidArgument
        case .faces(.libraryUnavailable): .notImplemented
        case .faces(.failed): .operationFailed
        }
        self.init(code, error.description)
    }
}

/// A Core ML model wrapped for Vision (`VNCoreMLModel`): it must take an image.
public final class VNCoreMLModel: Sendable {
    private struct Settings {
        var imageInput: String
        var featureProvider: (any MLFeatureProvider & Sendable)?
        var wrapped: Result<ImageModel, ImageRequestError>
    }

    /// The model wrapped.
    public let model: MLModel
    private let settings: Locked<Settings>

    /// - Throws: `VNError` (`.invalidModel`) when the model takes no image,
    ///   or needs inputs besides the image (give them as `featureProvider`).
    public init(for model: MLModel) throws {
        self.model = model
        let images = model.model.summary.inputs.filter { if case .image = $0.type { true } else { false } }
        guard let first = images.first else {
            throw VNError(ImageRequestError.notAnImageModel(model: model.model.path, inputs: model.model.summary.inputs.map(\.name)))
        }
        let wrapped = Result { () throws(ImageRequestError) in try ImageModel(model: model.model, imageInput: first.name) }
        if case .failure(let error) = wrapped, case .notAnImageModel = error { throw VNError(error) }
        settings = Locked(Settings(imageInput: first.name, featureProvider: nil, wrapped: wrapped))
    }

    /// The image input used (the first image input unless set).
    public var inputImageFeatureName: String {
        get { settings.withLock { $0.imageInput } }
        set { settings.withLock { $0.imageInput = newValue; rewrap(&$0) } }
    }

    /// Values for the model's inputs other than the image.
    public var featureProvider: (any MLFeatureProvider & Sendable)? {
        get { settings.withLock { $0.featureProvider } }
        set { settings.withLock { $0.featureProvider = newValue; rewrap(&$0) } }
    }

    private func rewrap(_ settings: inout Settings) {
        let others = settings.featureProvider.map(MLModel.values) ?? [:]
        let name = settings.imageInput
        settings.wrapped = Result { () throws(ImageRequestError) in
            try ImageModel(model: model.model, imageInput: name, additionalInputs: others)
        }
    }

    /// The wrapped model as modelc's image requests take it.
    func imageModel() throws -> ImageModel {
        do { return try settings.withLock { $0.wrapped }.get() } catch { throw VNError(error) }
    }
}

/// What a request found (`VNObservation`).
open class VNObservation: @unchecked Sendable {
    /// Unique to this observation.
    public let uuid = UUID()
    public let confidence: VNConfidence

    init(confidence: VNConfidence) {
        self.confidence = confidence
    }
}

/// A label and the model's confidence in it (`VNClassificationObservation`).
public final class VNClassificationObservation: VNObservation, @unchecked Sendable, CustomStringConvertible {
    public let identifier: String

    init(identifier: String, confidence: VNConfidence) {
        self.identifier = identifier
        super.init(confidence: confidence)
    }

    public var description: String { "\(identifier) \(confidence)" }
}

/// An observation with a place in the image (`VNDetectedObjectObservation`).
open class VNDetectedObjectObservation: VNObservation, @unchecked Sendable {
    /// Where it is: normalized, origin at the lower left of the upright image.
    public let boundingBox: CGRect

    init(boundingBox: NormalizedRect, confidence: VNConfidence) {
        self.boundingBox = CGRect(x: boundingBox.x, y: boundingBox.y, width: boundingBox.width, height: boundingBox.height)
        super.init(confidence: confidence)
    }
}

/// An object a detector found, with every label (`VNRecognizedObjectObservation`).
public final class VNRecognizedObjectObservation: VNDetectedObjectObservation, @unchecked Sendable {
    /// Every label, most confident first.
    public let labels: [VNClassificationObservation]

    init(_ object: RecognizedObjectObservation) {
        labels = object.labels.map { VNClassificationObservation(identifier: $0.identifier, confidence: $0.confidence) }
        super.init(boundingBox: object.boundingBox, confidence: object.confidence)
    }
}

/// A face (`VNFaceObservation`): its box, and its roll and yaw in radians
/// when the detector gives them (coarse: 0 or ±π/4).
public final class VNFaceObservation: VNDetectedObjectObservation, @unchecked Sendable {
    /// The face's tilt in the image, positive counterclockwise.
    public let roll: NSNumber?
    /// The head's turn, negative towards the image's left.
    public let yaw: NSNumber?
    /// Not given by modelc's detector.
    public let pitch: NSNumber? = nil

    /// The box is cut to the image (a face at an edge may reach past it), so
    /// that it can be a request's `regionOfInterest` as it is.
    init(_ face: FaceObservation) {
        roll = face.roll.map { NSNumber(value: $0) }
        yaw = face.yaw.map { NSNumber(value: $0) }
        super.init(boundingBox: face.regionOfInterest, confidence: face.confidence)
    }
}

/// An image output of a model (`VNPixelBufferObservation`).
public final class VNPixelBufferObservation: VNObservation, @unchecked Sendable {
    public let pixelBuffer: CVPixelBuffer
    /// The output's name.
    public let featureName: String?

    init(featureName: String, pixelBuffer: CVPixelBuffer) {
        self.featureName = featureName
        self.pixelBuffer = pixelBuffer
        super.init(confidence: 1)
    }
}

/// One output of a model that is not a classifier (`VNCoreMLFeatureValueObservation`).
public final class VNCoreMLFeatureValueObservation: VNObservation, @unchecked Sendable {
    public let featureName: String
    public let featureValue: MLFeatureValue

    init(featureName: String, featureValue: MLFeatureValue) {
        self.featureName = featureName
        self.featureValue = featureValue
        super.init(confidence: 1)
    }
}

/// Called when a request is done, with its error if it failed.
public typealias VNRequestCompletionHandler = (VNRequest, (any Error)?) -> Void

/// A request performed by an image request handler (`VNRequest`).
open class VNRequest {
    /// The observations of the last perform; `nil` before it or after a failure.
    public internal(set) var results: [VNObservation]?
    public let completionHandler: VNRequestCompletionHandler?
    /// Accepted; modelc does the same work either way.
    public var preferBackgroundProcessing = false

    init(completionHandler: VNRequestCompletionHandler?) {
        self.completionHandler = completionHandler
    }
}

/// A request that works on an image (`VNImageBasedRequest`).
open class VNImageBasedRequest: VNRequest {
    /// The part of the image to use, normalized, origin at the lower left
    /// (default: all of it).
    public var regionOfInterest = CGRect(x: 0, y: 0, width: 1, height: 1)
}

/// Runs a Core ML model on an image (`VNCoreMLRequest`).
public final class VNCoreMLRequest: VNImageBasedRequest {
    public let model: VNCoreMLModel
    public var imageCropAndScaleOption = VNImageCropAndScaleOption.centerCrop

    public init(model: VNCoreMLModel) {
        self.model = model
        super.init(completionHandler: nil)
    }

    public init(model: VNCoreMLModel, completionHandler: VNRequestCompletionHandler?) {
        self.model = model
        super.init(completionHandler: completionHandler)
    }

    func nativeRequest() throws -> ImageRequest {
        let rect = regionOfInterest
        return ImageRequest(model: try model.imageModel(), cropAndScale: imageCropAndScaleOption.native,
                            regionOfInterest: NormalizedRect(x: Double(rect.origin.x), y: Double(rect.origin.y),
                                                             width: Double(rect.size.width), height: Double(rect.size.height)))
    }

    func observations(_ result: ImageRequestResult) -> [VNObservation] {
        switch result.observations {
        case .classifications(let found):
            found.map { VNClassificationObservation(identifier: $0.identifier, confidence: $0.confidence) }
        case .recognizedObjects(let found):
            found.map(VNRecognizedObjectObservation.init)
        case .featureValues(let found):
            found.map { observation -> VNObservation in
                // Image outputs are pixel buffers, as Vision gives them.
                if case .image(let buffer) = observation.featureValue {
                    return VNPixelBufferObservation(featureName: observation.featureName, pixelBuffer: buffer)
                }
                return VNCoreMLFeatureValueObservation(featureName: observation.featureName,
                                                       featureValue: MLFeatureValue(observation.featureValue))
            }
        }
    }
}

/// Finds the faces in an image (`VNDetectFaceRectanglesRequest`): dlib's
/// frontal face detector, opened at the first request. Its results are
/// `VNFaceObservation`s, most confident first, boxes in the whole upright
/// image (also when `regionOfInterest` limits the search).
public final class VNDetectFaceRectanglesRequest: VNImageBasedRequest {
    public init() {
        super.init(completionHandler: nil)
    }

    public override init(completionHandler: VNRequestCompletionHandler?) {
        super.init(completionHandler: completionHandler)
    }

    func nativeRequest() -> FaceRectanglesRequest {
        let rect = regionOfInterest
        return FaceRectanglesRequest(regionOfInterest: NormalizedRect(
            x: Double(rect.origin.x), y: Double(rect.origin.y), width: Double(rect.size.width), height: Double(rect.size.height)))
    }
}

/// Performs requests on one image (`VNImageRequestHandler`): a file, encoded
/// bytes or a pixel buffer. Performing several requests decodes the image once.
public final class VNImageRequestHandler {
    private let handler: ImageRequestHandler

    public init(url imageURL: URL, options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(file: imageURL.path)
    }

    public init(url imageURL: URL, orientation: CGImagePropertyOrientation, options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(file: imageURL.path, orientation: orientation)
    }

    public init(data imageData: Data, options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(bytes: [UInt8](imageData))
    }

    public init(data imageData: Data, orientation: CGImagePropertyOrientation, options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(bytes: [UInt8](imageData), orientation: orientation)
    }

    public init(cvPixelBuffer pixelBuffer: CVPixelBuffer, options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(pixelBuffer: pixelBuffer)
    }

    public init(cvPixelBuffer pixelBuffer: CVPixelBuffer, orientation: CGImagePropertyOrientation,
                options: [VNImageOption: Any] = [:]) {
        handler = ImageRequestHandler(pixelBuffer: pixelBuffer, orientation: orientation)
    }

    /// Performs `requests` on the calling thread: sets each one's `results`
    /// and calls its completion handler, in order.
    ///
    /// - Throws: `VNError` for the first failure (the image, a model); every
    ///   request's completion handler is then called with it.
    public func perform(_ requests: [VNRequest]) throws {
        let coreML = requests.compactMap { $0 as? VNCoreMLRequest }
        let faces = requests.compactMap { $0 as? VNDetectFaceRectanglesRequest }
        guard coreML.count + faces.count == requests.count else {
            throw VNError(.invalidOperation, "modelc performs VNCoreMLRequest and VNDetectFaceRectanglesRequest only")
        }
        do {
            // The image is decoded once for the face requests and once for the models.
            if !faces.isEmpty {
                let upright = ImageRequestHandler(pixelBuffer: try handler.uprightImage())
                for request in faces {
                    request.results = try upright.perform(request.nativeRequest()).map(VNFaceObservation.init)
                }
            }
            if !coreML.isEmpty {
                let results = try handler.perform(try coreML.map { try $0.nativeRequest() })
                for (request, result) in zip(coreML, results) {
                    request.results = request.observations(result)
                }
            }
        } catch {
            let failure = (error as? ImageRequestError).map(VNError.init) ?? error
            for request in requests {
                request.results = nil
                request.completionHandler?(request, failure)
            }
            throw failure
        }
        for request in requests {
            request.completionHandler?(request, nil)
        }
    }
}

/// Performs requests on consecutive frames (`VNSequenceRequestHandler`), such
/// as a camera's BGRA buffers: the same request objects, one frame after
/// another, each frame's results replacing the last.
public final class VNSequenceRequestHandler {
    public init() {}

    /// Performs `requests` on `pixelBuffer`, as `VNImageRequestHandler.perform(_:)`.
    public func perform(_ requests: [VNRequest], on pixelBuffer: CVPixelBuffer) throws {
        try VNImageRequestHandler(cvPixelBuffer: pixelBuffer, options: [:]).perform(requests)
    }

    /// Performs `requests` on `pixelBuffer` turned upright by `orientation`.
    public func perform(_ requests: [VNRequest], on pixelBuffer: CVPixelBuffer, orientation: CGImagePropertyOrientation) throws {
        try VNImageRequestHandler(cvPixelBuffer: pixelBuffer, orientation: orientation, options: [:]).perform(requests)
    }

    /// Performs `requests` on the image file at `imageURL`.
    public func perform(_ requests: [VNRequest], onImageURL imageURL: URL) throws {
        try VNImageRequestHandler(url: imageURL, options: [:]).perform(requests)
    }
}
