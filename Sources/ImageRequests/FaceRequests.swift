import FaceDetection
import ImageDecoding
import ModelFeatures

/// A face found in an image (Vision's `VNFaceObservation`).
public struct FaceObservation: Sendable, Equatable {
    /// Where the face is: normalized, origin at the lower left of the upright
    /// image (the whole image, also when a region of interest was searched).
    public var boundingBox: NormalizedRect
    /// 0…1: 1 − e^(−score) of dlib's detection score.
    public var confidence: Float
    /// The face's roll (tilt in the image) in radians, coarse: 0 or ±π/4,
    /// positive counterclockwise.
    public var roll: Double?
    /// The head's yaw in radians, coarse: 0 or ±π/4, negative when turned
    /// towards the image's left.
    public var yaw: Double?

    public init(boundingBox: NormalizedRect, confidence: Float, roll: Double? = nil, yaw: Double? = nil) {
        self.boundingBox = boundingBox
        self.confidence = confidence
        self.roll = roll
        self.yaw = yaw
    }

    /// The box brought within the unit square (faces at the edge may reach
    /// past it), as a region of interest for a request on the face.
    public var regionOfInterest: NormalizedRect {
        let left = min(max(boundingBox.x, 0), 1), bottom = min(max(boundingBox.y, 0), 1)
        let right = min(max(boundingBox.x + boundingBox.width, 0), 1)
        let top = min(max(boundingBox.y + boundingBox.height, 0), 1)
        return NormalizedRect(x: left, y: bottom, width: max(right - left, 1e-6), height: max(top - bottom, 1e-6))
    }
}

/// Finds the faces in an image (Vision's `VNDetectFaceRectanglesRequest`),
/// with dlib's frontal face detector, opened at the first request.
public struct FaceRectanglesRequest: Sendable {
    public var detector: FaceDetector
    /// The part of the upright image to search, origin at the lower left.
    public var regionOfInterest: NormalizedRect
    /// Images whose longer side is above this are shrunk to it first (the
    /// detector's time grows with the pixels; faces under about 80 pixels of
    /// the shrunk image are missed).
    public var maximumSide: Int

    public init(detector: FaceDetector = FaceDetector(), regionOfInterest: NormalizedRect = .full, maximumSide: Int = 1600) {
        self.detector = detector
        self.regionOfInterest = regionOfInterest
        self.maximumSide = maximumSide
    }

    /// The faces in an upright image, boxes normalized to the whole image.
    func faces(in upright: PixelBuffer, name: String) throws(ImageRequestError) -> [FaceObservation] {
        guard regionOfInterest.isValid else { throw .image(.invalidRegionOfInterest(regionOfInterest)) }
        let area = regionOfInterest.pixelSize(width: upright.width, height: upright.height)
        let scale = min(1, Double(maximumSide) / Double(max(area.width, area.height)))
        let width = max(1, Int((Double(area.width) * scale).rounded()))
        let height = max(1, Int((Double(area.height) * scale).rounded()))
        let searched: PixelBuffer
        do throws(ImageError) {
            if area.width == upright.width, area.height == upright.height, scale == 1 {
                searched = upright
            } else {
                searched = try ImageDecoder(pixelFormat: .gray).fit(upright, fitting: ImageFitting(
                    width: width, height: height, cropAndScale: .scaleFill, regionOfInterest: regionOfInterest))
            }
        } catch {
            throw .image(error)
        }
        let found: [DetectedFace]
        do { found = try detector.faces(in: searched, name: name) } catch { throw .faces(error) }
        let fitted = FittedImage(image: searched, fitting: ImageFitting(width: searched.width, height: searched.height,
                                                                       cropAndScale: .scaleFill, regionOfInterest: regionOfInterest),
                                 sourceWidth: upright.width, sourceHeight: upright.height,
                                 uprightWidth: upright.width, uprightHeight: upright.height)
        return found.map { face in
            let box = fitted.uprightRect(fromTopLeftX: face.left / Double(searched.width), y: face.top / Double(searched.height),
                                         width: face.width / Double(searched.width), height: face.height / Double(searched.height))
            return FaceObservation(boundingBox: box, confidence: Float(face.confidence), roll: face.pose.roll, yaw: face.pose.yaw)
        }
    }
}

extension ImageRequestHandler {
    /// Finds the faces in the handler's image, most confident first.
    ///
    /// - Throws: `.image` when it cannot be decoded, `.faces` when the
    ///   detector cannot be opened or fails.
    public func perform(_ request: FaceRectanglesRequest) throws(ImageRequestError) -> [FaceObservation] {
        try request.faces(in: uprightImage(), name: name)
    }

    /// The image turned upright at its own size (RGB), for requests that
    /// search the whole image, and to share one decoding between requests.
    public func uprightImage() throws(ImageRequestError) -> PixelBuffer {
        do throws(ImageError) {
            switch source {
            case .file(let path):
                return try ImageDecoder(pixelFormat: .rgb).decode(file: path, orientation: orientation)
            case .bytes(let bytes, let name):
                return try ImageDecoder(pixelFormat: .rgb).decode(bytes: bytes, name: name, orientation: orientation)
            case .pixelBuffer(let buffer):
                if (orientation ?? .up) == .up { return buffer }
                return try ImageDecoder(pixelFormat: buffer.pixelFormat == .gray ? .gray : .rgb)
                    .fit(buffer, orientation: orientation ?? .up)
            }
        } catch {
            throw .image(error)
        }
    }
}
