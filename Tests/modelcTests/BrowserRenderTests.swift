import FixtureSupport
import Foundation
import ImageDecoding
import Testing

/// The graph pages, SVGs and report pages loaded in a real browser: Debian's
/// headless Chromium loads each file (with every host name unresolvable, so
/// a reference outside the file would fail and log), takes a screenshot and
/// dumps the DOM after the page's script ran. A test fails on any console
/// message (errors, failed loads), on a blank screenshot, or when the
/// graph page's script did not do its work (pan/zoom set up, `#search=`).
/// The screenshots are kept in `.build/browser-screenshots/` for a look.
@Suite(.serialized) struct BrowserRenderTests {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let screenshots = Fixtures.packageRoot.appendingPathComponent(".build/browser-screenshots")

    struct Loaded {
        let dom: String
        let console: [String]
        /// The share of screenshot pixels that are not near-white.
        let ink: Double
    }

    /// Loads `file` (with `fragment`, if any) and screenshots it as `name`.png.
    static func load(_ file: String, fragment: String = "", name: String) throws -> Loaded {
        let chromium = try #require(chromium, "Chromium is not installed (make test installs Debian's chromium)")
        let profile = try Fixtures.temporaryDirectory("chromium")
        defer { try? FileManager.default.removeItem(at: profile) }
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let png = screenshots.appendingPathComponent(name + ".png")
        try? FileManager.default.removeItem(at: png)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--disable-extensions",
            "--user-data-dir=\(profile.path)", "--enable-logging=stderr", "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1200,900",
            "--screenshot=\(png.path)", "--dump-dom", URL(fileURLWithPath: file).absoluteString + fragment,
        ]
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let group = DispatchGroup()
        nonisolated(unsafe) var dom = Data(), log = Data()
        DispatchQueue.global().async(group: group) { dom = output.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { log = error.fileHandleForReading.readDataToEndOfFile() }
        if group.wait(timeout: .now() + 90) == .timedOut {
            process.terminate()
            Issue.record("Chromium did not finish loading \(file) in 90 s")
        }
        process.waitUntilExit()
        let console = String(decoding: log, as: UTF8.self).split(separator: "\n").filter { $0.contains(":CONSOLE") }.map(String.init)
        let pixels = try ImageDecoder(pixelFormat: .rgb).decode(file: png.path)
        var inked = 0
        for row in 0..<pixels.height {
            for column in 0..<pixels.width {
                let offset = row * pixels.bytesPerRow + column * 3
                if pixels.bytes[offset] < 235 || pixels.bytes[offset + 1] < 235 || pixels.bytes[offset + 2] < 235 { inked += 1 }
            }
        }
        return Loaded(dom: String(decoding: dom, as: UTF8.self), console: console, ink: Double(inked) / Double(pixels.width * pixels.height))
    }

    static func modelc(_ arguments: [String], environment: [String: String] = [:]) throws {
        let result = try ModelcProcess.run(arguments, environment: environment)
        #expect(result.status == 0, "\(arguments): \(result.standardError)")
    }

    @Test(arguments: [
        ("Models/ImageClassifier.mlmodel", "ngroups", 2),  // only in the tooltips
        ("Graph/ControlFlowProgram.mlpackage", "dense_then", 1),
        ("Models/MultiFunctionProgram.mlpackage", "constexpr_lut_to_dense", 2),
        ("Graph/LongProgram.mlpackage", "relu123", 1),
    ])
    func graphPageRendersAndSearches(model: String, query: String, hits: Int) throws {
        let directory = try Fixtures.temporaryDirectory("browser")
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("graph.html").path
        try Self.modelc(["inspect", "Fixtures/" + model, "--graph", page])
        let name = "graph-" + URL(fileURLWithPath: model).deletingPathExtension().lastPathComponent
        let loaded = try Self.load(page, fragment: "#search=" + query, name: name)
        #expect(loaded.console.isEmpty, "console: \(loaded.console)")
        #expect(loaded.ink > 0.02, "blank page: \(loaded.ink)")
        // The script ran: the SVG fills the view (its fixed size removed) and the search found its boxes.
        let svgStart = try #require(loaded.dom.range(of: "<svg"))
        #expect(!loaded.dom[svgStart.lowerBound...].prefix(200).contains("width=\""), "the page's script did not set up the view")
        #expect(Self.count("class=\"node hit\"", in: loaded.dom) == hits)
        #expect(loaded.dom.contains("<span id=\"matches\">\(hits) \(hits == 1 ? "match" : "matches")</span>"))
    }

    @Test func svgFilesRenderWithGraphvizAndWithTheFallbackLayout() throws {
        let directory = try Fixtures.temporaryDirectory("browser")
        defer { try? FileManager.default.removeItem(at: directory) }
        let pipeline = directory.appendingPathComponent("pipeline.svg").path
        try Self.modelc(["inspect", "Fixtures/Models/PipelineClassifier.mlmodel", "--graph", pipeline])
        let drawn = try Self.load(pipeline, name: "graph-pipeline-svg")
        #expect(drawn.console.isEmpty, "console: \(drawn.console)")
        #expect(drawn.ink > 0.01, "blank: \(drawn.ink)")
        #expect(Self.count("class=\"node\"", in: drawn.dom) == 9)

        let fallback = directory.appendingPathComponent("long.svg").path
        try Self.modelc(["inspect", "Fixtures/Graph/LongProgram.mlpackage", "--graph", fallback], environment: ["MODELC_GRAPH_NODE_LIMIT": "100"])
        let layered = try Self.load(fallback, name: "graph-fallback-svg")
        #expect(layered.console.isEmpty, "console: \(layered.console)")
        #expect(layered.ink > 0.005, "blank: \(layered.ink)")
        #expect(Self.count("class=\"node\"", in: layered.dom) == 1002)
    }

    @Test func reportPagesRender() throws {
        let directory = try TemporaryDirectory()
        let data = directory.path + "/data", misfiled = directory.path + "/misfiled"
        try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 14, into: data, seed: 31)
        try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 10, into: misfiled, seed: 32)
        try GeneratedImages.write(labels: ["red"], count: 2, into: directory.path + "/extra", seed: 33)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path + "/extra/red") {
            try FileManager.default.moveItem(atPath: directory.path + "/extra/red/" + name, toPath: misfiled + "/blue/" + name)
        }
        let model = directory.path + "/Colors.mlmodel"
        let environment = ["MODELC_CACHE": directory.path + "/cache"]
        try Self.modelc(["train", "image-classifier", data, "--base", "Fixtures/Models/ImageFeatureBase.mlmodel", "-o", model,
                         "--validation-split", "0.3", "--report", directory.path + "/train.html"], environment: environment)
        try Self.modelc(["evaluate", model, misfiled, "--report", directory.path + "/evaluate.html"], environment: environment)
        for (page, heading) in [("train", "Training report: Colors.mlmodel"), ("evaluate", "Evaluation: Colors.mlmodel")] {
            let loaded = try Self.load(directory.path + "/\(page).html", name: "report-\(page)")
            #expect(loaded.console.isEmpty, "console: \(loaded.console)")
            #expect(loaded.ink > 0.03, "blank: \(loaded.ink)")
            #expect(loaded.dom.contains("<h1>\(heading)</h1>"))
        }
    }

    static func count(_ needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }
}
