import ModelSpec

/// A simple drawing of a graph in time linear in its size, for graphs too
/// large for Graphviz: nodes in rows by rank (the longest chain reaching
/// them), each row left to right in graph order, edges as straight lines.
/// Clusters are not drawn; each node's tooltip names the cluster it is in.
///
/// The SVG has the structure Graphviz's has (`g.node` with a `<title>` of the
/// node id, `g.edge` with `<title>` `from->to`), so the HTML page and the
/// checks read either alike.
enum LayeredGraphSVG {
    static let characterWidth = 6.2
    static let lineHeight = 13.0
    static let rowGap = 28.0
    static let columnGap = 14.0
    static let margin = 12.0

    struct Box {
        var x: Double
        var y: Double
        var width: Double
        var height: Double
    }

    static func svg(_ graph: ModelGraph) -> String {
        let ranks = GraphRanks(graph)
        var clusterOf: [String: String] = [:]
        for cluster in graph.allClusters {
            for node in cluster.nodes { clusterOf[node.id] = cluster.label }
        }
        var rows: [[GraphNode]] = Array(repeating: [], count: max(ranks.depth, 1))
        for node in graph.allNodes { rows[ranks.rank[node.id] ?? 0].append(node) }

        // Rows top down, each centred on the widest.
        var boxes: [String: Box] = [:]
        let sizes = rows.map { row in
            row.map { node -> (Double, Double) in
                let lines = GraphDOT.labelLines(node)
                return (Double(lines.map(\.count).max() ?? 1) * characterWidth + 16, Double(lines.count) * lineHeight + 10)
            }
        }
        let rowWidths = sizes.map { row in row.reduce(0) { $0 + $1.0 } + columnGap * Double(max(row.count - 1, 0)) }
        let title = "\(graph.root.label) (simplified layout)"
        let width = max(rowWidths.max() ?? 0, Double(title.count) * 7) + 2 * margin + 120
        var y = margin + 24
        for (row, nodes) in rows.enumerated() {
            var x = margin + ((rowWidths.max() ?? 0) - rowWidths[row]) / 2
            var rowHeight = 0.0
            for (node, size) in zip(nodes, sizes[row]) {
                boxes[node.id] = Box(x: x, y: y, width: size.0, height: size.1)
                x += size.0 + columnGap
                rowHeight = max(rowHeight, size.1)
            }
            y += rowHeight + rowGap
        }
        let height = y + margin
        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(XMLText.number(width))pt\" height=\"\(XMLText.number(height))pt\" "
            + "viewBox=\"0 0 \(XMLText.number(width)) \(XMLText.number(height))\">\n"
        out += "<g id=\"graph0\" class=\"graph\">\n<title>model</title>\n"
        out += "<rect x=\"0\" y=\"0\" width=\"\(XMLText.number(width))\" height=\"\(XMLText.number(height))\" fill=\"white\"/>\n"
        out += "<text x=\"\(XMLText.number(margin))\" y=\"\(XMLText.number(margin + 8))\" font-family=\"Helvetica,Arial,sans-serif\" font-size=\"12\">"
            + "\(XMLText.escaped(title))</text>\n"
        for (index, edge) in graph.edges.enumerated() {
            guard let from = boxes[edge.from], let to = boxes[edge.to] else { continue }
            let span = (ranks.rank[edge.to] ?? 0) - (ranks.rank[edge.from] ?? 0)
            let path: String
            if span <= 1 {
                // Next row: a straight line, bottom to top.
                path = "M\(n(from.x + from.width / 2)),\(n(from.y + from.height))L\(n(to.x + to.width / 2)),\(n(to.y))"
            } else {
                // Past rows in between: a curve out to the right and back, side to side.
                let x1 = from.x + from.width, y1 = from.y + from.height / 2
                let x2 = to.x + to.width, y2 = to.y + to.height / 2
                let bulge = max(x1, x2) + 30 + 4 * Double(min(span, 20))
                path = "M\(n(x1)),\(n(y1))C\(n(bulge)),\(n(y1)) \(n(bulge)),\(n(y2)) \(n(x2)),\(n(y2))"
            }
            out += "<g id=\"edge\(index + 1)\" class=\"edge\"><title>\(XMLText.escaped(edge.from))&#45;&gt;\(XMLText.escaped(edge.to))</title>"
                + "<path fill=\"none\" stroke=\"#7a869a\" d=\"\(path)\"/></g>\n"
        }
        for node in graph.allNodes {
            guard let box = boxes[node.id] else { continue }
            let (fill, stroke) = colors(node)
            var tooltip = GraphDOT.tooltip(node)
            if let cluster = clusterOf[node.id] { tooltip += "\nin \(cluster)" }
            out += "<g id=\"\(XMLText.escaped(node.id))\" class=\"node\"><title>\(XMLText.escaped(node.id))</title>"
            out += "<g><title>\(XMLText.escaped(tooltip))</title>"
            out += "<rect x=\"\(XMLText.number(box.x))\" y=\"\(XMLText.number(box.y))\" width=\"\(XMLText.number(box.width))\" "
                + "height=\"\(XMLText.number(box.height))\" rx=\"4\" fill=\"\(fill)\" stroke=\"\(stroke)\"/>"
            for (line, text) in GraphDOT.labelLines(node).enumerated() {
                let ty = box.y + 5 + lineHeight * Double(line + 1) - 3
                out += "<text text-anchor=\"middle\" x=\"\(XMLText.number(box.x + box.width / 2))\" y=\"\(XMLText.number(ty))\" "
                    + "font-family=\"Helvetica,Arial,sans-serif\" font-size=\"10\">\(XMLText.escaped(text))</text>"
            }
            out += "</g></g>\n"
        }
        out += "</g>\n</svg>\n"
        return out
    }

    private static func n(_ value: Double) -> String { XMLText.number(value) }

    private static func colors(_ node: GraphNode) -> (String, String) {
        switch node.kind {
        case .input: ("#e3f4e1", "#4f9a47")
        case .output: ("#fdeede", "#c77c2e")
        case .operation: (node.weights.isEmpty ? "#eef3fb" : "#e6ecf9", "#6b86b3")
        }
    }
}
