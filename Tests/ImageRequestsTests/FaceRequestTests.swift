import FaceDetection
import FixtureSupport
import Foundation
import ImageDecoding
@testable import ImageRequests
import ModelFeatures
import ModelRuntime
import Testing

/// Face rectangles with dlib's detector on scikit-image's portrait of Eileen
/// Collins (NASA, public domain; Fixtures/Faces/astronaut.jpg, 320×320), and
/// on images without faces.
@Suite struct FaceRequestTests {
    static let portrait = Fixtures.path("Faces/astronaut.jpg")
    /// Points marked by hand on the portrait (pixels from the top left): the
    /// eyes and the middle of the mouth.
    static let landmarks = [(140.0, 103.0), (188.0, 103.0), (165.0, 145.0)]

    /// Expects one face whose box (in upright pixels) holds every landmark, of a face's size.
    static func expectThePortraitsFace(_ faces: [FaceObservation], width: Int = 320, height: Int = 320,
                                       _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(faces.count == 1, "\(comment): \(faces.count) faces", sourceLocation: sourceLocation)
        guard let face = faces.first else { return }
        let box = face.boundingBox.topLeftPixels(width: width, height: height)
        for (x, y) in landmarks {
            #expect(x > box.x && x < box.x + box.width && y > box.y && y < box.y + box.height,
                    "\(comment): (\(x), \(y)) outside \(box)", sourceLocation: sourceLocation)
        }
        #expect(box.width > 60 && box.width < 130 && box.height > 60 && box.height < 130, "\(comment): \(box)",
                sourceLocation: sourceLocation)
        #expect(face.confidence > 0.5 && face.confidence <= 1, sourceLocation: sourceLocation)
        #expect(face.roll == 0 && face.yaw == 0, "a frontal face", sourceLocation: sourceLocation)
    }

    @Test func theFaceInAPortraitIsFound() throws {
        Self.expectThePortraitsFace(try ImageRequestHandler(file: Self.portrait).perform(FaceRectanglesRequest()))
    }

    @Test func imagesWithoutFacesHaveNone() throws {
        for path in ["Images/wide-bands.png", "Images/tall-bands.png", "Images/top-red-bottom-blue.png"] {
            #expect(try ImageRequestHandler(file: Fixtures.path(path)).perform(FaceRectanglesRequest()).isEmpty, "\(path)")
        }
        // Noise and a smooth blob, 320×240.
        var random = SplitMix(seed: 22)
        let noise = (0..<(320 * 240)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let scene = BlobScene(width: 320, height: 240, centreX: 150, centreY: 110, sdX: 30, sdY: 25)
        let blob = scene.stored(orientation: 1).pixels
        for pixels in [noise, blob] {
            let buffer = try #require(PixelBuffer(width: 320, height: 240, pixelFormat: .gray, bytes: pixels))
            #expect(try ImageRequestHandler(pixelBuffer: buffer).perform(FaceRectanglesRequest()).isEmpty)
        }
    }

    /// The portrait stored turned for each EXIF orientation (JPEG): the face
    /// is found upright, where it is in the portrait.
    @Test(arguments: [ImageOrientation.right, .left, .down, .upMirrored, .leftMirrored])
    func rotatedImagesGiveUprightBoxes(orientation: ImageOrientation) throws {
        let upright = try ImageDecoder(pixelFormat: .rgb).decode(file: Self.portrait)
        let swaps = orientation.swapsWidthAndHeight
        let (width, height) = (upright.width, upright.height)
        let (storedWidth, storedHeight) = swaps ? (height, width) : (width, height)
        var stored = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let (sx, sy): (Int, Int) = switch orientation {
                case .up: (x, y)
                case .upMirrored: (storedWidth - 1 - x, y)
                case .down: (storedWidth - 1 - x, storedHeight - 1 - y)
                case .downMirrored: (x, storedHeight - 1 - y)
                case .leftMirrored: (y, x)
                case .right: (y, storedHeight - 1 - x)
                case .rightMirrored: (storedWidth - 1 - y, storedHeight - 1 - x)
                case .left: (storedWidth - 1 - y, x)
                }
                for c in 0..<3 { stored[(sy * storedWidth + sx) * 3 + c] = upright.bytes[(y * width + x) * 3 + c] }
            }
        }
        let data = try GeneratedImages.encode(stored, width: storedWidth, height: storedHeight, suffix: ".jpg[Q=95]",
                                              orientation: orientation.rawValue)
        let url = try Fixtures.temporaryDirectory("faces").appendingPathComponent("turned.jpg")
        try data.write(to: url)
        let faces = try ImageRequestHandler(file: url.path).perform(FaceRectanglesRequest())
        Self.expectThePortraitsFace(faces, "\(orientation)")
    }

    @Test func aRegionOfInterestLimitsTheSearchAndBoxesStayInTheWholeImage() throws {
        let handler = ImageRequestHandler(file: Self.portrait)
        // The top-left quarter holds no face; the top half holds it.
        #expect(try handler.perform(FaceRectanglesRequest(regionOfInterest: NormalizedRect(x: 0, y: 0, width: 0.35, height: 0.5))).isEmpty)
        Self.expectThePortraitsFace(try handler.perform(FaceRectanglesRequest(regionOfInterest: NormalizedRect(x: 0, y: 0.3, width: 1, height: 0.7))),
                                    "top 70%")
    }

    @Test func theFaceThenTheClassifierOnItsRegion() throws {
        let model = try ImageModel(model: Model(contentsOf: Fixtures.path("Models/MeanColor.mlmodel")))
        let upright = try ImageRequestHandler(file: Self.portrait).uprightImage()
        let handler = ImageRequestHandler(pixelBuffer: upright)
        let face = try #require(try handler.perform(FaceRectanglesRequest()).first)
        let onFace = try handler.perform(ImageRequest(model: model, cropAndScale: .scaleFill, regionOfInterest: face.regionOfInterest))
        // The same pixels cut out by hand and averaged: the request saw the face.
        let box = face.regionOfInterest.topLeftPixels(width: 320, height: 320)
        let cut = try ImageDecoder(pixelFormat: .rgb).fit(upright, fitting: ImageFitting(
            width: 32, height: 32, cropAndScale: .scaleFill, regionOfInterest: face.regionOfInterest))
        var sums = [0.0, 0.0, 0.0]
        for index in 0..<(32 * 32) { for c in 0..<3 { sums[c] += Double(cut.bytes[index * 3 + c]) } }
        let expected = sums.map { $0 / 1024 }
        let found = try #require(onFace.featureValues.first?.featureValue.multiArrayValue).doubles
        #expect(zip(found, expected).allSatisfy { abs($0 - $1) < 0.01 }, "\(found) vs \(expected) over \(box)")
        // A face is skin-coloured: more red than blue.
        #expect(found[0] > found[2] + 20)
    }

    @Test func aMissingDetectorLibraryNamesThePackage() {
        let dlibMissing = FaceDetectionError.libraryUnavailable(reason: "libdlib.so.19.1: cannot open shared object file")
        #expect(dlibMissing.description.contains("apt-get install libdlib19.1"))
        #expect(!dlibMissing.description.contains("\n"))
        let shimMissing = FaceDetectionError.libraryUnavailable(reason: "libModelcFaces.so: cannot open shared object file")
        #expect(shimMissing.description.contains("MODELC_FACES_LIBRARY") && shimMissing.description.contains("libdlib19.1"))
    }
}
