import ModelSpec

/// Writes a `ModelGraph` as Graphviz DOT text: the input of the layout, and
/// what `--graph OUT.dot` saves.
///
/// Every node gets `id` = its graph id (so the SVG's node groups carry it), a
/// label of a few short lines (kind and name, key parameters, output type,
/// weights) and a tooltip with all of them; every cluster its label. Text is
/// escaped for DOT's quoted strings, where `\` starts an escape of its own.
public enum GraphDOT {
    /// Characters of one label line before "…".
    static let maxLineLength = 44

    /// The DOT text of `graph`, laid out in `direction`.
    public static func text(_ graph: ModelGraph, direction: GraphDirection? = nil) -> String {
        let direction = direction ?? GraphDirection.chosen(for: graph)
        var lines = [
            "digraph model {",
            "  graph [rankdir=\(direction.rawValue), fontname=\"Helvetica,Arial,sans-serif\", fontsize=12, nodesep=0.25, ranksep=0.35, "
                + "label=\(quoted(graph.root.label)), labelloc=t, bgcolor=\"white\", tooltip=\(quoted(graph.root.label))];",
            "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica,Arial,sans-serif\", fontsize=10, "
                + "fillcolor=\"#eef3fb\", color=\"#6b86b3\", margin=\"0.12,0.05\"];",
            "  edge [color=\"#7a869a\", arrowsize=0.6];",
        ]
        append(graph.root, depth: 1, to: &lines)
        for edge in graph.edges {
            lines.append("  \(quoted(edge.from)) -> \(quoted(edge.to)) [tooltip=\(quoted(edge.value))];")
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func append(_ cluster: GraphCluster, depth: Int, to lines: inout [String]) {
        let indent = String(repeating: "  ", count: depth)
        for node in cluster.nodes {
            lines.append(indent + nodeStatement(node))
        }
        for child in cluster.clusters {
            lines.append("\(indent)subgraph \(quoted(child.id)) {")
            lines.append("\(indent)  graph [label=\(quoted(child.label)), style=\"rounded,filled\", fillcolor=\"\(depth % 2 == 1 ? "#f6f7f9" : "#eceff3")\", "
                + "color=\"#a9b3c1\", fontsize=11, labeljust=l, tooltip=\(quoted(child.label))];")
            append(child, depth: depth + 1, to: &lines)
            lines.append("\(indent)}")
        }
    }

    private static func nodeStatement(_ node: GraphNode) -> String {
        let style: String
        switch node.kind {
        case .input: style = "shape=box, style=\"rounded,filled,bold\", fillcolor=\"#e3f4e1\", color=\"#4f9a47\""
        case .output: style = "shape=box, style=\"rounded,filled,bold\", fillcolor=\"#fdeede\", color=\"#c77c2e\""
        case .operation: style = node.weights.isEmpty ? "" : "fillcolor=\"#e6ecf9\""
        }
        let label = labelLines(node).map { escaped($0) + "\\n" }.joined()
        let attributes = ["id=\(quoted(node.id))", "label=\"\(label)\"", "tooltip=\(quoted(tooltip(node)))", style]
            .filter { !$0.isEmpty }
        return "\(quoted(node.id)) [\(attributes.joined(separator: ", "))];"
    }

    /// The lines drawn in a node's box.
    static func labelLines(_ node: GraphNode) -> [String] {
        let head = node.name.isEmpty || node.name == node.title ? node.title : "\(node.title) · \(node.name)"
        // The output type first, then parameters and weights, a few of each.
        let outputs = node.details.filter { $0.hasPrefix("→") }
        let parameters = node.details.filter { !$0.hasPrefix("→") }
        let shownParameters = parameters.count > 3 ? 2 : parameters.count
        let shownWeights = node.weights.count > 2 ? 1 : node.weights.count
        var body = outputs + parameters.prefix(shownParameters) + node.weights.prefix(shownWeights)
        let hidden = parameters.count - shownParameters + node.weights.count - shownWeights
        if hidden > 0 { body.append("… \(hidden) more (hover)") }
        return ([head] + body).flatMap { $0.split(separator: "\n", omittingEmptySubsequences: false) }.map { shortened(String($0)) }
    }

    /// Everything about a node, one item a line, for hovering.
    static func tooltip(_ node: GraphNode) -> String {
        let head = node.name.isEmpty ? node.title : "\(node.title) \(node.name)"
        return ([head] + node.details + node.weights).joined(separator: "\n")
    }

    static func shortened(_ line: String) -> String {
        line.count <= maxLineLength ? line : String(line.prefix(maxLineLength - 1)) + "…"
    }

    /// `text` as a DOT quoted string: `"` and `\` escaped, line breaks as `\n`.
    public static func quoted(_ text: String) -> String {
        "\"" + escaped(text) + "\""
    }

    /// The inside of a DOT quoted string. A backslash is doubled, since in
    /// labels Graphviz reads `\N`, `\G`, `\l` and the like as escapes; `&`
    /// is written `&amp;`, since Graphviz passes entities through to the SVG;
    /// control characters other than a line break are dropped.
    static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            // Graphviz keeps `&name;` as an entity; `&amp;` makes any `&` literal.
            case "&": result += "&amp;"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: continue
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

/// Which way the graph flows.
public enum GraphDirection: String, Sendable {
    /// Left to right: short graphs, which fit a screen's width.
    case leftToRight = "LR"
    /// Top to bottom: long chains, which then scroll down a page.
    case topToBottom = "TB"

    /// Chains of up to `shortChain` nodes go left to right, longer ones top down.
    static let shortChain = 6

    /// The direction for `graph`, by its longest chain of nodes.
    public static func chosen(for graph: ModelGraph) -> GraphDirection {
        GraphRanks(graph).depth <= shortChain ? .leftToRight : .topToBottom
    }
}

/// The rank of every node: the length of the longest chain of edges that
/// reaches it (Kahn's order; nodes on a cycle, which no model has, get 0).
struct GraphRanks {
    let rank: [String: Int]
    /// The number of ranks: the longest chain's node count.
    let depth: Int

    init(_ graph: ModelGraph) {
        let nodes = graph.allNodes.map(\.id)
        var incoming: [String: Int] = [:]
        var outgoing: [String: [String]] = [:]
        for edge in graph.edges {
            incoming[edge.to, default: 0] += 1
            outgoing[edge.from, default: []].append(edge.to)
        }
        var rank: [String: Int] = [:]
        var ready = nodes.filter { incoming[$0, default: 0] == 0 }
        for id in ready { rank[id] = 0 }
        var index = 0
        while index < ready.count {
            let id = ready[index]
            index += 1
            for next in outgoing[id] ?? [] {
                rank[next] = max(rank[next] ?? 0, (rank[id] ?? 0) + 1)
                incoming[next, default: 0] -= 1
                if incoming[next] == 0 { ready.append(next) }
            }
        }
        for id in nodes where rank[id] == nil { rank[id] = 0 }
        self.rank = rank
        depth = (rank.values.max() ?? -1) + 1
    }
}
