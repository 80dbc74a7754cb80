import CVips
@testable import ImageDecoding
import ModelFeatures
import Testing

/// Crop, scale and region of interest against the exact geometry, computed
/// here on its own: the fitted image is the real-valued source window of the
/// upright image scaled to the target (Core Image's transforms), so a linear
/// ramp comes out as the ramp's value at each output pixel centre mapped
/// back, and a box maps back to exactly that window.
@Suite struct ExactGeometryTests {
    /// The source window of a fitting in upright pixels (top-left origin),
    /// for centerCrop and scaleFill.
    static func window(_ fitting: ImageFitting, width: Int, height: Int) -> (x: Double, y: Double, width: Double, height: Double) {
        let roi = fitting.regionOfInterest
        let (left, top) = (roi.x * Double(width), (1 - roi.y - roi.height) * Double(height))
        let (w, h) = (roi.width * Double(width), roi.height * Double(height))
        guard fitting.cropAndScale == .centerCrop else { return (left, top, w, h) }
        let scale = max(Double(fitting.width) / w, Double(fitting.height) / h)
        let (cropWidth, cropHeight) = (Double(fitting.width) / scale, Double(fitting.height) / scale)
        return (left + (w - cropWidth) / 2, top + (h - cropHeight) / 2, cropWidth, cropHeight)
    }

    /// An RGB ramp: red rises `slopeX` per pixel across, green `slopeY` down,
    /// blue is flat; pixel (i, j) holds the ramp's value at its centre,
    /// rounded.
    struct Ramp: Sendable, CustomTestStringConvertible {
        var testDescription: String { "\(width)×\(height) ramp" }
        var width: Int
        var height: Int
        var slopeX: Double
        var slopeY: Double
        // Whole numbers at the pixel centres where the slope is a whole
        // number (no rounding ties in the source).
        var red0 = 10.0
        var green0 = 19.5

        func red(_ x: Double) -> Double { red0 + slopeX * x }
        func green(_ y: Double) -> Double { green0 + slopeY * y }

        var buffer: PixelBuffer? {
            let reds = (0..<width).map { UInt8(red(Double($0) + 0.5).rounded()) }
            var bytes = [UInt8](repeating: 90, count: width * height * 3)
            bytes.withUnsafeMutableBufferPointer { bytes in
                for j in 0..<height {
                    let green = UInt8(green(Double(j) + 0.5).rounded())
                    var index = j * width * 3
                    for red in reds {
                        bytes[index] = red
                        bytes[index + 1] = green
                        index += 3
                    }
                }
            }
            return PixelBuffer(width: width, height: height, pixelFormat: .rgb, bytes: bytes)
        }
    }

    static let rampCases: [(Ramp, ImageFitting)] = {
        let roi = NormalizedRect(x: 0.1037, y: 0.2113, width: 0.6101, height: 0.5719)
        let small = Ramp(width: 256, height: 192, slopeX: 1, slopeY: 1, red0: -0.5)
        let odd = Ramp(width: 255, height: 191, slopeX: 1, slopeY: 1, red0: -0.5)
        let large = Ramp(width: 4000, height: 3000, slopeX: 0.06, slopeY: 0.075)
        let tiny = Ramp(width: 50, height: 40, slopeX: 4, slopeY: 5)
        var cases: [(Ramp, ImageFitting)] = []
        for mode in [CropAndScale.centerCrop, .scaleFill] {
            // 256 → 128 stretched would put every other centre exactly halfway
            // between two byte values (a rounding tie): 120 across instead.
            let smallTarget = mode == .centerCrop ? (128, 128) : (120, 128)
            for region in [NormalizedRect.full, roi] {
                cases += [(small, ImageFitting(width: smallTarget.0, height: smallTarget.1, cropAndScale: mode, regionOfInterest: region)),
                          (odd, ImageFitting(width: 97, height: 61, cropAndScale: mode, regionOfInterest: region))]
            }
            cases += [(large, ImageFitting(width: 224, height: 224, cropAndScale: mode)),
                      (tiny, ImageFitting(width: 128, height: 128, cropAndScale: mode))]
        }
        return cases
    }()

