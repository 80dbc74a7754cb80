import FixtureSupport
import Foundation
import Testing

/// `modelc detect` run as a user runs it, on the detector fixture (one box:
/// a blob's centre ± 2 standard deviations) and on bad input.
@Suite struct DetectCommandTests {
    static let detector = "Fixtures/Models/Detector.mlmodel"
    static let scene = BlobScene(width: 200, height: 120, centreX: 96, centreY: 66, sdX: 9, sdY: 7)

    func detect(_ arguments: [String]) throws -> ModelcProcess.Result {
        let cache = try Fixtures.temporaryDirectory("detect-cache")
        return try ModelcProcess.run(["detect"] + arguments, environment: ["MODELC_CACHE": cache.path])
    }

    /// The scene written into `directory` as `name` (PNG, or JPEG with an EXIF orientation).
    static func write(into directory: URL, name: String, orientation: UInt32? = nil) throws -> String {
        let stored = scene.stored(orientation: orientation ?? 1)
        let suffix = name.hasSuffix(".jpg") ? ".jpg[Q=98]" : ".png"
        let data = try GeneratedImages.encode(stored.pixels, width: stored.width, height: stored.height, suffix: suffix,
                                              bands: 1, orientation: orientation)
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        return url.path
    }

    @Test func jsonLinesGiveBoxesInPixelsAndNormalized() throws {
        let directory = try Fixtures.temporaryDirectory("detect-images")
        let plain = try Self.write(into: directory, name: "scene.png")
        let turned = try Self.write(into: directory, name: "turned.jpg", orientation: 6)
        let result = try detect([Self.detector, plain, turned, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").compactMap { Fixtures.parseJSON(String($0)) as? [String: Any] }
        #expect(lines.map { $0["image"] as? String } == [plain, turned])
        let expected = Self.scene.expectedBox
        for line in lines {
            #expect(line["width"] as? Int == 200 && line["height"] as? Int == 120, "upright size")
            let objects = try #require(line["objects"] as? [[String: Any]])
            #expect(objects.count == 1)
            let object = try #require(objects.first)
            #expect(object["label"] as? String == "blob")
            #expect((object["labels"] as? [[String: Any]])?.compactMap { $0["identifier"] as? String } == ["blob", "background"])
            let pixels = try #require(object["pixels"] as? [String: Double])
            let box = try #require(object["boundingBox"] as? [String: Double])
            let found = [pixels["x"], pixels["y"], pixels["width"], pixels["height"]].compactMap { $0 }
            #expect(zip(found, [expected.x, expected.y, expected.width, expected.height]).allSatisfy { abs($0 - $1) <= 0.5 },
                    "\(found)")
            // Normalized with the origin at the lower left.
            let lowerY = 1 - (expected.y + expected.height) / 120
            #expect(abs((box["y"] ?? .nan) - lowerY) < 0.5 / 120 && abs((box["x"] ?? .nan) - expected.x / 200) < 0.5 / 200)
        }
    }

    @Test func plainTextShowsEachObject() throws {
        let path = try Self.write(into: try Fixtures.temporaryDirectory("detect-images"), name: "scene.png")
        let result = try detect([Self.detector, path, "--crop-and-scale", "scale-fit", "--iou-threshold", "0.9"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first == "\(path) (200×120): 2 objects", "\(result.standardOutput)")
        #expect(lines.count == 3 && lines[1].hasPrefix("  0.9000  blob  x 78.") && lines[2].hasPrefix("  0.6000  blob"))
    }

    @Test func drawWritesEachImageWithItsBoxes() throws {
        let directory = try Fixtures.temporaryDirectory("detect-images")
        let png = try Self.write(into: directory, name: "scene.png")
        let jpeg = try Self.write(into: directory, name: "turned.jpg", orientation: 8)
        let output = try Fixtures.temporaryDirectory("detect-drawn")
        let result = try detect([Self.detector, png, jpeg, "--draw", output.path])
        #expect(result.status == 0, "\(result.standardError)")
        let drawnPNG = try Data(contentsOf: output.appendingPathComponent("scene.png"))
        let drawnJPEG = try Data(contentsOf: output.appendingPathComponent("turned.jpg"))
        #expect(drawnPNG.starts(with: [0x89, 0x50, 0x4E, 0x47]) && drawnJPEG.starts(with: [0xFF, 0xD8, 0xFF]))
        // Upright, 200 × 120, RGB: the PNG header's width, height and colour type.
        let header = [UInt8](drawnPNG.prefix(26))
        #expect(Array(header[16..<24]) == [0, 0, 0, 200, 0, 0, 0, 120] && header[25] == 2)
    }

    @Test func aModelWithoutAnImageInputExits95() throws {
        let path = try Self.write(into: try Fixtures.temporaryDirectory("detect-images"), name: "scene.png")
        let result = try detect(["Fixtures/Models/GLMClassifier.mlmodel", path])
        #expect(result.status == 95)
        #expect(result.standardError.contains("takes no image"), "\(result.standardError)")
    }

    @Test func anImageThatDoesNotDecodeIsNamedAndTheOthersGoOn() throws {
        let path = try Self.write(into: try Fixtures.temporaryDirectory("detect-images"), name: "scene.png")
        let broken = "Fixtures/Images/not-an-image.png"
        let result = try detect([Self.detector, broken, path])
        #expect(result.status == 97)
        #expect(result.standardError.contains(broken), "\(result.standardError)")
        #expect(result.standardOutput.contains("\(path) (200×120): 1 object"))
        let json = try detect([Self.detector, broken, path, "--json"])
        #expect(json.status == 97)
        let lines = json.standardOutput.split(separator: "\n").compactMap { Fixtures.parseJSON(String($0)) as? [String: Any] }
        #expect(lines.count == 2 && lines[0]["error"] is String && lines[1]["objects"] is [Any])
    }

    @Test(arguments: [["--min-confidence", "1.5"], ["--iou-threshold", "-0.1"], ["--min-confidence", "x"]])
    func thresholdsOutsideZeroToOneExit64(option: [String]) throws {
        let result = try detect([Self.detector, "Fixtures/Images/wide-bands.png"] + option)
        #expect(result.status == 64)
        #expect(result.standardError.contains(option[0].dropFirst(2)), "\(result.standardError)")
    }

    // MARK: - Faces

    static let portrait = "Fixtures/Faces/astronaut.jpg"

    @Test func facesInAPortraitAndNoneElsewhere() throws {
        let result = try detect(["--faces", Self.portrait, "Fixtures/Images/wide-bands.png", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").compactMap { Fixtures.parseJSON(String($0)) as? [String: Any] }
        #expect(lines.count == 2)
        let faces = try #require(lines.first?["faces"] as? [[String: Any]])
        #expect(faces.count == 1 && (lines.last?["faces"] as? [Any])?.isEmpty == true)
        let pixels = try #require(faces.first?["pixels"] as? [String: Double])
        // The hand-marked eyes (140, 103), (188, 103) and mouth (165, 145) are inside.
        let (x, y) = (pixels["x"] ?? .nan, pixels["y"] ?? .nan)
        let (width, height) = (pixels["width"] ?? .nan, pixels["height"] ?? .nan)
        #expect(x < 140 && x + width > 188 && y < 103 && y + height > 145, "\(pixels)")
        #expect(faces.first?["roll"] as? Double == 0 && faces.first?["yaw"] as? Double == 0)
    }

    @Test func classifyRegionsFacesRunsTheModelOnEachFace() throws {
        let cache = try Fixtures.temporaryDirectory("detect-cache")
        let drawn = try Fixtures.temporaryDirectory("faces-drawn")
        let result = try ModelcProcess.run(["classify", "Fixtures/Models/ImageClassifier.mlmodel", Self.portrait,
                                            "--regions", "faces", "--top", "2", "--draw", drawn.path],
                                           environment: ["MODELC_CACHE": cache.path])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(result.standardOutput)")
        #expect(lines.first == "\(Self.portrait) (320×320): 1 face")
        #expect(lines.dropFirst().first?.hasPrefix("  face 1  0.") == true)
        #expect(lines.dropFirst(2).allSatisfy { $0.hasPrefix("    0.") })
        let image = try Data(contentsOf: drawn.appendingPathComponent("astronaut.jpg"))
        #expect(image.starts(with: [0xFF, 0xD8, 0xFF]))
    }

    @Test func aMissingFaceDetectorIsOneLineNamingWhatToInstall() throws {
        let cache = try Fixtures.temporaryDirectory("detect-cache")
        let result = try ModelcProcess.run(["detect", "--faces", Self.portrait],
                                           environment: ["MODELC_CACHE": cache.path, "MODELC_FACES_LIBRARY": "/nonexistent/libModelcFaces.so"])
        #expect(result.status == 105)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1 && result.standardError.contains("libdlib19.1"), "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
    }
}
