import CFaces
#if canImport(Glibc)
import Glibc
#endif
import ModelFeatures

/// A face found in an image.
public struct DetectedFace: Sendable, Equatable {
    /// The box in the pixels of the image searched, origin at the top left.
    public var left: Double
    public var top: Double
    public var width: Double
    public var height: Double
    /// dlib's detection score (the linear SVM's margin): above 0 at dlib's
    /// own threshold, about 1 to 3 for clear frontal faces.
    public var score: Double
    /// Which way the face looks, from which of dlib's five filters found it.
    public var pose: Pose

    /// The five poses dlib's frontal detector has a filter for.
    public enum Pose: Int, Sendable, CaseIterable {
        case ahead = 0
        /// Turned towards the image's left.
        case turnedLeft = 1
        /// Turned towards the image's right.
        case turnedRight = 2
        /// Looking ahead, tilted counterclockwise in the image.
        case tiltedCounterclockwise = 3
        /// Looking ahead, tilted clockwise in the image.
        case tiltedClockwise = 4

        /// The head's yaw in radians, coarse (0 or ±π/4): negative when turned towards the image's left.
        public var yaw: Double {
            switch self {
            case .turnedLeft: -Double.pi / 4
            case .turnedRight: Double.pi / 4
            default: 0
            }
        }

        /// The face's roll in radians, coarse (0 or ±π/4): positive when tilted counterclockwise.
        public var roll: Double {
            switch self {
            case .tiltedCounterclockwise: Double.pi / 4
            case .tiltedClockwise: -Double.pi / 4
            default: 0
            }
        }
    }

    /// The score as a confidence from 0 to 1: 1 − e^(−score), so 0 at dlib's
    /// threshold, 0.63 at 1 and 0.95 at 3.
    public var confidence: Double { score > 0 ? 1 - Glibc.exp(-score) : 0 }
}

/// Why faces could not be detected. `description` is one line.
public enum FaceDetectionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The detector library (libModelcFaces.so, or dlib under it) could not be opened.
    case libraryUnavailable(reason: String)
    /// The detector failed on an image.
    case failed(image: String, reason: String)

    public var description: String {
        switch self {
        case .libraryUnavailable(let reason):
            if reason.contains("libdlib") {
                return "face detection needs dlib: install Debian's libdlib19.1 (apt-get install libdlib19.1): \(reason)"
            }
            return "face detection needs libModelcFaces.so (built with modelc, next to it; set MODELC_FACES_LIBRARY "
                + "to its path) and Debian's libdlib19.1: \(reason)"
        case .failed(let image, let reason):
            return "\(image): face detection failed: \(reason)"
        }
    }
}

/// dlib's frontal face detector (HOG features and linear SVMs; its model is
/// built into dlib), opened at the first call: commands that find no faces
/// never load it.
///
/// Safe to use from many threads at once.
public struct FaceDetector: Sendable {
    /// Faces scoring below this are not reported. dlib's own threshold is 0;
    /// 0.1 leaves out the weakest guesses (on scikit-image's portrait the one
    /// false face scored 0.06, true faces 1 to 3).
    public var minimumScore: Double
    /// How many times the image is doubled before searching: dlib's filters
    /// are 80×80, so at 0 faces smaller than about 80 pixels are missed; each
    /// doubling halves that and costs about 4× the time.
    public var upsampling: Int

    public init(minimumScore: Double = 0.1, upsampling: Int = 0) {
        self.minimumScore = minimumScore
        self.upsampling = upsampling
    }

    /// Whether the detector library can be opened; the reason when not.
    public static func availability() -> FaceDetectionError? {
        modelc_faces_load().map { .libraryUnavailable(reason: String(cString: $0)) }
    }

    /// The dlib version the detector was built with, loading it if needed; `nil` when unavailable.
    public static var version: String? {
        modelc_faces_library_version().map { String(cString: $0) }
    }

    /// The faces in `image` (any layout; searched in gray levels), most confident first.
    ///
    /// - Throws: `.libraryUnavailable` when the detector cannot be opened,
    ///   `.failed` naming `name` when dlib fails.
    public func faces(in image: PixelBuffer, name: String = "pixel buffer") throws(FaceDetectionError) -> [DetectedFace] {
        if let unavailable = Self.availability() { throw unavailable }
        let gray = Self.grayLevels(image)
        var found: UnsafeMutablePointer<modelc_face>?
        var reason = [CChar](repeating: 0, count: 512)
        let count = gray.withUnsafeBufferPointer { pixels in
            modelc_faces_run(pixels.baseAddress, image.width, image.height, image.width, minimumScore,
                             Int32(max(0, upsampling)), &found, &reason, reason.count)
        }
        guard count >= 0 else {
            throw .failed(image: name, reason: String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        defer { modelc_faces_release(found) }
        guard let found else { return [] }
        let faces = (0..<Int(count)).map { index in
            let face = found[index]
            return DetectedFace(left: face.left, top: face.top, width: face.right - face.left, height: face.bottom - face.top,
                                score: face.score, pose: DetectedFace.Pose(rawValue: Int(face.filter)) ?? .ahead)
        }
        return faces.sorted { $0.score > $1.score }
    }

    /// Rec. 601 luma of each pixel, rows packed.
    static func grayLevels(_ image: PixelBuffer) -> [UInt8] {
        var gray = [UInt8](repeating: 0, count: image.width * image.height)
        let format = image.pixelFormat
        let step = format.bytesPerPixel
        let (red, green, blue) = format.rgbOffsets
        for y in 0..<image.height {
            var source = y * image.bytesPerRow
            for x in 0..<image.width {
                if format == .gray {
                    gray[y * image.width + x] = image.bytes[source]
                } else {
                    let luma = 0.299 * Double(image.bytes[source + red]) + 0.587 * Double(image.bytes[source + green])
                        + 0.114 * Double(image.bytes[source + blue])
                    gray[y * image.width + x] = UInt8(min(255, luma.rounded()))
                }
                source += step
            }
        }
        return gray
    }
}
