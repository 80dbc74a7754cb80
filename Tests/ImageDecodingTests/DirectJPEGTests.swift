import Foundation
@testable import ImageDecoding
import ModelFeatures
import Testing

/// The direct JPEG path (libjpeg and `LanczosResampler`, no libvips): its
/// resampler keeps geometry, it agrees with the libvips path on the same
/// pixels, and what it does not take goes to libvips.
@Suite struct DirectJPEGTests {
    /// 640×480, smooth (a JPEG keeps it closely): a gradient and a bright
    /// off-centre blob, in colour.
    static let photo: TestImage = {
        var samples: [Int] = []
        for y in 0..<480 {
            for x in 0..<640 {
                let dx = Double(x) - 401.3, dy = Double(y) - 187.6
                let blob = 170 * exp(-(dx * dx / (2 * 45 * 45) + dy * dy / (2 * 30 * 30)))
                samples += [Int(40 + blob), Int(30 + Double(x) / 8 + blob / 2), Int(200 - Double(y) / 4)]
            }
        }
        return TestImage(width: 640, height: 480, bands: 3, samples: samples)
    }()

    /// The photo in gray levels.
    static let grayPhoto = TestImage(width: 640, height: 480, bands: 1,
                                     samples: stride(from: 0, to: photo.samples.count, by: 3).map { photo.samples[$0 + 1] })

    static let fittings: [ImageFitting] = CropAndScale.allCases.map { ImageFitting(width: 64, height: 48, cropAndScale: $0) }
        + [ImageFitting(width: 64, height: 64, cropAndScale: .scaleFill),
           ImageFitting(width: 40, height: 40, cropAndScale: .centerCrop,
                        regionOfInterest: NormalizedRect(x: 0.4, y: 0.3, width: 0.5, height: 0.6)),
           // Larger than the image on one axis: enlarged across, shrunk down.
           ImageFitting(width: 700, height: 100, cropAndScale: .scaleFill)]

    @Test func theResamplerKeepsGeometry() {
        // A Gaussian bump centred at 100.8 (pixel edges: pixel j spans j…j+1), shrunk 4×.
        let width = 240, centre = 100.8
        let row = (0..<width).map { x -> UInt8 in
            let distance = Double(x) + 0.5 - centre
            let value: Double = 20 + 200 * exp(-distance * distance / 72)
            return UInt8(value.rounded())
        }
        let pixels = Array(repeating: row, count: 8).flatMap { $0 }
        let shrunk = pixels.withUnsafeBufferPointer {
            LanczosResampler.resample($0, stride: width, bands: 1, alpha: false,
                                      across: LanczosResampler.taps(start: 0, length: Double(width), output: 60, size: width),
                                      down: LanczosResampler.taps(start: 0, length: 8, output: 2, size: 8))
        }
        let line: [Double] = shrunk[0..<60].map { Double($0) - 20 }
        var moment = 0.0
        for (index, value) in line.enumerated() { moment += (Double(index) + 0.5) * 4 * value }
        let found = moment / line.reduce(0, +)
        #expect(abs(found - centre) < 0.05, "centroid \(found), expected \(centre)")
        #expect(shrunk[0..<60] == shrunk[60..<120])

        // A flat area stays exactly flat, edges included; every kernel sums to 1.
        let flat = [UInt8](repeating: 77, count: 90 * 70 * 3)
        for (outputWidth, outputHeight) in [(31, 17), (200, 150)] {
            let out = flat.withUnsafeBufferPointer {
                LanczosResampler.resample($0, stride: 90 * 3, bands: 3, alpha: false,
                                          across: LanczosResampler.taps(start: 0, length: 90, output: outputWidth, size: 90),
                                          down: LanczosResampler.taps(start: 0, length: 70, output: outputHeight, size: 70))
            }
            #expect(out.count == outputWidth * outputHeight * 3 && out.allSatisfy { $0 == 77 })
        }
        // Real-valued windows, shrinking and enlarging, at the image's edges too.
        for (start, length, output) in [(10.3, 37.45, 11), (0, 60, 7), (41.5, 18.5, 40), (-2.5, 5, 20)] {
            let taps = LanczosResampler.taps(start: start, length: length, output: output, size: 60)
            for index in 0..<output {
                #expect(abs(taps.weights[(index * taps.count)..<((index + 1) * taps.count)].reduce(0, +) - 1) < 1e-5)
                #expect(taps.first[index] >= 0 && taps.first[index] + taps.count <= 60)
            }
            #expect(taps.lowest >= 0 && taps.lowest < taps.highest && taps.highest <= 60)
        }
    }

