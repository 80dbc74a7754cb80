import FixtureSupport
import Foundation
import Testing

/// `modelc train … --report OUT.html`, `modelc evaluate … --report OUT.html`
/// and `train --json`'s NDJSON events, run as a user runs them.
@Suite struct ReportTests {
    static let base = "Fixtures/Models/ImageFeatureBase.mlmodel"

    /// Three colour labels to train on, and a second tree to evaluate on
    /// where three red images are filed as "blue": mistakes the classifier
    /// makes with confidence.
    struct Workspace {
        let directory: TemporaryDirectory
        var data: String { directory.path + "/data" }
        var misfiled: String { directory.path + "/misfiled" }
        var model: String { directory.path + "/Colors.mlmodel" }
        var report: String { directory.path + "/report.html" }

        init() throws {
            directory = try TemporaryDirectory()
            try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 14, into: data, seed: 21)
            try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 10, into: misfiled, seed: 23)
            try GeneratedImages.write(labels: ["red"], count: 3, into: directory.path + "/extra", seed: 22)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path + "/extra/red") {
                try FileManager.default.moveItem(atPath: directory.path + "/extra/red/" + name, toPath: misfiled + "/blue/misfiled-" + name)
            }
        }

        func run(_ arguments: [String]) throws -> ModelcProcess.Result {
            try ModelcProcess.run(arguments, environment: ["MODELC_CACHE": directory.path + "/cache"])
        }
    }

    /// The inline `<svg>` elements of a page, each parsed.
    static func charts(_ html: String) throws -> [(svg: String, drawing: PictureChecks.Drawing)] {
        var found: [(String, PictureChecks.Drawing)] = []
        var rest = html[...]
        while let start = rest.range(of: "<svg"), let end = rest.range(of: "</svg>", range: start.upperBound..<rest.endIndex) {
            let svg = String(rest[start.lowerBound..<end.upperBound])
            found.append((svg, try PictureChecks.drawing(svg)))
            rest = rest[end.upperBound...]
        }
        return found
    }

    static func count(_ needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    @Test func trainingReportHasEverySection() throws {
        let work = try Workspace()
        let result = try work.run(["train", "image-classifier", work.data, "--base", Self.base, "-o", work.model,
                                   "--validation-split", "0", "--max-iterations", "30", "--report", work.report, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.contains("modelc: report written to \(work.report)\n"))
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let done = try #require(Fixtures.parseJSON(lines.last ?? "") as? [String: Any])
        #expect(done["report"] as? String == work.report)
        let iterations = try #require((done["fit"] as? [String: Any])?["iterations"] as? Int)
        let html = try String(contentsOfFile: work.report, encoding: .utf8)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(PictureChecks.externalReferences(html).isEmpty, "\(PictureChecks.externalReferences(html))")
        #expect(!html.contains("<script"))
        for heading in ["Dataset", "Training", "Quality", "Most confident mistakes"] {
            #expect(html.contains("<h2>\(heading)</h2>"), "no \(heading) section")
        }
        // The imbalance warning: blue has 17 images, the others 14 — not unbalanced; none shown.
        #expect(!html.contains("class=\"warning\""))
        let charts = try Self.charts(html)
        let loss = try #require(charts.first { $0.svg.contains("Loss per iteration") })
        let accuracy = try #require(charts.first { $0.svg.contains("Accuracy per iteration") })
        // One point per iteration on each curve (no validation: one curve each).
        #expect(Self.count("<circle", in: loss.svg) == iterations)
        #expect(Self.count("<circle", in: accuracy.svg) == iterations)
        let heat = try #require(charts.first { $0.svg.contains("Confusion matrix: training images") })
        #expect(Self.count("class=\"cell\"", in: heat.svg) == 9)
        // The cells hold the confusion matrix the JSON report gives.
        let training = try #require(done["training"] as? [String: Any])
        let matrix = try #require((training["confusionMatrix"] as? [String: Any])?["rows"] as? [[Int]])
        let labels = ["blue", "red", "yellow"]
        for (row, values) in matrix.enumerated() {
            for (column, value) in values.enumerated() {
                #expect(heat.drawing.tooltips.contains { $0.hasPrefix("true \(labels[row]), predicted \(labels[column]): \(value) (") })
            }
        }
        let bars = try #require(charts.first { $0.svg.contains("Per label: training images") })
        #expect(Self.count("class=\"bar\"", in: bars.svg) <= 9 && Self.count("class=\"bar\"", in: bars.svg) >= 6)
        // A tile per mistake (at most 12), each a JPEG thumbnail.
        let wrong = matrix.enumerated().reduce(0) { total, row in
            total + row.element.enumerated().filter { $0.offset != row.offset }.reduce(0) { $0 + $1.element }
        }
        #expect(Self.count("<figure", in: html) == min(12, wrong))
        if wrong == 0 { #expect(html.contains("<p>No mistakes on training images.</p>")) }

        // NDJSON: every line is an event object, in phase order.
        let events = lines.compactMap { Fixtures.parseJSON($0) as? [String: Any] }
        #expect(events.count == lines.count)
        let names = events.compactMap { $0["event"] as? String }
        #expect(names.first == "base" && names.last == "done")
        #expect(names.filter { $0 == "iteration" }.count == iterations)
        let phases = names.map { ["base": 0, "validation": 1, "features": 2, "featuresDone": 3, "iteration": 4, "done": 5][$0] ?? -1 }
        #expect(phases == phases.sorted(), "\(names)")
    }

    @Test func validationCurvesAndEvaluationReport() throws {
        let work = try Workspace()
        let trained = try work.run(["train", "image-classifier", work.data, "--base", Self.base, "-o", work.model,
                                    "--validation-split", "0.3", "--max-iterations", "20", "--report", work.report])
        #expect(trained.status == 0, "\(trained.standardError)")
        let html = try String(contentsOfFile: work.report, encoding: .utf8)
        let charts = try Self.charts(html)
        let loss = try #require(charts.first { $0.svg.contains("Loss per iteration") })
        #expect(Self.count("<polyline", in: loss.svg) == 2)
        #expect(loss.svg.contains("validation (cross-entropy)"))
        #expect(html.contains("Confusion matrix: validation images"))

        let evaluation = work.directory.path + "/evaluation.html"
        let evaluated = try work.run(["evaluate", work.model, work.data, "--report", evaluation])
        #expect(evaluated.status == 0, "\(evaluated.standardError)")
        let page = try String(contentsOfFile: evaluation, encoding: .utf8)
        #expect(PictureChecks.externalReferences(page).isEmpty)
        #expect(page.contains("<h1>Evaluation: Colors.mlmodel</h1>"))
        #expect(!page.contains("Loss per iteration"))
        let heat = try #require(try Self.charts(page).first { $0.svg.contains("Confusion matrix: images") })
        #expect(Self.count("class=\"cell\"", in: heat.svg) == 9)

        // The misfiled red images are mistakes, shown with JPEG thumbnails, most confident first.
        let misfiled = work.directory.path + "/misfiled.html"
        let checked = try work.run(["evaluate", work.model, work.misfiled, "--report", misfiled, "--json"])
        #expect(checked.status == 0, "\(checked.standardError)")
        let json = try #require(Fixtures.parseJSON(checked.standardOutput) as? [String: Any])
        let rows = try #require((json["confusionMatrix"] as? [String: Any])?["rows"] as? [[Int]])
        #expect(rows[0][1] == 3, "the three red images filed as blue are predicted red")
        let mistakesPage = try String(contentsOfFile: misfiled, encoding: .utf8)
        let images = mistakesPage.components(separatedBy: "src=\"data:image/jpeg;base64,").dropFirst()
        #expect(images.count >= 3 && images.count == Self.count("<figure", in: mistakesPage))
        for image in images {
            let bytes = try #require(Data(base64Encoded: String(image.prefix { $0 != "\"" })))
            #expect(bytes.prefix(2) == Data([0xFF, 0xD8]), "not a JPEG")
        }
        let tiles: [String] = Array(mistakesPage.components(separatedBy: "<figure").dropFirst())
        #expect(tiles.prefix(3).allSatisfy { $0.contains("misfiled-") && $0.contains("true: blue") && $0.contains("predicted: red") })
        var confidences: [Double] = []
        for tile in tiles {
            guard let start = tile.range(of: "class=\"confidence\">"), let end = tile.range(of: "%", range: start.upperBound..<tile.endIndex),
                  let value = Double(tile[start.upperBound..<end.lowerBound]) else { continue }
            confidences.append(value)
        }
        #expect(confidences == confidences.sorted(by: >) && confidences.count == tiles.count)
    }

    @Test func unbalancedLabelsAreWarnedOnThePage() throws {
        let directory = try TemporaryDirectory()
        try GeneratedImages.write(labels: ["blue"], count: 30, into: directory.path + "/data", seed: 3)
        try GeneratedImages.write(labels: ["red"], count: 10, into: directory.path + "/data", seed: 4)
        let report = directory.path + "/r.html"
        let result = try ModelcProcess.run(["train", "image-classifier", directory.path + "/data", "--base", Self.base,
                                            "-o", directory.path + "/m.mlmodel", "--report", report],
                                           environment: ["MODELC_CACHE": directory.path + "/cache"])
        #expect(result.status == 0, "\(result.standardError)")
        let html = try String(contentsOfFile: report, encoding: .utf8)
        #expect(html.contains("<p class=\"warning\">⚠ labels are unbalanced: &quot;blue&quot; has 27 images") || html.contains("<p class=\"warning\">⚠ labels are unbalanced: &quot;blue&quot; has 30 images"))
    }

    @Test func badReportPaths() throws {
        let work = try Workspace()
        let wrong = try work.run(["train", "image-classifier", work.data, "--base", Self.base, "-o", work.model, "--report", work.directory.path + "/r.pdf"])
        #expect(wrong.status == 64)
        #expect(wrong.standardError.hasPrefix("modelc: error: invalid value '\(work.directory.path)/r.pdf' for '--report': extension .pdf; expected .html\n"))
        #expect(!FileManager.default.fileExists(atPath: work.model), "refused before any work")
        let evaluateWrong = try work.run(["evaluate", "Fixtures/Models/ImageClassifier.mlmodel", work.data, "--report", "r.svg"])
        #expect(evaluateWrong.status == 64)

        let unwritable = try work.run(["train", "image-classifier", work.data, "--base", Self.base, "-o", work.model,
                                       "--report", work.directory.path + "/missing/r.html"])
        #expect(unwritable.status == 74)
        #expect(unwritable.standardError.contains("modelc: error: cannot write the report: "))
    }
}

/// `modelc train`'s progress on a terminal (a pseudo-terminal from util-linux's `script`).
@Suite struct TrainProgressTests {
    @Test func aTerminalSeesImagesPerSecondAnETAAndTheLoss() throws {
        let script = try #require(["/usr/bin/script", "/bin/script"].first { FileManager.default.isExecutableFile(atPath: $0) })
        let directory = try TemporaryDirectory()
        try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 200, into: directory.path + "/data", seed: 41)
        let command = [ModelcProcess.executable.path, "train", "image-classifier", directory.path + "/data",
                       "--base", ReportTests.base, "-o", directory.path + "/m.mlmodel", "--threads", "1"]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = ["-qec", command, directory.path + "/typescript"]
        process.currentDirectoryURL = Fixtures.packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(["MODELC_CACHE": directory.path + "/cache"]) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let typescript = try String(contentsOfFile: directory.path + "/typescript", encoding: .utf8)
        // Lines redrawn in place: carriage returns and erase-line, not a line per update.
        let redraws = typescript.split(separator: "\r").map(String.init)
        let feature = redraws.filter { $0.contains("features [") }
        #expect(feature.count >= 10)
        #expect(feature.contains { $0.range(of: #"/600 images, [0-9]+ images/s, ETA [0-9]+:[0-9]{2}"#, options: .regularExpression) != nil },
                "\(feature.suffix(3))")
        #expect(redraws.contains { $0.range(of: #"iteration [0-9]+: loss [0-9.]+, training [0-9.]+%"#, options: .regularExpression) != nil })
        #expect(typescript.contains("\u{1B}[K"))
    }
}
