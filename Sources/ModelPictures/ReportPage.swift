import Foundation
import ImageDecoding
import ModelTraining

/// The `--report OUT.html` page of `modelc train` and `modelc evaluate`: one
/// self-contained file (CSS inline, charts as inline SVG written by modelc,
/// thumbnails as `data:` URIs, no script) with the dataset summary, the
/// training curves, the confusion matrix, per-label precision, recall and
/// F1, and the most confident mistakes.
public enum ReportPage {
    /// Mistakes shown, most confident first.
    public static let mistakesShown = 12
    /// Thumbnail side in pixels.
    public static let thumbnailSide = 96

    /// A page and what could not go into it (a thumbnail whose image could
    /// not be read, say), one line each.
    public struct Page: Sendable {
        public var html: String
        public var notes: [String]
    }

    /// The page of a training run: `report` of the classifier written to
    /// `modelPath` from `dataDirectory` on `basePath`'s features.
    public static func training(_ report: TrainingReport, modelPath: String, basePath: String, dataDirectory: String) -> Page {
        var notes: [String] = []
        var body = ""
        let validation = report.validation
        var cards = [("training accuracy", percent(report.training.accuracy), "\(report.training.count) images")]
        if let validation { cards.append(("validation accuracy", percent(validation.accuracy), "\(validation.count) images")) }
        cards.append(("iterations", "\(report.iterations)", report.status))
        cards.append(("features", "\(report.featureCount)", "“\(report.featureName)” of \(URL(fileURLWithPath: basePath).lastPathComponent)"))
        body += cardsHTML(cards)

        let maximum = max(report.trainingImages.max() ?? 0, report.validationImages.max() ?? 0)
        var rows = ""
        for (index, label) in report.labels.enumerated() {
            rows += "<tr><td>\(XMLText.escaped(label))</td><td class=\"number\">\(report.trainingImages[index])</td>"
                + "<td>\(SVGCharts.countBar(report.trainingImages[index], of: maximum, color: "#4c78a8"))</td>"
                + "<td class=\"number\">\(report.validationImages[index])</td>"
                + "<td>\(SVGCharts.countBar(report.validationImages[index], of: maximum, color: "#f2a541"))</td></tr>\n"
        }
        var dataset = "<table><thead><tr><th>label</th><th colspan=\"2\">training images</th><th colspan=\"2\">validation images</th></tr></thead>\n"
            + "<tbody>\n\(rows)</tbody></table>\n"
        if report.augmentedCopies > 0 { dataset += "<p>plus \(report.augmentedCopies) augmented copies for training</p>\n" }
        if !report.skipped.isEmpty { dataset += "<p>\(report.skipped.count) images skipped (not decodable)</p>\n" }
        body += section("Dataset", warningsHTML(report.warnings) + dataset)

        if !report.history.isEmpty {
            let loss = SVGCharts.lineChart(
                title: "Loss per iteration", xLabel: "L-BFGS iteration",
                series: [SVGCharts.Series(name: "training (cross-entropy + L2)", color: "#4c78a8", points: report.history.map { (Double($0.number), $0.loss) })]
                    + (validation == nil ? [] : [SVGCharts.Series(name: "validation (cross-entropy)", color: "#f2a541",
                                                                  points: report.history.compactMap { iteration in iteration.validationLoss.map { (Double(iteration.number), $0) } },
                                                                  dashed: true)]),
                percent: false)
            let accuracy = SVGCharts.lineChart(
                title: "Accuracy per iteration", xLabel: "L-BFGS iteration",
                series: [SVGCharts.Series(name: "training", color: "#4c78a8", points: report.history.map { (Double($0.number), $0.trainingAccuracy) })]
                    + (validation == nil ? [] : [SVGCharts.Series(name: "validation", color: "#f2a541",
                                                                  points: report.history.compactMap { iteration in iteration.validationAccuracy.map { (Double(iteration.number), $0) } },
                                                                  dashed: true)]),
                percent: true)
            body += section("Training", "<div class=\"charts\">\(loss)\(accuracy)</div>\n"
                + "<p>\(report.iterations) iterations, final objective \(String(format: "%.5f", report.loss)), \(XMLText.escaped(report.status)); "
                + "features \(String(format: "%.2f s", report.extraction.seconds)) (\(report.extraction.cacheHits) of \(report.extraction.vectors) from the cache), fit \(String(format: "%.2f s", report.fitSeconds)).</p>\n")
        }

        let shown = validation ?? report.training
        let which = validation == nil ? "training images" : "validation images"
        body += qualitySections(shown, which: which)
        body += mistakesSection(report.predictions, labels: report.labels, which: report.predictionsAreValidation ? "validation images" : "training images",
                                notes: &notes)
        let subtitle = "\(modelPath) · trained on \(dataDirectory) · base \(basePath)"
        return Page(html: page(title: "Training report: \(URL(fileURLWithPath: modelPath).lastPathComponent)", subtitle: subtitle, body: body), notes: notes)
    }

