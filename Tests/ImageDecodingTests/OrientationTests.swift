@testable import ImageDecoding
import ModelFeatures
import Testing

/// Every orientation turns a stored image upright as EXIF (and Vision's
/// `CGImagePropertyOrientation`) defines it.
@Suite struct OrientationTests {
    /// A 3×2 image whose six pixels all differ, so any wrong turn or mirror shows.
    static let stored = TestImage(width: 3, height: 2, bands: 3, samples: [
        10, 0, 0, 20, 0, 0, 30, 0, 0,
        40, 0, 0, 50, 0, 0, 60, 0, 0,
    ])

    /// The stored pixel shown at (x, y) of the upright image, from the EXIF definitions
    /// ("the 0th row is the visual right-hand side", …).
    static func storedPixel(shownAt x: Int, _ y: Int, orientation: ImageOrientation, width: Int, height: Int) -> (Int, Int) {
        switch orientation {
        case .up: (x, y)
        case .upMirrored: (width - 1 - x, y)
        case .down: (width - 1 - x, height - 1 - y)
        case .downMirrored: (x, height - 1 - y)
        case .leftMirrored: (y, x)
        case .right: (y, height - 1 - x)
        case .rightMirrored: (width - 1 - y, height - 1 - x)
        case .left: (width - 1 - y, x)
        }
    }

    static func check(_ image: PixelBuffer, orientation: ImageOrientation, tolerance: Int = 0,
                      stored: TestImage = stored, sourceLocation: SourceLocation = #_sourceLocation) {
        let (width, height) = orientation.swapsWidthAndHeight ? (stored.height, stored.width) : (stored.width, stored.height)
        #expect(image.width == width && image.height == height, "\(orientation)", sourceLocation: sourceLocation)
        guard image.width == width, image.height == height else { return }
        for y in 0..<height {
            for x in 0..<width {
                let (sx, sy) = storedPixel(shownAt: x, y, orientation: orientation, width: stored.width, height: stored.height)
                let index = (sy * stored.width + sx) * 3
                let expected = RGB(r: stored.samples[index], g: stored.samples[index + 1], b: stored.samples[index + 2])
                #expect(image.colour(x, y).isClose(to: expected, tolerance: tolerance),
                        "\(orientation) at (\(x), \(y)): \(image.colour(x, y)), expected \(expected)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test(arguments: ImageOrientation.allCases)
    func orientationGivenByTheCaller(orientation: ImageOrientation) throws {
        let path = try Self.stored.written(".png", name: "stored.png")
        Self.check(try ImageDecoder().decode(file: path, orientation: orientation), orientation: orientation)
    }

    @Test(arguments: ImageOrientation.allCases)
    func exifOrientationOfAJPEG(orientation: ImageOrientation) throws {
        // JPEG is lossy: blocks of 16×16 pixels, compared at their centres.
        let blocks = [RGB.red, .green, .blue, .yellow, .white, .black]
        let stored = TestImage.rgb(width: 48, height: 32) { x, y in blocks[(y / 16) * 3 + x / 16] }
        let path = try stored.written(".jpg[Q=98]", name: "exif.jpg", orientation: orientation.rawValue)
        let image = try ImageDecoder().decode(file: path)
        let (width, height) = orientation.swapsWidthAndHeight ? (32, 48) : (48, 32)
        #expect(image.width == width && image.height == height)
        for y in stride(from: 8, to: height, by: 16) {
            for x in stride(from: 8, to: width, by: 16) {
                let (sx, sy) = Self.storedPixel(shownAt: x, y, orientation: orientation, width: 48, height: 32)
                let expected = blocks[(sy / 16) * 3 + sx / 16]
                #expect(image.colour(x, y).isClose(to: expected, tolerance: 6), "\(orientation) at (\(x), \(y))")
            }
        }
    }

    @Test func aGivenOrientationOverridesTheEXIFOne() throws {
        let path = try Self.stored.written(".png", name: "stored.png")
        let bytes = try TestImage.rgb(width: 4, height: 2) { _, _ in .red }.encoded(".jpg", orientation: 6)
        #expect(try ImageDecoder().decode(bytes: bytes, name: "six.jpg").width == 2)
        #expect(try ImageDecoder().decode(bytes: bytes, name: "six.jpg", orientation: .up).width == 4)
        Self.check(try ImageDecoder().decode(file: path, orientation: .left), orientation: .left)
    }

    @Test func orientationComesBeforeTheRegionOfInterest() throws {
        // Upright after turning right, the stored top row is the right column.
        let stored = TestImage.rgb(width: 40, height: 20) { _, y in y < 10 ? .red : .blue }
        let path = try stored.written(".png", name: "turned.png")
        let right = NormalizedRect(x: 0.5, y: 0, width: 0.5, height: 1)
        let image = try ImageDecoder().decode(file: path, orientation: .right,
                                              fitting: ImageFitting(width: 4, height: 4, cropAndScale: .scaleFill, regionOfInterest: right))
        // The kernel reaches a little past the region into the image (blue): within 2 levels.
        #expect(image.colour(2, 2).isClose(to: .red, tolerance: 2), "\(image.colour(2, 2))")
    }
}
