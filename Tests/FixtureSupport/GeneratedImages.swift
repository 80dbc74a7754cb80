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

    /// RGB pixels encoded by libvips (`.png` or `.jpg`).
    public static func encode(_ pixels: [UInt8], width: Int, height: Int, suffix: String) throws -> Data {
        _ = try ImageLibrary.threadsPerImage()  // starts libvips
        guard let image = pixels.withUnsafeBytes({ memory in
            modelc_vips_new_from_memory_copy(memory.baseAddress, memory.count, Int32(width), Int32(height), 3, VIPS_FORMAT_UCHAR)
        }) else { throw Failure(description: "vips_image_new_from_memory_copy failed") }
        defer { modelc_vips_unref(image) }
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