    /// The page of an evaluation of `modelPath` on `dataDirectory`; `warnings`
    /// (unbalanced labels, labels the model does not have) head the dataset.
    public static func evaluation(_ evaluation: ClassifierEvaluation, modelPath: String, dataDirectory: String, warnings: [String]) -> Page {
        var notes: [String] = []
        let report = evaluation.report
        var body = cardsHTML([
            ("accuracy", percent(report.accuracy), "\(report.count) images"),
            ("labels", "\(report.labels.count)", evaluation.unknownLabels.isEmpty ? "all known to the model" : "\(evaluation.unknownLabels.count) unknown to the model"),
            ("skipped", "\(evaluation.skipped.count)", "images not decodable"),
        ])
        let counts = report.imagesPerLabel
        let maximum = counts.max() ?? 0
        var rows = ""
        for (index, label) in report.labels.enumerated() {
            rows += "<tr><td>\(XMLText.escaped(label))</td><td class=\"number\">\(counts[index])</td>"
                + "<td>\(SVGCharts.countBar(counts[index], of: maximum, color: "#4c78a8"))</td></tr>\n"
        }
        let table = "<table><thead><tr><th>label</th><th colspan=\"2\">images</th></tr></thead>\n<tbody>\n\(rows)</tbody></table>\n"
        body += section("Dataset", warningsHTML(warnings) + table)
        body += qualitySections(report, which: "images")
        body += mistakesSection(evaluation.predictions, labels: report.labels, which: "images", notes: &notes)
        let subtitle = "\(modelPath) · evaluated on \(dataDirectory)"
        return Page(html: page(title: "Evaluation: \(URL(fileURLWithPath: modelPath).lastPathComponent)", subtitle: subtitle, body: body), notes: notes)
    }

    // MARK: Sections

    static func qualitySections(_ report: ClassificationReport, which: String) -> String {
        let heat = SVGCharts.heatMap(title: "Confusion matrix: \(which)",
                                     labels: report.labels, matrix: report.confusion)
        let precision = report.precision, recall = report.recall
        let f1 = zip(precision, recall).map { p, r -> Double? in
            guard let p, let r else { return nil }
            return p + r == 0 ? 0 : 2 * p * r / (p + r)
        }
        let bars = SVGCharts.groupedBars(title: "Per label: \(which)", labels: report.labels,
                                         groups: [("precision", "#4c78a8", precision), ("recall", "#72b7b2", recall), ("F1", "#b279a2", f1)])
        return section("Quality", "<div class=\"charts\">\(heat)\(bars)</div>\n")
    }

