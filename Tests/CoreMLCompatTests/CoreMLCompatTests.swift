import CoreMLCompat
import FixtureSupport
import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures
import ModelRuntime
import Testing

/// The Apple-shaped API: a ported iOS program end to end, and each type
/// against the native API it stands on.
/// Calls the synchronous overload of an API that also has an async one.
func synchronously<T>(_ body: () throws -> T) rethrows -> T {
    try body()
}

@Suite struct CoreMLCompatTests {
    static let classifier = Fixtures.path("Models/ImageClassifier.mlmodel")
    static let meanColor = Fixtures.path("Models/MeanColor.mlmodel")
    static let photo = Fixtures.path("Images/tall-bands.png")

    /// A 32×24 BGRA frame with padded rows: left half red, right half blue.
    static func cameraFrame() throws -> CVPixelBuffer {
        let width = 32, height = 24, bytesPerRow = width * 4 + 32
        var bytes = [UInt8](repeating: 0, count: bytesPerRow * height)
        for y in 0..<height {
            for x in 0..<width {
                let pixel = y * bytesPerRow + x * 4
                bytes[pixel + (x < width / 2 ? 2 : 0)] = 255
                bytes[pixel + 3] = 255
            }
        }
        return try #require(PixelBuffer(width: width, height: height, pixelFormat: .bgra, bytesPerRow: bytesPerRow, bytes: bytes))
    }

