import Foundation
@testable import ImageDecoding
import ModelFeatures
import SystemIO
import Testing

/// Formats, pixel layouts, bit depths, grayscale, alpha and damaged files.
@Suite struct DecodingTests {
    static let quadrants = TestImage.rgb(width: 8, height: 6) { x, y in [RGB.red, .green, .blue, .yellow][(y / 3) * 2 + x / 4] }

    static func expectQuadrants(_ image: PixelBuffer, tolerance: Int = 0, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(image.width == 8 && image.height == 6, sourceLocation: sourceLocation)
        for (x, y, colour) in [(1, 1, RGB.red), (6, 1, .green), (1, 4, .blue), (6, 4, .yellow)] {
            #expect(image.colour(x, y).isClose(to: colour, tolerance: tolerance), "at (\(x), \(y)): \(image.colour(x, y))",
                    sourceLocation: sourceLocation)
        }
    }

    /// libvips 8.14's liborc code corrupts the heap when two images are
    /// decoded at once (Scripts/stress-vips.c); it must stay off.
    @Test func libvipsRunsWithoutVectorCode() throws {
        _ = try ImageDecoder().decode(bytes: try Self.quadrants.encoded(".png"), name: "image.png")
        #expect(!Vips.vectorsEnabled)
    }

    @Test(arguments: [".png", ".webp[lossless]", ".tif", ".tif[compression=deflate]"])
    func losslessFormatsDecodeExactly(suffix: String) throws {
        let bytes = try Self.quadrants.encoded(suffix)
        let image = try ImageDecoder().decode(bytes: bytes, name: "image\(suffix)")
        #expect(image.pixelFormat == .rgb)
        let expected = Self.quadrants.samples.map(UInt8.init)
        #expect(image.bytes == expected)
    }

    @Test(arguments: [".jpg[Q=95]", ".webp[Q=95]"])
    func lossyFormatsDecodeClosely(suffix: String) throws {
        let big = TestImage.rgb(width: 64, height: 48) { x, y in [RGB.red, .green, .blue, .yellow][(y / 24) * 2 + x / 32] }
        let path = try big.written(suffix, name: "lossy")
        let image = try ImageDecoder().decode(file: path)
        #expect(image.width == 64 && image.height == 48)
        for (x, y, colour) in [(10, 10, RGB.red), (50, 10, .green), (10, 40, .blue), (50, 40, .yellow)] {
            #expect(image.colour(x, y).isClose(to: colour, tolerance: 8), "at (\(x), \(y)): \(image.colour(x, y))")
        }
    }

    @Test func heifWhenLibvipsHasAnEncoder() throws {
        // Debian's libheif may lack an encoder; then there is nothing to decode.
        guard let bytes = try? Self.quadrants.encoded(".heic[Q=95]") else { return }
        let image = try ImageDecoder().decode(bytes: bytes, name: "image.heic")
        #expect(image.width == 8 && image.height == 6)
    }

    @Test(arguments: PixelBuffer.PixelFormat.allCases)
    func everyPixelFormat(format: PixelBuffer.PixelFormat) throws {
        let path = try Self.quadrants.written(".png", name: "quadrants.png")
        let image = try ImageDecoder(pixelFormat: format).decode(file: path)
        #expect(image.pixelFormat == format)
        #expect(image.bytesPerRow == 8 * format.bytesPerPixel)
        if format == .gray {
            // libvips' luminance of red (220, 30, 30) and yellow (240, 220, 20).
            #expect(image.byte(1, 1, 0) < image.byte(6, 4, 0))
        } else {
            Self.expectQuadrants(image)
        }
        if format.bytesPerPixel == 4 {
            #expect(image.byte(2, 2, format == .argb ? 0 : 3) == 255)
        }
    }

    @Test func oneByOne() throws {
        let path = try TestImage.rgb(width: 1, height: 1) { _, _ in .green }.written(".png", name: "one.png")
        let image = try ImageDecoder().decode(file: path)
        #expect(image.width == 1 && image.height == 1 && image.colour(0, 0) == .green)
        for option in CropAndScale.allCases {
            let fitted = try ImageDecoder().decode(file: path, fitting: ImageFitting(width: 224, height: 224, cropAndScale: option))
            #expect(fitted.width == 224 && fitted.height == 224)
            #expect(fitted.colour(0, 0) == .green && fitted.colour(112, 112) == .green && fitted.colour(223, 223) == .green, "\(option)")
        }
    }

    @Test func sixteenBitPNGsBecomeEightBit() throws {
        var image = TestImage.rgb(width: 4, height: 2) { x, _ in x < 2 ? RGB(r: 65535, g: 32896, b: 0) : RGB(r: 257, g: 0, b: 65535) }
        image.sixteenBit = true
        let bytes = try image.encoded(".png")
        #expect(bytes[24] == 16, "the PNG's bit depth")
        let decoded = try ImageDecoder().decode(bytes: bytes, name: "deep.png")
        #expect(decoded.colour(0, 0) == RGB(r: 255, g: 128, b: 0))
        #expect(decoded.colour(3, 1) == RGB(r: 1, g: 0, b: 255))

        var gray = TestImage(width: 2, height: 1, bands: 1, samples: [65535, 25700])
        gray.sixteenBit = true
        let grayDecoded = try ImageDecoder(keepsGrayscale: true).decode(bytes: gray.encoded(".png"), name: "deep-gray.png")
        #expect(grayDecoded.pixelFormat == .gray && grayDecoded.bytes == [255, 100])
    }

    @Test func palettePNGs() throws {
        // Debian's libvips writes palette PNGs with libimagequant.
        let bytes = try Self.quadrants.encoded(".png[palette]")
        #expect(bytes[25] == 3, "the PNG's colour type: palette")
        Self.expectQuadrants(try ImageDecoder().decode(bytes: bytes, name: "palette.png"), tolerance: 4)
    }

    @Test func grayscaleIsKeptOrExpanded() throws {
        let gray = TestImage(width: 2, height: 2, bands: 1, samples: [0, 100, 200, 255])
        let path = try gray.written(".png", name: "gray.png")
        let kept = try ImageDecoder(keepsGrayscale: true).decode(file: path)
        #expect(kept.pixelFormat == .gray && kept.bytes == [0, 100, 200, 255])
        let expanded = try ImageDecoder().decode(file: path)
        #expect(expanded.pixelFormat == .rgb && expanded.bytes == [0, 0, 0, 100, 100, 100, 200, 200, 200, 255, 255, 255])
        let asked = try ImageDecoder(pixelFormat: .gray).decode(file: path)
        #expect(asked.bytes == [0, 100, 200, 255])
        let colour = try ImageDecoder(keepsGrayscale: true).decode(file: Self.quadrants.written(".png", name: "colour.png"))
        #expect(colour.pixelFormat == .rgb)
    }

    @Test func alphaIsKeptOrFlattened() throws {
        // Opaque red, half-transparent green, transparent blue, opaque white.
        let rgba = TestImage(width: 4, height: 1, bands: 4, samples: [
            200, 0, 0, 255, 0, 200, 0, 128, 0, 0, 200, 0, 255, 255, 255, 255,
        ])
        let path = try rgba.written(".png", name: "alpha.png")
        let kept = try ImageDecoder(pixelFormat: .rgba).decode(file: path)
        #expect(kept.bytes == rgba.samples.map(UInt8.init))
        let onBlack = try ImageDecoder().decode(file: path)
        #expect(onBlack.bytes == [200, 0, 0, 0, 100, 0, 0, 0, 0, 255, 255, 255])
        let onWhite = try ImageDecoder(background: .white).decode(file: path)
        #expect(onWhite.bytes == [200, 0, 0, 127, 227, 127, 255, 255, 255, 255, 255, 255])
        let flattened = try ImageDecoder(pixelFormat: .bgra, flattensAlpha: true).decode(file: path)
        #expect(flattened.bytes == [0, 0, 200, 255, 0, 100, 0, 255, 0, 0, 0, 255, 255, 255, 255, 255])

        // Gray with alpha.
        let grayAlpha = TestImage(width: 2, height: 1, bands: 2, samples: [200, 255, 200, 0])
        let grayPath = try grayAlpha.written(".png", name: "gray-alpha.png")
        #expect(try ImageDecoder(keepsGrayscale: true).decode(file: grayPath).bytes == [200, 0])
        #expect(try ImageDecoder(pixelFormat: .rgba).decode(file: grayPath).bytes == [200, 200, 200, 255, 200, 200, 200, 0])
    }

    @Test func alphaIsPremultipliedWhileScaling() throws {
        // Transparent pixels' colour must not bleed into the opaque ones.
        let image = TestImage(width: 64, height: 8, bands: 4, samples: (0..<(64 * 8)).flatMap { index in
            index % 64 < 32 ? [200, 0, 0, 255] : [0, 0, 255, 0]
        })
        let path = try image.written(".png", name: "halves.png")
        let scaled = try ImageDecoder(pixelFormat: .rgba).decode(file: path, fitting: ImageFitting(width: 16, height: 2, cropAndScale: .scaleFill))
        #expect(scaled.colour(3, 1) == RGB(r: 200, g: 0, b: 0))
        #expect(scaled.byte(3, 1, 3) == 255 && scaled.byte(12, 1, 3) == 0)
        #expect(scaled.colour(7, 1).b == 0, "no blue from the transparent half: \(scaled.colour(7, 1))")
    }

    // MARK: - Errors name the file

    @Test func truncatedAndDamagedFilesAreErrorsNamingTheFile() throws {
        let big = TestImage.rgb(width: 64, height: 64) { x, y in RGB(r: x * 4, g: y * 4, b: 100) }
        for suffix in [".jpg", ".png", ".webp"] {
            let bytes = try big.encoded(suffix)
            let truncated = try TestFiles.write(Array(bytes.prefix(bytes.count / 2)), name: "truncated\(suffix)")
            let error = #expect(throws: ImageError.self) { try ImageDecoder().decode(file: truncated) }
            guard case .damaged(let file, _) = error else {
                Issue.record("\(suffix): \(String(describing: error))")
                continue
            }
            #expect(file == truncated)
            let description = error?.description ?? ""
            #expect(description.hasPrefix(truncated + ": ") && !description.contains("\n"), "\(description)")

            var scribbled = bytes
            for index in stride(from: 40, to: scribbled.count - 8, by: 7) { scribbled[index] ^= 0x5A }
            let damaged = try TestFiles.write(scribbled, name: "damaged\(suffix)")
            #expect(throws: ImageError.self) { try ImageDecoder().decode(file: damaged) }
        }
    }

    @Test func filesThatAreNoImages() throws {
        let text = try TestFiles.write(Array("just some text\n".utf8), name: "notes.txt")
        #expect(throws: ImageError.unsupportedFormat(file: text)) { try ImageDecoder().decode(file: text) }
        let empty = try TestFiles.write([], name: "empty.png")
        #expect(throws: ImageError.damaged(file: empty, reason: "the file is empty")) { try ImageDecoder().decode(file: empty) }
        let missing = TestFiles.directory.appendingPathComponent("missing.jpg").path
        let error = #expect(throws: ImageError.self) { try ImageDecoder().decode(file: missing) }
        #expect(error == .unreadable(file: missing, reason: "No such file or directory"))
        #expect(error?.description == "\(missing): cannot read the image: No such file or directory")
        #expect(throws: ImageError.unreadable(file: TestFiles.directory.path, reason: "not a regular file")) {
            try ImageDecoder().decode(file: TestFiles.directory.path)
        }
        #expect(throws: ImageError.unsupportedFormat(file: "upload")) {
            try ImageDecoder().decode(bytes: [0x89, 0x50, 0x4E, 0x47], name: "upload")
        }
    }

    @Test func decodesFromManyThreadsAtOnce() async throws {
        let path = try CropAndScaleTests.wide.written(".jpg[Q=95]", name: "wide.jpg")
        let expected = try ImageDecoder().decode(file: path, fitting: ImageFitting(width: 32, height: 32))
        let results = await withTaskGroup(of: PixelBuffer?.self) { group in
            for _ in 0..<16 {
                group.addTask { try? ImageDecoder().decode(file: path, fitting: ImageFitting(width: 32, height: 32)) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 16 && results.allSatisfy { $0 == expected })
    }

    @Test func libraryVersionAndThreads() throws {
        #expect(ImageLibrary.version.hasPrefix("8."))
        #expect(try ImageLibrary.threadsPerImage() >= 1)
    }
}