    /// Mean and largest absolute difference between two images of one size.
    static func difference(_ a: PixelBuffer, _ b: PixelBuffer) -> (mean: Double, largest: Int) {
        let pairs = zip(a.bytes, b.bytes).map { abs(Int($0) - Int($1)) }
        return (Double(pairs.reduce(0, +)) / Double(pairs.count), pairs.max() ?? 0)
    }

    @Test(arguments: fittings)
    func agreesWithTheLibvipsPath(fitting: ImageFitting) throws {
        for (image, format) in [(Self.photo, PixelBuffer.PixelFormat.rgb), (Self.grayPhoto, .gray)] {
            let jpeg = try image.encoded(".jpg[Q=98]")
            let decoder = ImageDecoder(pixelFormat: format)
            let direct = try jpeg.withUnsafeBytes { bytes in
                try decoder.decodeJPEGDirectly(bytes: bytes, orientation: nil, fitting: fitting)
            }
            let fitted = try #require(direct, "the direct path took \(format) \(fitting)")
            // The same pixels losslessly, through libvips (no shrink-on-load).
            let png = try image.encoded(".png")
            let general = try png.withUnsafeBytes { bytes in
                try decoder.decodeFitted(bytes: bytes, name: "photo.png", fitting: fitting)
            }
            #expect(fitted.image.width == fitting.width && fitted.image.height == fitting.height)
            #expect(fitted.image.pixelFormat == format)
            #expect((fitted.uprightWidth, fitted.uprightHeight) == (640, 480))
            #expect(Double(fitted.sourceWidth) / Double(fitted.sourceHeight) == 640.0 / 480.0)
            let (mean, largest) = Self.difference(fitted.image, general.image)
            #expect(mean < 0.5 && largest <= 3, "\(format) \(fitting): mean \(mean), largest \(largest)")
            // A box maps back to the same place from either.
            let box = (fitted.uprightRect(fromTopLeftX: 0.25, y: 0.25, width: 0.5, height: 0.5),
                       general.uprightRect(fromTopLeftX: 0.25, y: 0.25, width: 0.5, height: 0.5))
            #expect(abs(box.0.x - box.1.x) * 640 < 0.5 && abs(box.0.y - box.1.y) * 480 < 0.5
                    && abs(box.0.width - box.1.width) * 640 < 0.5 && abs(box.0.height - box.1.height) * 480 < 0.5)
        }
    }

    @Test func whatItDoesNotTakeGoesToLibvips() throws {
        let fitting = ImageFitting(width: 64, height: 48)
        func direct(_ bytes: [UInt8], _ format: PixelBuffer.PixelFormat = .rgb,
                    orientation: ImageOrientation? = nil) throws -> FittedImage? {
            try bytes.withUnsafeBytes {
                try ImageDecoder(pixelFormat: format).decodeJPEGDirectly(bytes: $0, orientation: orientation, fitting: fitting)
            }
        }
        let plain = try Self.photo.encoded(".jpg[Q=90]")
        #expect(try direct(plain) != nil)
        #expect(try direct(Self.photo.encoded(".jpg[Q=90]", orientation: 1)) != nil)
        // Turned by EXIF, or by the caller; a colour file read as gray; layouts other than gray and RGB.
        #expect(try direct(Self.photo.encoded(".jpg[Q=90]", orientation: 6)) == nil)
        #expect(try direct(plain, orientation: .left) == nil)
        #expect(try direct(plain, .gray) == nil)
        #expect(try direct(plain, .bgra) == nil)
        // Truncated data: libjpeg warns, and libvips reports it as before.
        let truncated = Array(plain.prefix(plain.count / 2))
        #expect(try direct(truncated) == nil)
        #expect(throws: ImageError.self) {
            try ImageDecoder().decode(bytes: truncated, name: "half.jpg", fitting: fitting)
        }
        // A gray file read as RGB is expanded, as libvips does.
        let gray = try Self.grayPhoto.encoded(".jpg[Q=90]")
        let expanded = try #require(try direct(gray))
        #expect(expanded.image.pixelFormat == .rgb && expanded.image.colour(20, 20).r == expanded.image.colour(20, 20).b)
        let kept = try gray.withUnsafeBytes {
            try ImageDecoder(pixelFormat: .rgb, keepsGrayscale: true).decodeJPEGDirectly(bytes: $0, orientation: nil, fitting: fitting)
        }
        #expect(kept?.image.pixelFormat == .gray)
    }
}
