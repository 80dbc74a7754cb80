import FixtureSupport
import Foundation
import ImageDecoding
@testable import ImageRequests
import ModelFeatures
import ModelRuntime
import Testing

/// Object detection on the detector fixture (Fixtures/detection.py): a
/// network that measures one Gaussian blob, then NonMaximumSuppression. Its
/// box is the blob's centre ± 2 standard deviations wherever crop, scale,
/// region of interest and orientation put the blob, so each box is checked
/// in the pixels of the image as drawn.
@Suite struct ObjectDetectionTests {
    static let detector = Fixtures.path("Models/Detector.mlmodel")
    static let rawDetector = Fixtures.path("Models/DetectorRaw.mlmodel")
    static let nmsOnly = Fixtures.path("Models/DetectorNMS.mlmodel")

    /// Scenes whose blob stays in view of every crop (the middle square for center-crop).
    static let scenes = [
        BlobScene(width: 200, height: 120, centreX: 96, centreY: 66, sdX: 9, sdY: 7),
        BlobScene(width: 120, height: 200, centreX: 56, centreY: 104, sdX: 7, sdY: 10),
        BlobScene(width: 150, height: 150, centreX: 70.5, centreY: 80, sdX: 12, sdY: 8),
    ]

    static func model(_ path: String = detector) throws -> ImageModel {
        try ImageModel(model: Model(contentsOf: path, configuration: ModelConfiguration(threads: 1)))
    }

    /// The scene written as a file (gray PNG, or JPEG with an EXIF orientation).
    static func write(_ scene: BlobScene, orientation: UInt32? = nil, suffix: String = ".png") throws -> String {
        let stored = scene.stored(orientation: orientation ?? 1)
        let data = try GeneratedImages.encode(stored.pixels, width: stored.width, height: stored.height, suffix: suffix,
                                              bands: 1, orientation: orientation)
        let name = suffix.hasPrefix(".jpg") ? "scene.jpg" : "scene.png"
        let url = try Fixtures.temporaryDirectory("detect").appendingPathComponent(name)
        try data.write(to: url)
        return url.path
    }

