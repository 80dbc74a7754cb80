import FixtureSupport
import Foundation
import Testing

/// Image outputs written as files, and segmentation outputs drawn as masks;
/// what was written is read back through `modelc classify` and the
/// mean-colour fixture.
@Suite struct ImageOutputTests {
    static let inverter = "Fixtures/Models/ImageInverter.mlmodel"
    static let segmenter = "Fixtures/Models/ColourSegmenter.mlmodel"
    static let meanColor = "Fixtures/Models/MeanColor.mlmodel"
    /// 64×64: red rows on top, blue below.
    static let image = "Fixtures/Images/top-red-bottom-blue.png"

    func modelc(_ arguments: [String]) throws -> ModelcProcess.Result {
        let cache = try Fixtures.temporaryDirectory("outputs-cache")
        return try ModelcProcess.run(arguments, environment: ["MODELC_CACHE": cache.path])
    }

    /// The mean colour of `path` (or of its `roi`), scaled to fill the mean-colour model's input.
    func meanColor(_ path: String, roi: String = "0,0,1,1") throws -> [Double] {
        let result = try modelc(["classify", Self.meanColor, path, "--crop-and-scale", "scale-fill", "--roi", roi, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(Fixtures.parseJSON(result.standardOutput.trimmingCharacters(in: .newlines)) as? [String: Any])
        let observations = try #require(line["observations"] as? [[String: Any]])
        return try #require(observations.first?["featureValue"] as? [Double])
    }

    static func close(_ found: [Double], _ expected: [Double], within tolerance: Double) -> Bool {
        found.count == expected.count && zip(found, expected).allSatisfy { abs($0 - $1) <= tolerance }
    }

    @Test func predictWritesImageOutputsAsPNG() throws {
        let directory = try Fixtures.temporaryDirectory("outputs")
        let result = try modelc(["predict", Self.inverter, "--input", "image=@\(Self.image)", "--output-dir", directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("inverted (image 32×32): rgb pixels"), "\(result.standardOutput)")
        let written = directory.appendingPathComponent("inverted.png").path
        // Red on top inverted is cyan, blue below is yellow.
        #expect(Self.close(try meanColor(written, roi: "0,0.6,1,0.4"), [0, 255, 255], within: 1))
        #expect(Self.close(try meanColor(written, roi: "0,0,1,0.4"), [255, 255, 0], within: 1))
    }

    @Test func classifyAndDetectWriteImageOutputsNamedAfterTheImage() throws {
        for command in ["classify", "detect"] {
            let directory = try Fixtures.temporaryDirectory("outputs")
            let result = try modelc([command, Self.inverter, Self.image, "--output-dir", directory.path])
            #expect(result.status == 0, "\(result.standardError)")
            let written = directory.appendingPathComponent("top-red-bottom-blue-inverted.png").path
            #expect(Self.close(try meanColor(written), [127.5, 255, 127.5], within: 1.5), "\(command)")
        }
    }

    @Test func segmentationIsDrawnAsAColourMask() throws {
        let directory = try Fixtures.temporaryDirectory("masks")
        let result = try modelc(["classify", Self.segmenter, Self.image, "--crop-and-scale", "scale-fill", "--draw", directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let drawn = directory.appendingPathComponent("top-red-bottom-blue.png").path
        // Half image, half mask: class 0 (red) is drawn (230, 25, 75), class 2 (blue) (255, 225, 25).
        #expect(Self.close(try meanColor(drawn, roi: "0,0.6,1,0.4"), [242.5, 12.5, 37.5], within: 1))
        #expect(Self.close(try meanColor(drawn, roi: "0,0,1,0.4"), [127.5, 112.5, 140], within: 1))
    }
}