    static func mistakesSection(_ predictions: [ImagePrediction], labels: [String], which: String, notes: inout [String]) -> String {
        let mistakes = predictions.filter(\.isMistake).sorted { ($0.confidence ?? -1, $1.path) > ($1.confidence ?? -1, $0.path) }
        guard !mistakes.isEmpty else {
            return section("Most confident mistakes", "<p>No mistakes on \(which).</p>\n")
        }
        var tiles = ""
        for mistake in mistakes.prefix(mistakesShown) {
            let name = URL(fileURLWithPath: mistake.path).lastPathComponent
            let picture: String
            do {
                let bytes = try ImageThumbnail.jpeg(file: mistake.path, side: thumbnailSide)
                picture = "<img src=\"data:image/jpeg;base64,\(Data(bytes).base64EncodedString())\" width=\"\(thumbnailSide)\" height=\"\(thumbnailSide)\" alt=\"\(XMLText.escaped(name))\">"
            } catch {
                notes.append("no thumbnail for \(mistake.path): \(error)")
                picture = "<div class=\"missing\" style=\"width:\(thumbnailSide)px;height:\(thumbnailSide)px\">no image</div>"
            }
            let truth = mistake.actual < labels.count ? labels[mistake.actual] : "?"
            let guess = mistake.predicted < labels.count ? labels[mistake.predicted] : "?"
            let confidence = mistake.confidence.map { String(format: "%.1f%%", $0 * 100) } ?? "–"
            tiles += "<figure title=\"\(XMLText.escaped(mistake.path))\">\(picture)<figcaption><span class=\"truth\">true: \(XMLText.escaped(truth))</span>"
                + "<span class=\"guess\">predicted: \(XMLText.escaped(guess))</span><span class=\"confidence\">\(confidence)</span></figcaption></figure>\n"
        }
        let more = mistakes.count > mistakesShown ? " (the \(mistakesShown) most confident of \(mistakes.count))" : ""
        return section("Most confident mistakes", "<p>\(mistakes.count) of \(predictions.count) \(which) are labelled wrongly\(more).</p>\n"
            + "<div class=\"mistakes\">\n\(tiles)</div>\n")
    }

    static func cardsHTML(_ cards: [(String, String, String)]) -> String {
        "<div class=\"cards\">\n" + cards.map { title, value, detail in
            "<div class=\"card\"><div class=\"card-title\">\(XMLText.escaped(title))</div><div class=\"card-value\">\(XMLText.escaped(value))</div>"
                + "<div class=\"card-detail\">\(XMLText.escaped(detail))</div></div>\n"
        }.joined() + "</div>\n"
    }

    static func warningsHTML(_ warnings: [String]) -> String {
        warnings.map { "<p class=\"warning\">⚠ \(XMLText.escaped($0))</p>\n" }.joined()
    }

    static func section(_ title: String, _ content: String) -> String {
        "<section>\n<h2>\(XMLText.escaped(title))</h2>\n\(content)</section>\n"
    }

    static func percent(_ value: Double) -> String { String(format: "%.1f%%", value * 100) }

    static func page(title: String, subtitle: String, body: String) -> String {
        """
        \(XMLText.pageHead(title: title))
        <style>
        body { margin: 0 auto; max-width: 1220px; padding: 20px 28px 40px; font: 14px/1.45 Helvetica, Arial, sans-serif; color: #1d2433; background: white; }
        h1 { font-size: 22px; margin: 0 0 2px; }
        .subtitle { color: #5b6577; margin: 0 0 18px; word-break: break-all; }
        h2 { font-size: 17px; margin: 26px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #e3e7ed; }
        .cards { display: flex; flex-wrap: wrap; gap: 12px; }
        .card { border: 1px solid #d5dae1; border-radius: 8px; padding: 10px 16px; min-width: 150px; background: #f8f9fb; }
        .card-title { color: #5b6577; font-size: 12px; text-transform: uppercase; letter-spacing: 0.04em; }
        .card-value { font-size: 26px; font-weight: 600; }
        .card-detail { color: #5b6577; font-size: 12px; max-width: 260px; }
        table { border-collapse: collapse; }
        th, td { padding: 3px 10px 3px 0; text-align: left; vertical-align: middle; }
        th { color: #5b6577; font-weight: 600; font-size: 12px; }
        td.number { text-align: right; font-variant-numeric: tabular-nums; }
        .warning { background: #fff4e0; border: 1px solid #f2c078; border-radius: 6px; padding: 8px 12px; }
        .charts { display: flex; flex-wrap: wrap; gap: 28px; align-items: flex-start; }
        .mistakes { display: flex; flex-wrap: wrap; gap: 14px; }
        figure { margin: 0; width: 132px; }
        figure img, .missing { display: block; border-radius: 4px; border: 1px solid #d5dae1; image-rendering: auto; }
        .missing { background: #eceff3; color: #5b6577; font-size: 12px; text-align: center; line-height: 96px; }
        figcaption { font-size: 12px; display: flex; flex-direction: column; margin-top: 4px; }
        .truth { color: #267a4a; } .guess { color: #b3362c; } .confidence { color: #5b6577; }
        </style>
        </head>
        <body>
        <h1>\(XMLText.escaped(title))</h1>
        <p class="subtitle">\(XMLText.escaped(subtitle))</p>
        \(body)</body>
        </html>

        """
    }
}
