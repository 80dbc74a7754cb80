import CVips
import Foundation
@testable import ImageDecoding
import ModelFeatures

/// Images made in the tests: pixels written out by libvips in a chosen format.
struct TestImage {
    var width: Int
    var height: Int
    /// 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA).
    var bands: Int
    /// Row-major samples, `bands` per pixel; 0–255, or 0–65535 when `sixteenBit`.
    var samples: [Int]
    var sixteenBit = false

    /// An RGB image of solid blocks: `colour(x, y)` for each pixel.
    static func rgb(width: Int, height: Int, _ colour: (Int, Int) -> RGB) -> TestImage {
        var samples: [Int] = []
        samples.reserveCapacity(width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let c = colour(x, y)
                samples += [c.r, c.g, c.b]
            }
        }
        return TestImage(width: width, height: height, bands: 3, samples: samples)
    }

    /// Encoded as `suffix` (".png", ".jpg[Q=95]", ".webp[lossless]", ".tif"), with
    /// an EXIF orientation recorded when given.
    func encoded(_ suffix: String, orientation: UInt32? = nil) throws -> [UInt8] {
        Vips.ensureStartedForTests()
        var image: VipsImageHandle
        if sixteenBit {
            let values = samples.map { UInt16($0) }
            image = try values.withUnsafeBytes { memory in
                try Self.handle(memory, width, height, bands, VIPS_FORMAT_USHORT)
            }
            let space = bands <= 2 ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_RGB16
            image = try image.applying { modelc_vips_copy_interpretation($0, $1, space) }
        } else {
            let values = samples.map { UInt8($0) }
            image = try values.withUnsafeBytes { memory in
                try Self.handle(memory, width, height, bands, VIPS_FORMAT_UCHAR)
            }
            let space = bands <= 2 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB
            image = try image.applying { modelc_vips_copy_interpretation($0, $1, space) }
        }
        if let orientation {
            modelc_vips_image_set_int(image.pointer, "orientation", Int32(orientation))
        }
        var buffer: UnsafeMutableRawPointer?
        var size = 0
        guard modelc_vips_write_to_buffer(image.pointer, suffix, &buffer, &size) == 0, let buffer else {
            throw VipsFailure(message: Vips.takeError())
        }
        defer { modelc_vips_free(buffer) }
        return [UInt8](UnsafeRawBufferPointer(start: buffer, count: size))
    }

    /// Written to a fresh file named `name` in a temporary directory; returns its path.
    func written(_ suffix: String, name: String, orientation: UInt32? = nil) throws -> String {
        try TestFiles.write(encoded(suffix, orientation: orientation), name: name)
    }

    private static func handle(_ memory: UnsafeRawBufferPointer, _ width: Int, _ height: Int, _ bands: Int,
                               _ format: VipsBandFormat) throws -> VipsImageHandle {
        guard let base = memory.baseAddress,
              let image = modelc_vips_new_from_memory_copy(base, memory.count, Int32(width), Int32(height), Int32(bands), format)
        else { throw VipsFailure(message: Vips.takeError()) }
        return VipsImageHandle(image)
    }
}

extension Vips {
    static func ensureStartedForTests() {
        _ = try? ensureStarted()
    }
}

struct RGB: Equatable, CustomStringConvertible {
    var r: Int
    var g: Int
    var b: Int

    static let red = RGB(r: 220, g: 30, b: 30)
    static let green = RGB(r: 30, g: 200, b: 40)
    static let blue = RGB(r: 20, g: 40, b: 210)
    static let yellow = RGB(r: 240, g: 220, b: 20)
    static let black = RGB(r: 0, g: 0, b: 0)
    static let white = RGB(r: 255, g: 255, b: 255)

    var description: String { "(\(r), \(g), \(b))" }

    func isClose(to other: RGB, tolerance: Int) -> Bool {
        abs(r - other.r) <= tolerance && abs(g - other.g) <= tolerance && abs(b - other.b) <= tolerance
    }
}

extension PixelBuffer {
    /// The colour at (x, y), top row first.
    func colour(_ x: Int, _ y: Int) -> RGB {
        let offset = y * bytesPerRow + x * pixelFormat.bytesPerPixel
        let (red, green, blue) = pixelFormat.rgbOffsets
        return RGB(r: Int(bytes[offset + red]), g: Int(bytes[offset + green]), b: Int(bytes[offset + blue]))
    }

    /// The byte of `channel` at (x, y).
    func byte(_ x: Int, _ y: Int, _ channel: Int) -> UInt8 {
        bytes[y * bytesPerRow + x * pixelFormat.bytesPerPixel + channel]
    }
}

enum TestFiles {
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-image-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TestFiles.directory) }
        return url
    }()

    /// Writes `bytes` to a fresh file; returns its path.
    static func write(_ bytes: [UInt8], name: String) throws -> String {
        let url = directory.appendingPathComponent(UUID().uuidString + "-" + name)
        try Data(bytes).write(to: url)
        return url.path
    }
}