    @Test func portedProgramDownloadsCompilesWrapsAndClassifies() async throws {
        let server = try TestHTTPServer(serving: Fixtures.path("Models"))
        let storage = try Fixtures.temporaryDirectory("compat-storage")
        let checker = ImageChecker(storage: storage)
        let downloaded: URL = try await withCheckedThrowingContinuation { continuation in
            checker.download(URL(string: server.url("ImageClassifier.mlmodel"))!) { url, error in
                if let url { continuation.resume(returning: url) } else { continuation.resume(throwing: error ?? ImageChecker.CheckError.noModel) }
            }
        }
        try checker.setupVision(url: downloaded)
        // The compiled model was kept where the program put it.
        #expect(FileManager.default.fileExists(atPath: storage.appendingPathComponent("ImageClassifier.mlmodelc/manifest.json").path))

        // The same answers as modelc's own requests on the same images.
        let native = ImageRequest(model: try ImageModel(model: Model(contentsOf: Self.classifier)))
        let frame = try Self.cameraFrame()
        let top = try checker.analyze(pixelBuffer: frame)
        let expected = try await ImageRequestHandler(pixelBuffer: frame).perform(native).classifications
        #expect(top.count == 3)
        #expect(top.map(\.0) == expected.prefix(3).map(\.identifier))
        #expect(top.map(\.1) == expected.prefix(3).map(\.confidence))

        let dog = try checker.confidence(of: "dog", photo: URL(fileURLWithPath: Self.photo))
        let nativeDog = try await ImageRequestHandler(file: Self.photo).perform(native).confidence(of: "dog")
        #expect(dog == nativeDog)
        #expect(throws: ImageChecker.CheckError.self) {
            try checker.confidence(of: "Unsafe", photo: URL(fileURLWithPath: Self.photo))
        }
        // A damaged photo reaches the program as an error naming it.
        let damaged = URL(fileURLWithPath: Fixtures.path("Images/truncated.png"))
        do {
            _ = try checker.confidence(of: "dog", photo: damaged)
            Issue.record("a damaged photo was classified")
        } catch let error as VNError {
            #expect(error.code == .invalidImage && error.localizedDescription.hasPrefix(damaged.path + ": "))
        }
    }

    @Test func compileModelWritesABundleInATemporaryDirectory() async throws {
        let compiled = try synchronously { try MLModel.compileModel(at: URL(fileURLWithPath: Self.classifier)) }
        #expect(compiled.lastPathComponent == "ImageClassifier.mlmodelc")
        #expect(compiled.path.hasPrefix(FileManager.default.temporaryDirectory.path))
        let again = try await MLModel.compileModel(at: URL(fileURLWithPath: Self.classifier))
        #expect(again != compiled && FileManager.default.fileExists(atPath: again.appendingPathComponent("manifest.json").path))

        let missing = URL(fileURLWithPath: "/nonexistent/Model.mlmodel")
        do {
            _ = try synchronously { try MLModel.compileModel(at: missing) }
            Issue.record("compiled a missing file")
        } catch let error as MLModelError {
            #expect(error.code == .io && error.localizedDescription.contains("/nonexistent/Model.mlmodel"))
        }
        #expect(throws: MLModelError.self) { try MLModel(contentsOf: missing) }
    }

    @Test func predictionsThroughFeatureProviders() async throws {
        let configuration = MLModelConfiguration()
        configuration.computeUnits = .cpuOnly
        let model = try MLModel(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/GLMClassifier.mlmodel")), configuration: configuration)
        #expect(model.configuration.computeUnits == .cpuOnly)
        let description = model.modelDescription
        #expect(description.inputDescriptionsByName["features"]?.type == .multiArray)
        #expect(description.inputDescriptionsByName["features"]?.multiArrayConstraint?.shape.map(\.intValue) == [4])
        #expect(description.predictedFeatureName == "species")

        let features = try MLMultiArray(shape: [4], dataType: .double)
        for (index, value) in [1.0, 2, 3, 4].enumerated() { features[index] = NSNumber(value: value) }
        #expect(features[[NSNumber(value: 2)]].doubleValue == 3)
        let input = try MLDictionaryFeatureProvider(dictionary: ["features": features])
        let output = try synchronously { try model.prediction(from: input) }
        let asynchronous = try await model.prediction(from: input)

        let native = try await Model(contentsOf: Fixtures.path("Models/GLMClassifier.mlmodel"))
            .prediction(from: ["features": .multiArray(MultiArray([1, 2, 3, 4], shape: [4]))])
        #expect(output.featureNames == Set(native.keys))
        for name in native.keys {
            #expect(output.featureValue(for: name)?.value == native[name])
            #expect(asynchronous.featureValue(for: name)?.value == native[name])
        }
        let probabilitiesName = try #require(description.predictedProbabilitiesName)
        let probabilities = try #require(output.featureValue(for: probabilitiesName))
        #expect(probabilities.type == .dictionary && probabilities.dictionaryValue.count == 3)

        // A wrong input names the feature.
        let wrong = try MLDictionaryFeatureProvider(dictionary: ["features": "text"])
        do {
            _ = try synchronously { try model.prediction(from: wrong) }
            Issue.record("a string was taken for a multi-array")
        } catch let error as MLModelError {
            #expect(error.code == .featureType && error.description.contains("\"features\""))
        }
        #expect(throws: MLModelError.self) { try MLDictionaryFeatureProvider(dictionary: ["features": Date()]) }
    }

    @Test func visionOptionsAndFeatureValueObservations() throws {
        let model = try VNCoreMLModel(for: MLModel(contentsOf: URL(fileURLWithPath: Self.meanColor)))
        #expect(model.inputImageFeatureName == "image")
        let request = VNCoreMLRequest(model: model)
        request.imageCropAndScaleOption = .scaleFill
        request.regionOfInterest = CGRect(x: 0, y: 0, width: 1, height: 0.5)
        let handler = VNImageRequestHandler(url: URL(fileURLWithPath: Fixtures.path("Images/top-red-bottom-blue.png")), options: [:])
        try handler.perform([request])
        let observation = try #require(request.results?.first as? VNCoreMLFeatureValueObservation)
        #expect(observation.featureName == "meanColor")
        let color = try #require(observation.featureValue.multiArrayValue)
        #expect((0..<3).map { color[$0].doubleValue } == [0, 0, 255])

        // A frame turned upright by its orientation: .right puts the stored bottom row on the left.
        request.regionOfInterest = CGRect(x: 0, y: 0, width: 1, height: 1)
        let frame = try Self.cameraFrame()
        try VNImageRequestHandler(cvPixelBuffer: frame, orientation: .right, options: [:]).perform([request])
        let turned = try #require((request.results?.first as? VNCoreMLFeatureValueObservation)?.featureValue.multiArrayValue)
        #expect(abs(turned[0].doubleValue - 127.5) < 1 && abs(turned[2].doubleValue - 127.5) < 1)

        request.regionOfInterest = CGRect(x: 0.5, y: 0, width: 1, height: 1)
        var reported: (any Error)?
        let checked = VNCoreMLRequest(model: model) { _, error in reported = error }
        checked.regionOfInterest = request.regionOfInterest
        #expect(throws: VNError.self) { try handler.perform([checked]) }
        #expect((reported as? VNError)?.code == .invalidArgument && checked.results == nil)
    }

    @Test func featureValuesOfEveryKind() throws {
        let labels = try MLFeatureValue(dictionary: ["cat": 0.75, "dog": 0.25])
        #expect(labels.type == .dictionary && labels.dictionaryValue["cat"]?.doubleValue == 0.75)
        let classes = try MLFeatureValue(dictionary: [3: NSNumber(value: 0.5), 7: NSNumber(value: 0.5)])
        #expect(classes.value == .dictionary(.int64s([3: 0.5, 7: 0.5])))
        #expect(throws: MLModelError.self) { try MLFeatureValue(dictionary: ["cat": 1, 3: 0]) }
        #expect(MLFeatureValue(int64: 4).doubleValue == 4 && MLFeatureValue(double: 2.9).int64Value == 2)
        #expect(MLFeatureValue(string: "x").stringValue == "x" && MLFeatureValue(string: "x").multiArrayValue == nil)
        #expect(MLFeatureValue(undefined: .double).isUndefined)

        let array = try MLMultiArray(shape: [2, 3], dataType: .float32)
        array[[1, 2]] = 5
        #expect(array.strides.map(\.intValue) == [3, 1] && array[5].floatValue == 5 && array.dataType == .float)
        array.withUnsafeMutableBytes { bytes, strides in
            #expect(strides == [3, 1])
            bytes.storeBytes(of: Float(7), toByteOffset: 0, as: Float.self)
        }
        #expect(MLFeatureValue(multiArray: array).multiArrayValue?[0].floatValue == 7)
        #expect(throws: MLModelError.self) { try MLMultiArray(shape: [2, -1], dataType: .double) }
    }

    @Test func modelsWithoutAnImageCannotBeWrapped() throws {
        let glm = try MLModel(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/GLMClassifier.mlmodel")))
        do {
            _ = try VNCoreMLModel(for: glm)
            Issue.record("a model without an image was wrapped")
        } catch let error as VNError {
            #expect(error.code == .invalidModel && error.description.contains("takes no image"))
        }
    }

    /// Seed 000's pipeline (PortedProgramTests.swift: `EmotionReader`): the
    /// face in the portrait, then the classifier on the face's region; the
    /// same labels as modelc's own requests on that region.
    @Test func portedFaceThenEmotionPipeline() throws {
        let portrait = Fixtures.path("Faces/astronaut.jpg")
        let reader = try EmotionReader(image: URL(fileURLWithPath: portrait), emotionClassifier: URL(fileURLWithPath: Self.classifier))
        let found = try reader.read()
        #expect(found.count == 1)
        let (box, labels) = try #require(found.first)
        // The hand-marked eyes and mouth (Fixtures/Faces/README.md) are inside, lower-left origin.
        for (x, y) in [(140.0, 103.0), (188.0, 103.0), (165.0, 145.0)] {
            let (nx, ny) = (x / 320, 1 - y / 320)
            #expect(nx > box.origin.x && nx < box.origin.x + box.size.width && ny > box.origin.y && ny < box.origin.y + box.size.height)
        }
        let region = NormalizedRect(x: Double(box.origin.x), y: Double(box.origin.y), width: Double(box.size.width), height: Double(box.size.height))
        let native = ImageRequest(model: try ImageModel(model: Model(contentsOf: Self.classifier)), regionOfInterest: region)
        let expected = try ImageRequestHandler(file: portrait).perform(native).classifications
        #expect(labels.map(\.identifier) == expected.map(\.identifier))
        #expect(labels.map(\.confidence) == expected.map(\.confidence))
    }

    /// The same request objects over consecutive BGRA frames.
    @Test func sequenceHandlerRunsTheSameRequestsOnEachFrame() throws {
        let model = try VNCoreMLModel(for: MLModel(contentsOf: URL(fileURLWithPath: Self.meanColor)))
        let request = VNCoreMLRequest(model: model)
        request.imageCropAndScaleOption = .scaleFill
        let faces = VNDetectFaceRectanglesRequest()
        let sequence = VNSequenceRequestHandler()
        var means: [[Double]] = []
        for shade in [0, 128, 255] {
            // Opaque gray BGRA (alpha 255: a transparent pixel would be flattened onto black).
            let bytes = (0..<(16 * 12 * 4)).map { $0 % 4 == 3 ? 255 : UInt8(shade) }
            let frame = try #require(PixelBuffer(width: 16, height: 12, pixelFormat: .bgra, bytes: bytes))
            try sequence.perform([request, faces], on: frame)
            let mean = try #require((request.results?.first as? VNCoreMLFeatureValueObservation)?.featureValue.multiArrayValue)
            means.append((0..<3).map { mean[$0].doubleValue })
            #expect(faces.results?.isEmpty == true)
        }
        #expect(means == [[0, 0, 0], [128, 128, 128], [255, 255, 255]])
    }

    /// A model whose output is an image gives pixel-buffer observations.
    @Test func imageOutputsArePixelBufferObservations() throws {
        let model = try VNCoreMLModel(for: MLModel(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/ImageInverter.mlmodel"))))
        let request = VNCoreMLRequest(model: model)
        request.imageCropAndScaleOption = .scaleFill
        try VNImageRequestHandler(url: URL(fileURLWithPath: Fixtures.path("Images/top-red-bottom-blue.png")), options: [:]).perform([request])
        let observation = try #require(request.results?.first as? VNPixelBufferObservation)
        #expect(observation.featureName == "inverted")
        let buffer = observation.pixelBuffer
        #expect(buffer.width == 32 && buffer.height == 32)
        // Red on top becomes cyan; blue below becomes yellow.
        let (red, green, blue) = buffer.pixelFormat.rgbOffsets
        let top = 4 * buffer.bytesPerRow + 16 * buffer.pixelFormat.bytesPerPixel
        let bottom = 28 * buffer.bytesPerRow + 16 * buffer.pixelFormat.bytesPerPixel
        #expect([buffer.bytes[top + red], buffer.bytes[top + green], buffer.bytes[top + blue]] == [0, 255, 255])
        #expect([buffer.bytes[bottom + red], buffer.bytes[bottom + green], buffer.bytes[bottom + blue]] == [255, 255, 0])
    }
}
