import CVips
import FixtureSupport
import Foundation
import ImageDecoding
import ModelFeatures
import ModelRuntime
import Testing

/// Image paths given for image inputs are decoded, center-cropped and scaled
/// to the input's declared size.
@Suite struct ImageInputTests {
    /// `width` × `height` RGB pixels that vary everywhere.
    static func pixels(width: Int, height: Int) -> [UInt8] {
        (0..<(width * height)).flatMap { index -> [UInt8] in
            let x = index % width, y = index / width
            return [UInt8((x * 37 + y * 11) % 256), UInt8((x * 5 + y * 53) % 256), UInt8((x * y * 7 + 90) % 256)]
        }
    }

    /// The pixels written as a PNG file by libvips; returns its path.
    static func writePNG(_ pixels: [UInt8], width: Int, height: Int, in directory: URL) throws -> String {
        _ = try ImageLibrary.threadsPerImage()  // starts libvips
        let image = try #require(pixels.withUnsafeBytes { memory in
            modelc_vips_new_from_memory_copy(memory.baseAddress, memory.count, Int32(width), Int32(height), 3, VIPS_FORMAT_UCHAR)
        })
        defer { modelc_vips_unref(image) }
        var buffer: UnsafeMutableRawPointer?
        var size = 0
        #expect(modelc_vips_write_to_buffer(image, ".png", &buffer, &size) == 0)
        let bytes = try #require(buffer)
        defer { modelc_vips_free(bytes) }
        let path = directory.appendingPathComponent("image-\(width)x\(height).png").path
        try Data(bytes: bytes, count: size).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aPNGPathGivesTheSameOutputsAsItsPixels() throws {
        let directory = try Fixtures.temporaryDirectory("image-input")
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = try Model(contentsOf: Fixtures.path("Models/ImageClassifier.mlmodel"), configuration: ModelConfiguration(threads: 1))
        let parser = PredictionInputs(model: model, baseDirectory: directory.path)

        // At the input's size: the file's pixels exactly.
        let pixels = Self.pixels(width: 16, height: 16)
        let path = try Self.writePNG(pixels, width: 16, height: 16, in: directory)
        let buffer = try #require(PixelBuffer(width: 16, height: 16, pixelFormat: .rgb, bytes: pixels))
        let (name, value) = try parser.parse(argument: "image=@" + URL(fileURLWithPath: path).lastPathComponent)
        #expect(name == "image" && value == .image(buffer))
        let fromPath = try model.prediction(from: [name: value])
        let fromBuffer = try model.prediction(from: ["image": .image(buffer)])
        #expect(fromPath == fromBuffer)
        #expect(try parser.parse(object: ["image": "@" + path]) == ["image": .image(buffer)])

        // Larger and wider: center-cropped and scaled, as ImageDecoder does it.
        let wide = try Self.writePNG(Self.pixels(width: 48, height: 32), width: 48, height: 32, in: directory)
        let fitted = try ImageDecoder().decode(file: wide, fitting: ImageFitting(width: 16, height: 16, cropAndScale: .centerCrop))
        let (_, wideValue) = try parser.parse(argument: "image=@\(wide)")
        #expect(wideValue == .image(fitted))
        #expect(try model.prediction(from: ["image": wideValue]) == model.prediction(from: ["image": .image(fitted)]))
    }

    @Test func anUnreadableImageIsAnErrorNamingTheFile() throws {
        let directory = try Fixtures.temporaryDirectory("image-input-error")
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = try Model(contentsOf: Fixtures.path("Models/ImageClassifier.mlmodel"), configuration: ModelConfiguration(threads: 1))
        let parser = PredictionInputs(model: model, baseDirectory: directory.path)
        let text = directory.appendingPathComponent("notes.txt")
        try Data("not an image".utf8).write(to: text)
        let error = #expect(throws: RuntimeError.self) { try parser.parse(argument: "image=@notes.txt") }
        #expect(error?.description.contains(text.path + ": not an image") == true, "\(String(describing: error))")
    }
}
