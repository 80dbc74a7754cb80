import FixtureSupport
import Foundation
import ImageDecoding
@testable import ImageRequests
import ModelFeatures
import ModelRuntime
import Testing

/// Image requests on real files and pixel buffers, read through the
/// mean-colour fixture model: its output is the mean red, green and blue of
/// the image the request gave it, so crop, scale and region of interest can
/// be checked against colours worked out by hand.
@Suite struct ImageRequestTests {
    static let meanColor = Fixtures.path("Models/MeanColor.mlmodel")
    static let classifier = Fixtures.path("Models/ImageClassifier.mlmodel")
    /// 200×100: red for x < 30, green to x < 170, blue after.
    static let wide = Fixtures.path("Images/wide-bands.png")
    /// 100×200: the same bands from top to bottom.
    static let tall = Fixtures.path("Images/tall-bands.png")
    /// 64×64: red rows on top, blue below.
    static let topRedBottomBlue = Fixtures.path("Images/top-red-bottom-blue.png")

    static func model(_ path: String, threads: Int = 1) throws -> ImageModel {
        try ImageModel(model: Model(contentsOf: path, configuration: ModelConfiguration(threads: threads)))
    }

    /// The mean colour a request finds in an image.
    static func meanColor(_ handler: ImageRequestHandler, _ request: ImageRequest) throws -> [Double] {
        let result = try handler.perform(request)
        let observation = try #require(result.featureValues.first)
        #expect(observation.featureName == "meanColor")
        return try #require(observation.featureValue.multiArrayValue).doubles
    }

    static func expectColor(_ found: [Double], _ expected: [Double], within tolerance: Double,
                            sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(found.count == 3 && zip(found, expected).allSatisfy { abs($0 - $1) <= tolerance },
                "mean colour \(found), expected \(expected) ± \(tolerance)", sourceLocation: sourceLocation)
    }

    @Test(arguments: [wide, tall])
    func centerCropKeepsTheMiddleSquare(path: String) throws {
        // The middle 100×100 lies within the green band, 20 pixels clear of each edge.
        let request = ImageRequest(model: try Self.model(Self.meanColor))
        Self.expectColor(try Self.meanColor(ImageRequestHandler(file: path), request), [0, 255, 0], within: 0.5)
    }

    @Test(arguments: [wide, tall])
    func scaleFillStretchesEverything(path: String) throws {
        // 30 of 200 columns (rows) red, 140 green, 30 blue; resampling keeps the mean.
        let request = ImageRequest(model: try Self.model(Self.meanColor), cropAndScale: .scaleFill)
        Self.expectColor(try Self.meanColor(ImageRequestHandler(file: path), request), [38.25, 178.5, 38.25], within: 1)
    }

    @Test(arguments: [wide, tall])
    func scaleFitLeavesBlackBars(path: String) throws {
        // The image fills half of the square input; the other half is black.
        let request = ImageRequest(model: try Self.model(Self.meanColor), cropAndScale: .scaleFit)
        Self.expectColor(try Self.meanColor(ImageRequestHandler(file: path), request), [19.125, 89.25, 19.125], within: 1)
    }