    /// Expects one object, the blob, at the scene's box within `tolerance` pixels.
    static func expectBlob(_ result: ImageRequestResult, _ scene: BlobScene, tolerance: Double = 0.5,
                           _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let objects = result.recognizedObjects
        #expect(objects.count == 1, "\(comment): \(objects.count) objects", sourceLocation: sourceLocation)
        guard let object = objects.first else { return }
        #expect(result.imageWidth == scene.width && result.imageHeight == scene.height, sourceLocation: sourceLocation)
        #expect(object.labels.map(\.identifier) == ["blob", "background"], sourceLocation: sourceLocation)
        #expect(object.labels.map(\.confidence) == [0.9, 0.1] && object.confidence == 0.9, sourceLocation: sourceLocation)
        let found = object.boundingBox.topLeftPixels(width: scene.width, height: scene.height)
        let expected = scene.expectedBox
        let errors = [found.x - expected.x, found.y - expected.y, found.width - expected.width, found.height - expected.height]
        #expect(errors.allSatisfy { abs($0) <= tolerance },
                "\(comment): box \(found), expected \(expected)", sourceLocation: sourceLocation)
    }

    @Test(arguments: CropAndScale.allCases, scenes)
    func boxesAreInTheOriginalImageUnderEveryCropAndScale(mode: CropAndScale, scene: BlobScene) throws {
        let path = try Self.write(scene)
        let result = try ImageRequestHandler(file: path).perform(ImageRequest(model: Self.model(), cropAndScale: mode))
        Self.expectBlob(result, scene, "\(mode) \(scene.width)×\(scene.height)")
    }

    @Test(arguments: CropAndScale.allCases)
    func boxesAreInTheWholeImageWhenARegionOfInterestIsUsed(mode: CropAndScale) throws {
        let scene = Self.scenes[0]
        let path = try Self.write(scene)
        // x 50…170, y (from the top) 12…108 of 200×120: the blob (78…114, 52…80) is inside.
        let region = NormalizedRect(x: 0.25, y: 0.1, width: 0.6, height: 0.8)
        let request = ImageRequest(model: try Self.model(), cropAndScale: mode, regionOfInterest: region)
        Self.expectBlob(try ImageRequestHandler(file: path).perform(request), scene, "\(mode) in a region of interest")
    }

    @Test(arguments: ImageOrientation.allCases)
    func everyEXIFOrientationGivesUprightBoxes(orientation: ImageOrientation) throws {
        // JPEG (lossy, and shrunk while decoding: 200×120 to 64×64 decodes at half size).
        let scene = Self.scenes[0]
        let path = try Self.write(scene, orientation: orientation.rawValue, suffix: ".jpg[Q=98]")
        let request = ImageRequest(model: try Self.model(), cropAndScale: .scaleFill)
        Self.expectBlob(try ImageRequestHandler(file: path).perform(request), scene, "EXIF \(orientation)")
    }

    @Test(arguments: ImageOrientation.allCases)
    func pixelBuffersGiveUprightBoxes(orientation: ImageOrientation) throws {
        let scene = Self.scenes[1]
        let stored = scene.stored(orientation: orientation.rawValue)
        let buffer = try #require(PixelBuffer(width: stored.width, height: stored.height, pixelFormat: .gray, bytes: stored.pixels))
        let request = ImageRequest(model: try Self.model(), cropAndScale: .centerCrop)
        Self.expectBlob(try ImageRequestHandler(pixelBuffer: buffer, orientation: orientation).perform(request), scene,
                        "pixel buffer \(orientation)")
    }

    @Test func thresholdInputsReachTheSuppressionStage() throws {
        let path = try Self.write(Self.scenes[0])
        let model = try Model(contentsOf: Self.detector, configuration: ModelConfiguration(threads: 1))
        #expect(try Self.model().thresholdInputs == ("iouThreshold", "confidenceThreshold"))
        // At IoU 0.9 the wider second box (IoU 0.83) is kept too; at confidence 0.7 it is not.
        let loose = try ImageModel(model: model, additionalInputs: ["iouThreshold": .double(0.9)])
        #expect(try ImageRequestHandler(file: path).perform(ImageRequest(model: loose)).recognizedObjects.map(\.confidence) == [0.9, 0.6])
        let strict = try ImageModel(model: model, additionalInputs: ["iouThreshold": .double(0.9), "confidenceThreshold": .double(0.7)])
        #expect(try ImageRequestHandler(file: path).perform(ImageRequest(model: strict)).recognizedObjects.count == 1)
    }

    @Test func aDetectorWithoutItsSuppressionStageGivesFeatureValues() throws {
        let model = try Self.model(Self.rawDetector)
        #expect(!model.isObjectDetector)
        #expect(try Self.model().isObjectDetector)
        let result = try ImageRequestHandler(file: try Self.write(Self.scenes[2])).perform(ImageRequest(model: model))
        #expect(result.recognizedObjects.isEmpty)
        #expect(result.featureValues.map(\.featureName) == ["confidence", "coordinates"])
    }

    /// Random boxes from Fixtures/Detection/nms-random.json: modelc's NMS
    /// stage and `RecognizedObjectObservation.suppressing` keep exactly the
    /// boxes NumPy keeps, in the same order.
    @Test func suppressionAgreesWithNumPyOnRandomBoxes() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Detection/nms-random.json")))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let cases = try #require(document["cases"] as? [[String: Any]])
        #expect(cases.count >= 10)
        let model = try Model(contentsOf: Self.nmsOnly, configuration: ModelConfiguration(threads: 1))
        var suppressed = 0
        for (number, testCase) in cases.enumerated() {
            let confidence = try #require(testCase["confidence"] as? [[Double]])
            let coordinates = try #require(testCase["coordinates"] as? [[Double]])
            let kept = try #require(testCase["kept"] as? [Int])
            let iou = try #require(testCase["iouThreshold"] as? Double)
            let threshold = try #require(testCase["confidenceThreshold"] as? Double)
            let outputs = try model.prediction(from: [
                "raw_confidence": .multiArray(MultiArray(confidence.flatMap { $0 }, shape: [confidence.count, 3])),
                "raw_coordinates": .multiArray(MultiArray(coordinates.flatMap { $0 }, shape: [coordinates.count, 4])),
                "iouThreshold": .double(iou), "confidenceThreshold": .double(threshold),
            ])
            let keptBoxes = try #require(outputs["coordinates"]?.multiArrayValue).doubles
            #expect(keptBoxes == kept.flatMap { coordinates[$0] }, "case \(number): the NMS stage")

            // Each object carries its index as its label, to read the order back.
            let candidates = confidence.indices.filter { (confidence[$0].max() ?? 0) >= threshold }.map { index in
                let box = coordinates[index]
                return RecognizedObjectObservation(
                    boundingBox: NormalizedRect(x: box[0] - box[2] / 2, y: box[1] - box[3] / 2, width: box[2], height: box[3]),
                    confidence: Float(confidence[index].max() ?? 0),
                    labels: [ClassificationObservation(identifier: String(index), confidence: 1)])
            }
            let ours = RecognizedObjectObservation.suppressing(candidates, iouThreshold: iou).compactMap { Int($0.labels[0].identifier) }
            #expect(ours == kept, "case \(number): suppressing")
            suppressed += coordinates.count - kept.count
        }
        #expect(suppressed > 100, "the cases exercise suppression")
    }
}
