/// An 8-bit image held in memory: a camera frame or a decoded picture
/// (Core ML's `CVPixelBuffer` image feature).
public struct PixelBuffer: Sendable, Equatable {
    /// How the channels of one pixel are laid out, byte by byte.
    public enum PixelFormat: String, Sendable, CaseIterable {
        case bgra, rgba, argb, rgb, gray

        /// Bytes per pixel.
        public var bytesPerPixel: Int {
            switch self {
            case .bgra, .rgba, .argb: 4
            case .rgb: 3
            case .gray: 1
            }
        }

        /// The byte offsets of red, green and blue within a pixel (all 0 for gray).
        public var rgbOffsets: (red: Int, green: Int, blue: Int) {
            switch self {
            case .bgra: (2, 1, 0)
            case .rgba, .rgb: (0, 1, 2)
            case .argb: (1, 2, 3)
            case .gray: (0, 0, 0)
            }
        }
    }

    public let width: Int
    public let height: Int
    public let pixelFormat: PixelFormat
    /// Bytes from the start of one row to the next (≥ width × bytes per pixel).
    public let bytesPerRow: Int
    /// `height` rows of `bytesPerRow` bytes.
    public let bytes: [UInt8]

    /// An image over `bytes`; `nil` when the sizes do not fit together.
    public init?(width: Int, height: Int, pixelFormat: PixelFormat, bytesPerRow: Int? = nil, bytes: [UInt8]) {
        let rowBytes = bytesPerRow ?? width * pixelFormat.bytesPerPixel
        guard width > 0, height > 0, rowBytes >= width * pixelFormat.bytesPerPixel,
              bytes.count >= rowBytes * (height - 1) + width * pixelFormat.bytesPerPixel
        else { return nil }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.bytesPerRow = rowBytes
        self.bytes = bytes
    }
}
