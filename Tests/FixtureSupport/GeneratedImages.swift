import CVips
import Foundation
import ImageDecoding

/// Labelled image folders made for a test: each label a colour, every pixel
/// with noise, and a bright square in a random place.
public enum GeneratedImages {
    public static let colors: [String: (Int, Int, Int)] = [
        "red": (200, 50, 40), "green": (40, 180, 60), "blue": (40, 60, 200), "yellow": (210, 200, 40),
    ]

    /// Writes `count` images for each label into `directory/LABEL/`, as PNG
    /// (every third one as JPEG), `width` × `height`.
    public static func write(labels: [String], count: Int, into directory: String, seed: UInt64,
                      width: Int = 40, height: Int = 36) throws {
        var random = SplitMix(seed: seed)
        for label in labels {
            let folder = directory + "/" + label
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let color = colors[label] ?? (128, 128, 128)
            for index in 0..<count {
                let pixels = image(color: color, width: width, height: height, random: &random)
                let suffix = index % 3 == 2 ? ".jpg" : ".png"
                try encode(pixels, width: width, height: height, suffix: suffix).write(
                    to: URL(fileURLWithPath: folder + "/\(label)-\(index)\(suffix)"))
            }
        }
    }

    public static func image(color: (Int, Int, Int), width: Int, height: Int, random: inout SplitMix) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        let side = width / 3
        let left = Int(random.next() % UInt64(width - side)), top = Int(random.next() % UInt64(height - side))
        for y in 0..<height {
            for x in 0..<width {
                let inSquare = x >= left && x < left + side && y >= top && y < top + side
                for (c, base) in [color.0, color.1, color.2].enumerated() {
                    let noise = Int(random.next() % 61) - 30
                    let value = (inSquare ? min(255, base + 50) : base) + noise
                    pixels[(y * width + x) * 3 + c] = UInt8(max(0, min(255, value)))
                }
            }
        }
        return pixels
    }

    /// RGB (or, with `bands` 1, gray) pixels encoded by libvips (`.png` or
    /// `.jpg[Q=…]`), with an EXIF orientation recorded when given.
    public static func encode(_ pixels: [UInt8], width: Int, height: Int, suffix: String, bands: Int = 3,
                              orientation: UInt32? = nil) throws -> Data {
        _ = try ImageLibrary.threadsPerImage()  // starts libvips
        guard let image = pixels.withUnsafeBytes({ memory in
            modelc_vips_new_from_memory_copy(memory.baseAddress, memory.count, Int32(width), Int32(height), Int32(bands),
                                             VIPS_FORMAT_UCHAR)
        }) else { throw Failure(description: "vips_image_new_from_memory_copy failed") }
        defer { modelc_vips_unref(image) }
        if let orientation { modelc_vips_image_set_int(image, "orientation", Int32(orientation)) }
        var buffer: UnsafeMutableRawPointer?
        var size = 0
        guard modelc_vips_write_to_buffer(image, suffix, &buffer, &size) == 0, let bytes = buffer else {
            throw Failure(description: "encoding \(suffix) failed")
        }
        defer { modelc_vips_free(bytes) }
        return Data(bytes: bytes, count: size)
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }
}

/// A Gaussian blob on black, as `gaussian_blob` of Fixtures/detection.py
/// draws it for the detector fixture, whose box is centre ± 2 standard deviations.
public struct BlobScene: Sendable {
    /// The upright image's size.
    public var width: Int
    public var height: Int
    /// The blob's centre in continuous pixel coordinates (pixel i spans [i, i + 1)), origin at the top left.
    public var centreX: Double
    public var centreY: Double
    public var sdX: Double
    public var sdY: Double

    public init(width: Int, height: Int, centreX: Double, centreY: Double, sdX: Double, sdY: Double) {
        self.width = width
        self.height = height
        self.centreX = centreX
        self.centreY = centreY
        self.sdX = sdX
        self.sdY = sdY
    }

    /// The box the detector should find, in upright pixels from the top left.
    public var expectedBox: (x: Double, y: Double, width: Double, height: Double) {
        (centreX - 2 * sdX, centreY - 2 * sdY, 4 * sdX, 4 * sdY)
    }

    /// The gray level at upright pixel (x, y).
    public func value(_ x: Int, _ y: Int) -> UInt8 {
        let dx = (Double(x) + 0.5 - centreX) / sdX, dy = (Double(y) + 0.5 - centreY) / sdY
        return UInt8(max(0, min(255, (255 * Foundation.exp(-(dx * dx + dy * dy) / 2)).rounded())))
    }

    /// Gray pixels as stored for EXIF `orientation` (1–8), so that turning
    /// them upright shows the scene: (stored width, stored height, pixels).
    public func stored(orientation: UInt32) -> (width: Int, height: Int, pixels: [UInt8]) {
        let swaps = orientation >= 5
        let (storedWidth, storedHeight) = swaps ? (height, width) : (width, height)
        var pixels = [UInt8](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                // The stored pixel shown at upright (x, y), from the EXIF definitions.
                let (sx, sy): (Int, Int) = switch orientation {
                case 2: (storedWidth - 1 - x, y)
                case 3: (storedWidth - 1 - x, storedHeight - 1 - y)
                case 4: (x, storedHeight - 1 - y)
                case 5: (y, x)
                case 6: (y, storedHeight - 1 - x)
                case 7: (storedWidth - 1 - y, storedHeight - 1 - x)
                case 8: (storedWidth - 1 - y, x)
                default: (x, y)
                }
                pixels[sy * storedWidth + sx] = value(x, y)
            }
        }
        return (storedWidth, storedHeight, pixels)
    }
}
