import Foundation

/// Charts as SVG text, written by modelc (no chart library, no script):
/// line charts, a heat map and grouped bars, each a standalone `<svg>`
/// element with `<title>` tooltips on its marks.
enum SVGCharts {
    struct Series {
        var name: String
        var color: String
        /// (x, y) points in order of x.
        var points: [(x: Double, y: Double)]
        var dashed = false
    }

    static let font = "font-family=\"Helvetica,Arial,sans-serif\""

    /// A line chart of `series` over a shared x axis; `percent` formats the
    /// y axis as percentages of 1 (and fixes it to 0…1).
    static func lineChart(title: String, xLabel: String, series: [Series], percent: Bool,
                          width: Double = 560, height: Double = 260) -> String {
        let left = 56.0, right = 16.0, top = 52.0, bottom = 40.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let xs = series.flatMap { $0.points.map(\.x) }, ys = series.flatMap { $0.points.map(\.y) }
        let xMin = xs.min() ?? 0, xMaxRaw = xs.max() ?? 1
        let xMax = xMaxRaw > xMin ? xMaxRaw : xMin + 1
        let yMin = 0.0
        let yMax = percent ? 1.0 : niceCeiling(max(ys.max() ?? 1, 1e-9) * 1.05)
        func px(_ x: Double) -> Double { left + (x - xMin) / (xMax - xMin) * plotWidth }
        func py(_ y: Double) -> Double { top + plotHeight - (min(max(y, yMin), yMax) - yMin) / (yMax - yMin) * plotHeight }
        var out = svgOpen(width: width, height: height, label: title)
        out += "<text x=\"\(n(left))\" y=\"18\" \(font) font-size=\"14\" font-weight=\"600\" fill=\"#1d2433\">\(XMLText.escaped(title))</text>\n"
        for tick in ticks(from: yMin, to: yMax, count: 5) {
            let y = py(tick)
            out += "<line x1=\"\(n(left))\" y1=\"\(n(y))\" x2=\"\(n(left + plotWidth))\" y2=\"\(n(y))\" stroke=\"#e3e7ed\"/>"
            let text = percent ? String(format: "%.0f%%", tick * 100) : tickText(tick)
            out += "<text x=\"\(n(left - 6))\" y=\"\(n(y + 4))\" text-anchor=\"end\" \(font) font-size=\"11\" fill=\"#5b6577\">\(text)</text>\n"
        }
        for tick in ticks(from: xMin, to: xMax, count: 6) where tick == tick.rounded() {
            let x = px(tick)
            out += "<line x1=\"\(n(x))\" y1=\"\(n(top + plotHeight))\" x2=\"\(n(x))\" y2=\"\(n(top + plotHeight + 4))\" stroke=\"#8b95a5\"/>"
            out += "<text x=\"\(n(x))\" y=\"\(n(top + plotHeight + 17))\" text-anchor=\"middle\" \(font) font-size=\"11\" fill=\"#5b6577\">\(Int(tick))</text>\n"
        }
        out += "<line x1=\"\(n(left))\" y1=\"\(n(top + plotHeight))\" x2=\"\(n(left + plotWidth))\" y2=\"\(n(top + plotHeight))\" stroke=\"#8b95a5\"/>\n"
        out += "<text x=\"\(n(left + plotWidth / 2))\" y=\"\(n(height - 6))\" text-anchor=\"middle\" \(font) font-size=\"11\" fill=\"#5b6577\">\(XMLText.escaped(xLabel))</text>\n"
        var legendX = left
        for item in series {
            out += "<line x1=\"\(n(legendX))\" y1=\"32\" x2=\"\(n(legendX + 16))\" y2=\"32\" stroke=\"\(item.color)\" stroke-width=\"2.5\"\(item.dashed ? " stroke-dasharray=\"5 3\"" : "")/>"
            out += "<text x=\"\(n(legendX + 20))\" y=\"36\" \(font) font-size=\"11\" fill=\"#1d2433\">\(XMLText.escaped(item.name))</text>\n"
            legendX += Double(item.name.count) * 6.4 + 34
        }
        for item in series where !item.points.isEmpty {
            let points = item.points.map { "\(n(px($0.x))),\(n(py($0.y)))" }.joined(separator: " ")
            out += "<polyline class=\"series\" fill=\"none\" stroke=\"\(item.color)\" stroke-width=\"2\"\(item.dashed ? " stroke-dasharray=\"5 3\"" : "") points=\"\(points)\">"
                + "<title>\(XMLText.escaped(item.name))</title></polyline>\n"
            if item.points.count <= 60 {
                for point in item.points {
                    let value = percent ? String(format: "%.1f%%", point.y * 100) : String(format: "%.5f", point.y)
                    out += "<circle cx=\"\(n(px(point.x)))\" cy=\"\(n(py(point.y)))\" r=\"2.5\" fill=\"\(item.color)\">"
                        + "<title>\(XMLText.escaped(item.name)), iteration \(Int(point.x)): \(value)</title></circle>"
                }
                out += "\n"
            }
        }
        return out + "</svg>\n"
    }

    /// A confusion matrix: rows are true labels, columns predicted ones; a
    /// cell's shade is its share of the row.
    static func heatMap(title: String, labels: [String], matrix: [[Int]]) -> String {
        let count = max(labels.count, 1)
        let cell = max(10.0, min(56.0, 520.0 / Double(count)))
        let labelWidth = min(140.0, Double(labels.map(\.count).max() ?? 4) * 7 + 12)
        let left = labelWidth + 22, top = 58.0 + labelWidth * (count > 6 ? 0.6 : 0)
        let width = max(left + cell * Double(count) + 12, Double(title.count) * 8.4 + 8), height = top + cell * Double(count) + 14
        var out = svgOpen(width: width, height: height, label: title)
        out += "<text x=\"0\" y=\"18\" \(font) font-size=\"14\" font-weight=\"600\" fill=\"#1d2433\">\(XMLText.escaped(title))</text>\n"
        out += "<text x=\"\(n(left))\" y=\"36\" \(font) font-size=\"11\" fill=\"#5b6577\">predicted →</text>"
        out += "<text x=\"0\" y=\"\(n(top - 6))\" \(font) font-size=\"11\" fill=\"#5b6577\">true ↓</text>\n"
        let showNumbers = cell >= 20
        for (column, label) in labels.enumerated() {
            let x = left + cell * (Double(column) + 0.5)
            let short = shortLabel(label)
            if count > 6 {
                out += "<text transform=\"translate(\(n(x + 4)),\(n(top - 4))) rotate(-50)\" \(font) font-size=\"11\" fill=\"#1d2433\"><title>\(XMLText.escaped(label))</title>\(XMLText.escaped(short))</text>"
            } else {
                out += "<text x=\"\(n(x))\" y=\"\(n(top - 6))\" text-anchor=\"middle\" \(font) font-size=\"11\" fill=\"#1d2433\"><title>\(XMLText.escaped(label))</title>\(XMLText.escaped(short))</text>"
            }
        }
        out += "\n"
        for (row, label) in labels.enumerated() {
            let y = top + cell * Double(row)
            out += "<text x=\"\(n(left - 6))\" y=\"\(n(y + cell / 2 + 4))\" text-anchor=\"end\" \(font) font-size=\"11\" fill=\"#1d2433\"><title>\(XMLText.escaped(label))</title>\(XMLText.escaped(shortLabel(label)))</text>"
            let values = row < matrix.count ? matrix[row] : []
            let total = max(values.reduce(0, +), 1)
            for column in 0..<count {
                let value = column < values.count ? values[column] : 0
                let share = Double(value) / Double(total)
                let fill = row == column ? shade(share, hue: (38, 132, 84)) : shade(share, hue: (201, 60, 52))
                let x = left + cell * Double(column)
                out += "<rect class=\"cell\" x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(cell - 1))\" height=\"\(n(cell - 1))\" fill=\"\(fill)\">"
                    + "<title>true \(XMLText.escaped(label)), predicted \(XMLText.escaped(column < labels.count ? labels[column] : "?")): \(value) (\(String(format: "%.1f%%", share * 100)) of the row)</title></rect>"
                if showNumbers {
                    out += "<text x=\"\(n(x + cell / 2))\" y=\"\(n(y + cell / 2 + 4))\" text-anchor=\"middle\" \(font) font-size=\"\(cell >= 36 ? 13 : 10)\" "
                        + "fill=\"\(share > 0.55 ? "white" : "#1d2433")\">\(value)</text>"
                }
            }
            out += "\n"
        }
        return out + "</svg>\n"
    }

    /// Horizontal bars per label, one per group (precision, recall, F1),
    /// on a 0–100 % scale; a missing value is drawn as "–".
    static func groupedBars(title: String, labels: [String], groups: [(name: String, color: String, values: [Double?])]) -> String {
        let labelWidth = min(150.0, Double(labels.map(\.count).max() ?? 4) * 7 + 12)
        let barHeight = 11.0, gap = 10.0
        let left = labelWidth + 10, plotWidth = 360.0, top = 44.0
        let rowHeight = barHeight * Double(groups.count) + gap
        let width = left + plotWidth + 60, height = top + rowHeight * Double(labels.count) + 8
        var out = svgOpen(width: width, height: height, label: title)
        out += "<text x=\"0\" y=\"18\" \(font) font-size=\"14\" font-weight=\"600\" fill=\"#1d2433\">\(XMLText.escaped(title))</text>\n"
        var legendX = left
        for group in groups {
            out += "<rect x=\"\(n(legendX))\" y=\"28\" width=\"12\" height=\"10\" fill=\"\(group.color)\"/>"
            out += "<text x=\"\(n(legendX + 16))\" y=\"37\" \(font) font-size=\"11\" fill=\"#1d2433\">\(XMLText.escaped(group.name))</text>"
            legendX += Double(group.name.count) * 6.4 + 34
        }
        out += "\n"
        for fraction in [0.0, 0.5, 1.0] {
            let x = left + plotWidth * fraction
            out += "<line x1=\"\(n(x))\" y1=\"\(n(top - 2))\" x2=\"\(n(x))\" y2=\"\(n(height - 6))\" stroke=\"#e3e7ed\"/>"
        }
        for (row, label) in labels.enumerated() {
            let y = top + rowHeight * Double(row)
            out += "<text x=\"\(n(left - 6))\" y=\"\(n(y + rowHeight / 2))\" text-anchor=\"end\" \(font) font-size=\"11\" fill=\"#1d2433\"><title>\(XMLText.escaped(label))</title>\(XMLText.escaped(shortLabel(label)))</text>"
            for (index, group) in groups.enumerated() {
                let barY = y + barHeight * Double(index)
                let value = row < group.values.count ? group.values[row] : nil
                let text = value.map { String(format: "%.1f%%", $0 * 100) } ?? "–"
                if let value {
                    out += "<rect class=\"bar\" x=\"\(n(left))\" y=\"\(n(barY))\" width=\"\(n(max(plotWidth * value, 0.5)))\" height=\"\(n(barHeight - 1))\" fill=\"\(group.color)\">"
                        + "<title>\(XMLText.escaped(label)) \(group.name): \(text)</title></rect>"
                }
                out += "<text x=\"\(n(left + plotWidth * (value ?? 0) + 4))\" y=\"\(n(barY + barHeight - 2))\" \(font) font-size=\"9\" fill=\"#5b6577\">\(text)</text>"
            }
            out += "\n"
        }
        return out + "</svg>\n"
    }

    /// Horizontal count bars (the dataset summary), one row per label.
    static func countBar(_ value: Int, of maximum: Int, color: String) -> String {
        let width = 160.0 * Double(value) / Double(max(maximum, 1))
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"160\" height=\"12\" viewBox=\"0 0 160 12\" role=\"img\">"
            + "<rect x=\"0\" y=\"1\" width=\"\(n(max(width, value > 0 ? 1 : 0)))\" height=\"10\" fill=\"\(color)\"/></svg>"
    }

    private static func svgOpen(width: Double, height: Double, label: String) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(n(width))\" height=\"\(n(height))\" viewBox=\"0 0 \(n(width)) \(n(height))\" "
            + "role=\"img\" aria-label=\"\(XMLText.escaped(label))\">\n"
    }

    private static func shortLabel(_ label: String) -> String {
        label.count <= 18 ? label : String(label.prefix(17)) + "…"
    }

    /// White to the full colour by `share` (0…1).
    private static func shade(_ share: Double, hue: (Int, Int, Int)) -> String {
        let t = min(max(share, 0), 1)
        func mix(_ channel: Int) -> Int { Int((255 - Double(255 - channel) * t).rounded()) }
        return String(format: "#%02x%02x%02x", mix(hue.0), mix(hue.1), mix(hue.2))
    }

    static func n(_ value: Double) -> String { XMLText.number(value) }

    /// About `count` round tick values from `low` to `high`.
    static func ticks(from low: Double, to high: Double, count: Int) -> [Double] {
        guard high > low else { return [low] }
        let step = niceStep((high - low) / Double(max(count, 1)))
        var values: [Double] = []
        var value = (low / step).rounded(.up) * step
        while value <= high + step * 1e-9 {
            values.append(abs(value) < step * 1e-9 ? 0 : value)
            value += step
        }
        return values
    }

    static func niceStep(_ raw: Double) -> Double {
        let magnitude = pow(10, floor(log10(raw)))
        let fraction = raw / magnitude
        let nice: Double = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10
        return nice * magnitude
    }

    static func niceCeiling(_ value: Double) -> Double {
        let step = niceStep(value / 5)
        return (value / step).rounded(.up) * step
    }

    private static func tickText(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e6 { return String(Int(value)) }
        let text = String(format: "%.3g", value)
        return text
    }
}