    /// Each output pixel whose kernel stays inside the image holds the
    /// ramp's value at its centre mapped back (up to the rounding to a byte).
    @Test(arguments: rampCases)
    func aRampComesOutAtTheExactlyMappedPoints(ramp: Ramp, fitting: ImageFitting) throws {
        let buffer = try #require(ramp.buffer)
        let fitted = try ImageDecoder().fit(buffer, fitting: fitting)
        let window = Self.window(fitting, width: ramp.width, height: ramp.height)
        let (scaleX, scaleY) = (window.width / Double(fitting.width), window.height / Double(fitting.height))
        let (reachX, reachY) = (3 * max(1, scaleX), 3 * max(1, scaleY))
        var (largest, sum, count) = (0.0, 0.0, 0)
        var signed = (red: 0.0, green: 0.0)
        for v in 0..<fitting.height {
            let y = window.y + (Double(v) + 0.5) * scaleY
            guard y - reachY >= 0, y + reachY <= Double(ramp.height) else { continue }
            for u in 0..<fitting.width {
                let x = window.x + (Double(u) + 0.5) * scaleX
                guard x - reachX >= 0, x + reachX <= Double(ramp.width) else { continue }
                let colour = fitted.colour(u, v)
                let errors = (Double(colour.r) - ramp.red(x), Double(colour.g) - ramp.green(y))
                largest = max(largest, abs(errors.0), abs(errors.1))
                signed.red += errors.0
                signed.green += errors.1
                sum += abs(errors.0) + abs(errors.1)
                count += 1
            }
        }
        try #require(count > 0)
        let mean = sum / Double(2 * count)
        let bias = (signed.red / Double(count), signed.green / Double(count))
        // Rounding to a byte alone is up to 0.5; the source's own rounding and
        // the kernel's moments add a little.
        #expect(largest <= 0.6 && mean <= 0.3 && abs(bias.0) <= 0.1 && abs(bias.1) <= 0.1,
                "\(ramp.width)×\(ramp.height) → \(fitting.width)×\(fitting.height) \(fitting.cropAndScale) \(fitting.regionOfInterest): largest \(largest), mean \(mean), bias \(bias) over \(count) pixels")
    }

    struct BoxCase: Sendable, CustomTestStringConvertible {
        var width: Int
        var height: Int
        var targetWidth: Int
        var targetHeight: Int
        var testDescription: String { "\(width)×\(height) → \(targetWidth)×\(targetHeight)" }
    }

    /// A gray image of `width` × `height` (vertical stripes) encoded as `suffix`.
    static func stripes(width: Int, height: Int, _ suffix: String, orientation: UInt32?) throws -> [UInt8] {
        let row = (0..<width).map { $0 * 7 % 256 }
        let image = TestImage(width: width, height: height, bands: 1, samples: Array((0..<height).map { _ in row }.joined()))
        return try image.encoded(suffix, orientation: orientation)
    }

    /// A box given in the model's coordinates maps back to the exact window
    /// within 0.1 pixel: PNGs through libvips, JPEGs through the direct path
    /// and through libvips (turned by EXIF), shrunk while decoded, sizes not
    /// a multiple of 8, a region of interest off the pixel grid.
    @Test(arguments: [BoxCase(width: 256, height: 192, targetWidth: 128, targetHeight: 128),
                      BoxCase(width: 4000, height: 3000, targetWidth: 224, targetHeight: 224),
                      BoxCase(width: 255, height: 191, targetWidth: 97, targetHeight: 61),
                      BoxCase(width: 50, height: 40, targetWidth: 128, targetHeight: 128),
                      BoxCase(width: 4001, height: 2999, targetWidth: 300, targetHeight: 200)])
    func boxesMapBackToTheExactGeometry(size: BoxCase) throws {
        let (width, height) = (size.width, size.height)
        let regions = [NormalizedRect.full, NormalizedRect(x: 0.1037, y: 0.2113, width: 0.6101, height: 0.5719)]
        let files: [(String, UInt32?)] = width * height > 1_000_000
            ? [(".jpg[Q=80]", nil), (".jpg[Q=80]", 3)] : [(".png", nil), (".jpg[Q=90]", nil), (".jpg[Q=90]", 3)]
        for (suffix, orientation) in files {
            let bytes = try Self.stripes(width: width, height: height, suffix, orientation: orientation)
            for region in regions {
                for mode in [CropAndScale.centerCrop, .scaleFill] {
                    let fitting = ImageFitting(width: size.targetWidth, height: size.targetHeight, cropAndScale: mode,
                                               regionOfInterest: region)
                    let fitted = try bytes.withUnsafeBytes {
                        try ImageDecoder(pixelFormat: .gray).decodeFitted(bytes: $0, name: "stripes", fitting: fitting)
                    }
                    let window = Self.window(fitting, width: width, height: height)
                    for box in [(0.0, 0.0, 1.0, 1.0), (0.13, 0.27, 0.41, 0.52)] {
                        let found = fitted.uprightRect(fromTopLeftX: box.0, y: box.1, width: box.2, height: box.3)
                            .topLeftPixels(width: width, height: height)
                        let expected = (x: window.x + box.0 * window.width, y: window.y + box.1 * window.height,
                                        width: box.2 * window.width, height: box.3 * window.height)
                        let errors = [found.x - expected.x, found.y - expected.y, found.width - expected.width,
                                      found.height - expected.height]
                        #expect(errors.allSatisfy { abs($0) <= 0.1 },
                                "\(size.testDescription) \(suffix) \(orientation ?? 1) \(mode) \(region): box \(found), expected \(expected)")
                    }
                }
            }
        }
    }
}
