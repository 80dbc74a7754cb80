@testable import ImageDecoding
import ModelFeatures
import Testing

/// Crop and scale and regions of interest as Vision defines them, on images
/// of solid blocks whose colours are checked away from the block edges.
@Suite struct CropAndScaleTests {
    /// 300×100: red, green, blue squares left to right.
    static let wide = TestImage.rgb(width: 300, height: 100) { x, _ in [RGB.red, .green, .blue][x / 100] }
    /// 100×300: red, green, blue squares top to bottom.
    static let tall = TestImage.rgb(width: 100, height: 300) { _, y in [RGB.red, .green, .blue][y / 100] }
    /// 100×100: red top left, green top right, blue bottom left, yellow bottom right.
    static let square = TestImage.rgb(width: 100, height: 100) { x, y in [RGB.red, .green, .blue, .yellow][(y / 50) * 2 + x / 50] }

    static func fitted(_ image: TestImage, _ fitting: ImageFitting) throws -> PixelBuffer {
        let path = try image.written(".png", name: "blocks.png")
        let result = try ImageDecoder().decode(file: path, fitting: fitting)
        #expect(result.width == fitting.width && result.height == fitting.height)
        return result
    }

    static func expect(_ image: PixelBuffer, _ points: [(Int, Int, RGB)], sourceLocation: SourceLocation = #_sourceLocation) {
        for (x, y, colour) in points {
            #expect(image.colour(x, y) == colour, "at (\(x), \(y)): \(image.colour(x, y)), expected \(colour)",
                    sourceLocation: sourceLocation)
        }
    }

    @Test func wide() throws {
        // centerCrop: 150×50, the middle 50 columns: all green.
        Self.expect(try Self.fitted(Self.wide, ImageFitting(width: 50, height: 50, cropAndScale: .centerCrop)),
                    [(10, 10, .green), (25, 25, .green), (40, 40, .green)])
        // scaleFit: 50×17 at row 16, black above and below.
        Self.expect(try Self.fitted(Self.wide, ImageFitting(width: 50, height: 50, cropAndScale: .scaleFit)),
                    [(25, 5, .black), (8, 24, .red), (25, 24, .green), (42, 24, .blue), (25, 45, .black)])
        // scaleFill: three stretched columns.
        Self.expect(try Self.fitted(Self.wide, ImageFitting(width: 50, height: 50, cropAndScale: .scaleFill)),
                    [(8, 5, .red), (25, 25, .green), (42, 45, .blue)])
    }

    @Test func tall() throws {
        Self.expect(try Self.fitted(Self.tall, ImageFitting(width: 50, height: 50, cropAndScale: .centerCrop)),
                    [(10, 10, .green), (25, 25, .green), (40, 40, .green)])
        Self.expect(try Self.fitted(Self.tall, ImageFitting(width: 50, height: 50, cropAndScale: .scaleFit)),
                    [(5, 25, .black), (24, 8, .red), (24, 25, .green), (24, 42, .blue), (45, 25, .black)])
        Self.expect(try Self.fitted(Self.tall, ImageFitting(width: 50, height: 50, cropAndScale: .scaleFill)),
                    [(5, 8, .red), (25, 25, .green), (45, 42, .blue)])
    }

    @Test func squareIntoAWideTarget() throws {
        // centerCrop: 40×40, rows 10–29 kept.
        Self.expect(try Self.fitted(Self.square, ImageFitting(width: 40, height: 20, cropAndScale: .centerCrop)),
                    [(10, 4, .red), (30, 4, .green), (10, 15, .blue), (30, 15, .yellow)])
        // scaleFit: 20×20 at column 10.
        Self.expect(try Self.fitted(Self.square, ImageFitting(width: 40, height: 20, cropAndScale: .scaleFit)),
                    [(4, 10, .black), (14, 4, .red), (25, 4, .green), (14, 15, .blue), (25, 15, .yellow), (35, 10, .black)])
        Self.expect(try Self.fitted(Self.square, ImageFitting(width: 40, height: 20, cropAndScale: .scaleFill)),
                    [(10, 5, .red), (30, 5, .green), (10, 15, .blue), (30, 15, .yellow)])
    }

    @Test func upscaling() throws {
        Self.expect(try Self.fitted(Self.square, ImageFitting(width: 300, height: 300, cropAndScale: .scaleFill)),
                    [(60, 60, .red), (240, 60, .green), (60, 240, .blue), (240, 240, .yellow)])
    }

    /// Enlarging one axis and shrinking the other keeps both centred: an
    /// edge halfway down stays halfway down (vips_resize alone moved it by
    /// half a row), and one halfway across stays halfway across.
    @Test func enlargingOneAxisMovesNeitherAxis() throws {
        // 16×64: red above row 32, blue below → 32×32: 2× across, ½ down.
        let halves = TestImage.rgb(width: 16, height: 64) { _, y in y < 32 ? .red : .blue }
        let fitted = try Self.fitted(halves, ImageFitting(width: 32, height: 32, cropAndScale: .scaleFill))
        let column = (0..<32).map { fitted.colour(5, $0).r }
        let sum = RGB.red.r + RGB.blue.r
        // Mirror rows hold mirror values: the edge sits exactly between rows 15 and 16.
        #expect(zip(column.prefix(16), column.suffix(16).reversed()).allSatisfy { abs($0 + $1 - sum) <= 1 }, "red by row: \(column)")
        // Lanczos 3 at ½ reaches 6 source rows each way: output row 12 (source
        // centre 24.5) is the last the edge at source row 32 cannot touch.
        #expect(column.prefix(13).allSatisfy { $0 == RGB.red.r } && column.suffix(13).allSatisfy { $0 == RGB.blue.r }, "red by row: \(column)")
        // 8×8: red left of column 4 → 32×32, 4× both ways: the edge between columns 15 and 16.
        let sides = TestImage.rgb(width: 8, height: 8) { x, _ in x < 4 ? .red : .blue }
        let enlarged = try Self.fitted(sides, ImageFitting(width: 32, height: 32, cropAndScale: .scaleFill))
        let row = (0..<32).map { enlarged.colour($0, 5).r }
        // Lanczos 3 rings at the edge; a ring clipped at 0 has no mirror.
        #expect(zip(row.prefix(16), row.suffix(16).reversed()).allSatisfy { $0 == 0 || $1 == 0 || abs($0 + $1 - sum) <= 1 },
                "red by column: \(row)")
    }

    @Test func regionsOfInterestHaveTheirOriginAtTheLowerLeft() throws {
        let corners: [(NormalizedRect, RGB)] = [
            (NormalizedRect(x: 0, y: 0, width: 0.5, height: 0.5), .blue),
            (NormalizedRect(x: 0.5, y: 0, width: 0.5, height: 0.5), .yellow),
            (NormalizedRect(x: 0, y: 0.5, width: 0.5, height: 0.5), .red),
            (NormalizedRect(x: 0.5, y: 0.5, width: 0.5, height: 0.5), .green),
        ]
        for (region, colour) in corners {
            for option in CropAndScale.allCases {
                let image = try Self.fitted(Self.square, ImageFitting(width: 16, height: 16, cropAndScale: option, regionOfInterest: region))
                Self.expect(image, [(3, 3, colour), (8, 8, colour), (12, 12, colour)])
            }
        }
    }

    @Test func aRegionOfInterestComesBeforeCropAndScale() throws {
        // The left two thirds of the wide image (200×100), centre-cropped: the boundary red|green in the middle.
        let region = NormalizedRect(x: 0, y: 0, width: 2.0 / 3.0, height: 1)
        Self.expect(try Self.fitted(Self.wide, ImageFitting(width: 20, height: 20, cropAndScale: .centerCrop, regionOfInterest: region)),
                    [(4, 10, .red), (16, 10, .green)])
        // Its lower half, scaled to fit 40×40: 40×10 at row 15.
        let lower = NormalizedRect(x: 0, y: 0, width: 2.0 / 3.0, height: 0.5)
        Self.expect(try Self.fitted(Self.wide, ImageFitting(width: 40, height: 40, cropAndScale: .scaleFit, regionOfInterest: lower)),
                    [(20, 5, .black), (8, 20, .red), (32, 20, .green), (20, 35, .black)])
    }

    @Test(arguments: [
        NormalizedRect(x: 0.5, y: 0, width: 0.6, height: 1),
        NormalizedRect(x: -0.1, y: 0, width: 0.5, height: 0.5),
        NormalizedRect(x: 0, y: 0.2, width: 0.5, height: 0.9),
        NormalizedRect(x: 0, y: 0, width: 0, height: 1),
        NormalizedRect(x: 0, y: 0, width: .nan, height: 1),
    ])
    func regionsOutsideTheUnitSquareAreRefused(region: NormalizedRect) throws {
        let path = try Self.square.written(".png", name: "square.png")
        let error = #expect(throws: ImageError.self) {
            try ImageDecoder().decode(file: path, fitting: ImageFitting(width: 8, height: 8, regionOfInterest: region))
        }
        guard case .invalidRegionOfInterest(let reported) = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(reported.x == region.x && reported.y == region.y && reported.height == region.height)
    }

    @Test func targetSizesMustBePositive() throws {
        let path = try Self.square.written(".png", name: "square.png")
        #expect(throws: ImageError.invalidSize(width: 0, height: 8)) {
            try ImageDecoder().decode(file: path, fitting: ImageFitting(width: 0, height: 8))
        }
    }

    @Test func geometries() {
        func geometry(_ x: Double, _ y: Double, _ width: Double, _ height: Double,
                      content: (Int, Int, Int, Int)) -> FittingGeometry {
            FittingGeometry(windowX: x, windowY: y, windowWidth: width, windowHeight: height,
                            contentLeft: content.0, contentTop: content.1, contentWidth: content.2, contentHeight: content.3)
        }
        // scaleFit: the letterbox on whole pixels, the whole image in the rest.
        let fit = ImageFitting(width: 224, height: 224, cropAndScale: .scaleFit)
        #expect(fit.geometry(width: 640, height: 480) == geometry(0, 0, 640, 480, content: (0, 28, 224, 168)))
        // centerCrop: the exact centre square, whatever the rounding of a resized size would be.
        let crop = ImageFitting(width: 224, height: 224, cropAndScale: .centerCrop)
        #expect(crop.geometry(width: 640, height: 480) == geometry(80, 0, 480, 480, content: (0, 0, 224, 224)))
        #expect(crop.geometry(width: 10_000, height: 1) == geometry(4999.5, 0, 1, 1, content: (0, 0, 224, 224)))
        let detector = ImageFitting(width: 128, height: 128, cropAndScale: .centerCrop)
        #expect(detector.geometry(width: 256, height: 192) == geometry(32, 0, 192, 192, content: (0, 0, 128, 128)))
        let fill = ImageFitting(width: 3, height: 5, cropAndScale: .scaleFill)
        #expect(fill.geometry(width: 640, height: 480) == geometry(0, 0, 640, 480, content: (0, 0, 3, 5)))
        // A region of interest, top row first, not rounded to whole pixels.
        let region = ImageFitting(width: 10, height: 10, cropAndScale: .scaleFill,
                                  regionOfInterest: NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 0.25))
        #expect(region.geometry(width: 640, height: 480) == geometry(160, 360, 320, 120, content: (0, 0, 10, 10)))
        #expect(region.geometry(width: 641, height: 481) == geometry(160.25, 360.75, 320.5, 120.25, content: (0, 0, 10, 10)))
        // The size a region of interest stands for when choosing a model's input size: rounded, never empty.
        #expect(NormalizedRect(x: 0.25, y: 0, width: 0.5, height: 0.25).pixelArea(width: 640, height: 480)
            == PixelArea(left: 160, top: 360, width: 320, height: 120))
        #expect(NormalizedRect(x: 0.999, y: 0.999, width: 0.001, height: 0.001).pixelArea(width: 10, height: 10)
            == PixelArea(left: 9, top: 0, width: 1, height: 1))
    }

    @Test func jpegShrinkOnLoadLeavesTheTargetResolution() throws {
        func shrink(_ width: Int, _ height: Int, _ fitting: ImageFitting, _ orientation: ImageOrientation = .up) -> Int {
            ImageDecoder.loadShrink(for: fitting, storedWidth: width, storedHeight: height, orientation: orientation)
        }
        let model = ImageFitting(width: 224, height: 224)
        #expect(shrink(448, 447, model) == 1)
        #expect(shrink(640, 480, model) == 2)
        #expect(shrink(1000, 900, model) == 4)
        #expect(shrink(1000, 800, model) == 2)
        #expect(shrink(4032, 3024, model) == 8)
        #expect(shrink(12_000, 9_000, model) == 8)
        #expect(shrink(4032, 3024, ImageFitting(width: 224, height: 224, regionOfInterest: NormalizedRect(x: 0, y: 0, width: 0.25, height: 0.25))) == 2)
        #expect(shrink(4000, 500, ImageFitting(width: 100, height: 100, cropAndScale: .scaleFit)) == 8)
        #expect(shrink(4000, 500, ImageFitting(width: 100, height: 100, cropAndScale: .scaleFit), .right) == 8)
        #expect(shrink(4000, 500, ImageFitting(width: 100, height: 100, cropAndScale: .centerCrop), .right) == 4)

        // A large JPEG decoded with shrink-on-load still has its blocks where they were.
        let large = TestImage.rgb(width: 1600, height: 1200) { x, y in [RGB.red, .green, .blue, .yellow][(y / 600) * 2 + x / 800] }
        let path = try large.written(".jpg[Q=95]", name: "large.jpg")
        let image = try ImageDecoder().decode(file: path, fitting: ImageFitting(width: 100, height: 100, cropAndScale: .scaleFill))
        for (x, y, colour) in [(25, 25, RGB.red), (75, 25, .green), (25, 75, .blue), (75, 75, .yellow)] {
            #expect(image.colour(x, y).isClose(to: colour, tolerance: 6), "at (\(x), \(y)): \(image.colour(x, y))")
        }
    }

    @Test func pixelBuffersAreFittedLikeFiles() throws {
        // A BGRA camera frame with padded rows.
        let width = 100, height = 100, rowBytes = 448
        var bytes = [UInt8](repeating: 7, count: rowBytes * height)
        for y in 0..<height {
            for x in 0..<width {
                let c = [RGB.red, .green, .blue, .yellow][(y / 50) * 2 + x / 50]
                let offset = y * rowBytes + x * 4
                bytes[offset] = UInt8(c.b)
                bytes[offset + 1] = UInt8(c.g)
                bytes[offset + 2] = UInt8(c.r)
                bytes[offset + 3] = 255
            }
        }
        let frame = try #require(PixelBuffer(width: width, height: height, pixelFormat: .bgra, bytesPerRow: rowBytes, bytes: bytes))
        let fromFrame = try ImageDecoder().fit(frame, fitting: ImageFitting(width: 40, height: 20, cropAndScale: .scaleFit))
        let fromFile = try Self.fitted(Self.square, ImageFitting(width: 40, height: 20, cropAndScale: .scaleFit))
        #expect(fromFrame == fromFile)
        let turned = try ImageDecoder(pixelFormat: .bgra).fit(frame, orientation: .down)
        #expect(turned.pixelFormat == .bgra && turned.colour(10, 10) == .yellow && turned.byte(10, 10, 3) == 255)
    }
}