    @Test func regionOfInterestHasItsOriginAtTheLowerLeft() throws {
        let model = try Self.model(Self.meanColor)
        let handler = ImageRequestHandler(file: Self.topRedBottomBlue)
        let bottom = ImageRequest(model: model, cropAndScale: .scaleFill,
                                  regionOfInterest: NormalizedRect(x: 0, y: 0, width: 1, height: 0.5))
        let top = ImageRequest(model: model, cropAndScale: .scaleFill,
                               regionOfInterest: NormalizedRect(x: 0.25, y: 0.5, width: 0.5, height: 0.5))
        Self.expectColor(try Self.meanColor(handler, bottom), [0, 0, 255], within: 0.5)
        Self.expectColor(try Self.meanColor(handler, top), [255, 0, 0], within: 0.5)

        var outside = bottom
        outside.regionOfInterest = NormalizedRect(x: 0.5, y: 0, width: 0.75, height: 1)
        #expect(throws: ImageRequestError.image(.invalidRegionOfInterest(outside.regionOfInterest))) {
            try handler.perform(outside)
        }
    }

    /// A camera frame: BGRA with padded rows, stored on its side.
    @Test func pixelBuffersAreTurnedUprightAndReadInTheirLayout() throws {
        // Stored 32 wide × 64 high: red rows on top, blue below, 16 bytes of padding per row
        // (sizes for which the left half is resized by whole factors).
        let width = 32, height = 64, bytesPerRow = width * 4 + 16
        var bytes = [UInt8](repeating: 7, count: bytesPerRow * height)
        for y in 0..<height {
            for x in 0..<width {
                let pixel = y * bytesPerRow + x * 4
                let (b, g, r): (UInt8, UInt8, UInt8) = y < height / 2 ? (0, 0, 255) : (255, 0, 0)
                bytes[pixel] = b
                bytes[pixel + 1] = g
                bytes[pixel + 2] = r
                bytes[pixel + 3] = 255
            }
        }
        let frame = try #require(PixelBuffer(width: width, height: height, pixelFormat: .bgra, bytesPerRow: bytesPerRow, bytes: bytes))
        let model = try Self.model(Self.meanColor)
        let left = ImageRequest(model: model, cropAndScale: .scaleFill,
                                regionOfInterest: NormalizedRect(x: 0, y: 0, width: 0.5, height: 1))
        // As stored, the left half is red above blue.
        Self.expectColor(try Self.meanColor(ImageRequestHandler(pixelBuffer: frame), left), [127.5, 0, 127.5], within: 1)
        // Turned 90° clockwise to be shown (.right), the stored bottom (blue) is on the left.
        Self.expectColor(try Self.meanColor(ImageRequestHandler(pixelBuffer: frame, orientation: .right), left), [0, 0, 255], within: 0.5)
    }

    @Test func oneHandlerServesSeveralRequestsInOrder() throws {
        let meanColor = try Self.model(Self.meanColor)
        let classifier = try Self.model(Self.classifier)
        let requests = [ImageRequest(model: meanColor), ImageRequest(model: classifier),
                        ImageRequest(model: meanColor, cropAndScale: .scaleFit)]
        let handler = ImageRequestHandler(file: Self.wide)
        let together = try handler.perform(requests)
        #expect(together.count == 3)
        Self.expectColor(try #require(together[0].featureValues.first?.featureValue.multiArrayValue).doubles, [0, 255, 0], within: 0.5)
        Self.expectColor(try #require(together[2].featureValues.first?.featureValue.multiArrayValue).doubles, [19.125, 89.25, 19.125], within: 1)
        // Each result is what the request gives alone (the image is decoded once, not differently).
        let alone = try handler.perform(requests[1]).classifications
        #expect(together[1].classifications == alone)
    }

    @Test func classificationsAreEveryLabelMostConfidentFirst() throws {
        let request = ImageRequest(model: try Self.model(Self.classifier))
        let result = try ImageRequestHandler(file: Self.tall).perform(request)
        let observations = result.classifications
        #expect(Set(observations.map(\.identifier)) == ["cat", "dog", "bird"])
        #expect(zip(observations, observations.dropFirst()).allSatisfy { $0.confidence >= $1.confidence })
        #expect(abs(observations.map(\.confidence).reduce(0, +) - 1) < 1e-5)
        #expect(result.featureValues.isEmpty)

        // The same numbers as the model's own probability output on the same pixels.
        let pixels = try ImageDecoder().decode(file: Self.tall, fitting: ImageFitting(width: 16, height: 16))
        let outputs = try Model(contentsOf: Self.classifier).prediction(from: ["image": .image(pixels)])
        guard case .strings(let probabilities)? = outputs["classLabelProbs"]?.dictionaryValue else {
            Issue.record("no probabilities")
            return
        }
        for observation in observations {
            #expect(observation.confidence == Float(try #require(probabilities[observation.identifier])))
        }
        #expect(try result.confidence(of: "dog") == observations.first { $0.identifier == "dog" }?.confidence)
        #expect(throws: ImageRequestError.unknownLabel(label: "Unsafe", model: Self.classifier, labels: ["bird", "cat", "dog"])) {
            try result.confidence(of: "Unsafe")
        }
    }

    @Test func enumeratedAndRangedSizesFollowTheImage() throws {
        let enumerated = try Self.model(Fixtures.path("Models/MeanColorEnumerated.mlmodel"))
        // Sizes 32×32, 64×32, 16×16: the largest within the image, else the smallest.
        #expect(enumerated.inputSize(forImageWidth: 200, height: 100) == (64, 32))
        #expect(enumerated.inputSize(forImageWidth: 40, height: 40) == (32, 32))
        #expect(enumerated.inputSize(forImageWidth: 20, height: 60) == (16, 16))
        #expect(enumerated.inputSize(forImageWidth: 8, height: 8) == (16, 16))
        let ranged = try Self.model(Fixtures.path("Models/ImageClassifierFlexible.mlmodel"))
        // Widths 8…64, heights 8 and up.
        #expect(ranged.inputSize(forImageWidth: 200, height: 100) == (64, 100))
        #expect(ranged.inputSize(forImageWidth: 4, height: 30) == (8, 30))
        let fixed = try Self.model(Self.meanColor)
        #expect(fixed.inputSize(forImageWidth: 200, height: 100) == (32, 32))

        // A wide image runs at 64×32, so centre crop keeps 200×100 whole: the stretched mean.
        let handler = ImageRequestHandler(file: Self.wide)
        Self.expectColor(try Self.meanColor(handler, ImageRequest(model: enumerated)), [38.25, 178.5, 38.25], within: 1)
        // Its left half (100×100) runs at 32×32.
        let left = ImageRequest(model: enumerated, regionOfInterest: NormalizedRect(x: 0, y: 0, width: 0.5, height: 1))
        Self.expectColor(try Self.meanColor(handler, left), [76.5, 178.5, 0], within: 1)
        _ = try ImageRequestHandler(file: Self.wide).perform([ImageRequest(model: ranged), ImageRequest(model: enumerated)])
    }

    @Test func modelsWithoutAnImageAreRefusedWhenWrapped() throws {
        let glm = Fixtures.path("Models/GLMClassifier.mlmodel")
        #expect(throws: ImageRequestError.notAnImageModel(model: "glm", inputs: ["features"])) {
            try ImageModel(model: Model(contentsOf: glm), name: "glm")
        }
        #expect(throws: ImageRequestError.noSuchImageInput(model: "m", name: "photo", imageInputs: ["image"])) {
            try ImageModel(model: Model(contentsOf: Self.meanColor), imageInput: "photo", name: "m")
        }
        let message = ImageRequestError.notAnImageModel(model: "glm", inputs: ["features"]).description
        #expect(message == "glm: the model takes no image (its inputs: \"features\")")
    }

    @Test func damagedAndMissingImagesNameTheFile() throws {
        let request = ImageRequest(model: try Self.model(Self.meanColor))
        for name in ["truncated.png", "not-an-image.png", "absent.png"] {
            let path = Fixtures.path("Images/" + name)
            do {
                _ = try ImageRequestHandler(file: path).perform(request)
                Issue.record("\(name) was accepted")
            } catch {
                guard case .image = error else {
                    Issue.record("\(name): \(error)")
                    continue
                }
                #expect(error.description.hasPrefix(path + ": "))
            }
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.topRedBottomBlue)))
        let fromBytes = ImageRequestHandler(bytes: bytes, name: "upload")
        Self.expectColor(try Self.meanColor(fromBytes, ImageRequest(model: request.model, cropAndScale: .scaleFill)),
                         [127.5, 0, 127.5], within: 1)
        #expect(throws: ImageRequestError.image(.damaged(file: "upload", reason: "the file is empty"))) {
            try ImageRequestHandler(bytes: [], name: "upload").perform(request)
        }
    }

    @Test func oneRequestServesManyHandlersAtOnce() async throws {
        let request = ImageRequest(model: try Self.model(Self.classifier, threads: 2))
        let paths = [Self.wide, Self.tall, Self.topRedBottomBlue]
        let expected = try paths.map { try ImageRequestHandler(file: $0).perform(request).classifications }
        try await withThrowingTaskGroup(of: (Int, [ClassificationObservation]).self) { group in
            for index in 0..<24 {
                group.addTask {
                    let path = paths[index % paths.count]
                    return (index, try await ImageRequestHandler(file: path).perform(request).classifications)
                }
            }
            for try await (index, found) in group {
                #expect(found == expected[index % paths.count])
            }
        }
    }

    @Test func modelsThroughTheCacheAreReloadedAfterEviction() async throws {
        let cache = RunnableModelCache(budget: 1 << 30, configuration: ModelConfiguration(threads: 1))
        let model = try await ImageModel(contentsOf: Self.meanColor, cache: cache)
        let request = ImageRequest(model: model)
        let handler = ImageRequestHandler(file: Self.wide)
        let first = try await handler.perform(request)
        cache.evict(toAtMost: 0)
        #expect(cache.statistics.modelsResident == 0)
        let second = try await handler.perform(request)
        #expect(cache.statistics.loads == 2)
        for result in [first, second] {
            Self.expectColor(try #require(result.featureValues.first?.featureValue.multiArrayValue).doubles, [0, 255, 0], within: 0.5)
        }
        #expect(throws: ImageRequestError.cachedModelNeedsAsync(model: Self.meanColor)) {
            try handler.perform(request)
        }
    }
}
