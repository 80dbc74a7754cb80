/// Why an image could not be decoded, cropped or scaled.
public enum ImageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file could not be opened or read (`reason` is the system's).
    case unreadable(file: String, reason: String)
    /// The bytes are not an image in a format modelc decodes.
    case unsupportedFormat(file: String)
    /// The image is damaged or truncated, or decoding it failed.
    case damaged(file: String, reason: String)
    /// A region of interest outside the unit square, or empty.
    case invalidRegionOfInterest(NormalizedRect)
    /// A target size that is not positive.
    case invalidSize(width: Int, height: Int)
    /// libvips could not be started.
    case libraryUnavailable(reason: String)

    public var description: String {
        switch self {
        case .unreadable(let file, let reason):
            "\(file): cannot read the image: \(reason)"
        case .unsupportedFormat(let file):
            "\(file): not an image in a format modelc decodes (JPEG, PNG, WebP, TIFF, HEIF, GIF)"
        case .damaged(let file, let reason):
            "\(file): damaged or unsupported image: \(reason)"
        case .invalidRegionOfInterest(let rect):
            "region of interest (x \(rect.x), y \(rect.y), width \(rect.width), height \(rect.height)) must be a non-empty rectangle within (0, 0, 1, 1)"
        case .invalidSize(let width, let height):
            "target size \(width)×\(height) must be at least 1×1"
        case .libraryUnavailable(let reason):
            "libvips could not be started: \(reason)"
        }
    }
}
