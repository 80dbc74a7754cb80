import CGraphviz
import Foundation
import ModelSpec

/// The file forms of a graph picture, named by the output's extension.
public enum GraphFormat: String, CaseIterable, Sendable {
    /// The laid-out picture.
    case svg
    /// The DOT text given to Graphviz (not laid out).
    case dot
    /// One self-contained page: the SVG inline, pan, zoom and search.
    case html

    /// The format named by `path`'s extension (case-insensitive).
    public init(path: String) throws(PictureError) {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."),
              let format = GraphFormat(rawValue: name[name.index(after: dot)...].lowercased())
        else { throw .unknownFormat(path: path, expected: GraphFormat.allCases.map { ".\($0.rawValue)" }) }
        self = format
    }
}

/// A drawn graph: the file's text and what the person should know about how
/// it was drawn.
public struct GraphPicture: Sendable {
    public var text: String
    /// One line each: a simpler layout was used, and why.
    public var notes: [String]
}

/// Lays out and draws a `ModelGraph`.
///
/// Graphviz's `dot` engine does the layout (libgvc opened at the first call,
/// see `CGraphviz`). A graph of more than `nodeLimit` nodes, or any graph
/// when Graphviz cannot be loaded, is drawn by `LayeredGraphSVG` instead, in
/// time linear in its size, and a note says so.
public enum GraphRenderer {
    /// Above this many nodes Graphviz is not asked: its layout time grows
    /// about quadratically (measured with `ModelcBenchmarks graph`: 0.25 s at
    /// 1,000 nodes, about 1.6 s at 1,500 on a loaded machine, 17.7 s at 5,000).
    public static let defaultNodeLimit = 1500

    /// Draws `graph` as `format`; `title` heads the HTML page.
    public static func render(_ graph: ModelGraph, format: GraphFormat, title: String,
                              nodeLimit: Int = defaultNodeLimit) -> GraphPicture {
        let dot = GraphDOT.text(graph)
        var notes: [String] = []
        let svg: String
        let count = graph.allNodes.count
        if format == .dot {
            return GraphPicture(text: dot, notes: [])
        } else if count > nodeLimit {
            notes.append("\(count) nodes are more than Graphviz lays out in bounded time (limit \(nodeLimit)); drawn in a simpler layered layout without clusters")
            svg = LayeredGraphSVG.svg(graph)
        } else {
            switch layout(dot) {
            case .success(let text):
                svg = text
            case .failure(let reason):
                notes.append("Graphviz could not lay the graph out (\(reason.message)); drawn in a simpler layered layout without clusters")
                svg = LayeredGraphSVG.svg(graph)
            }
        }
        return GraphPicture(text: format == .html ? GraphPage.html(svg: svg, title: title) : svg, notes: notes)
    }

    struct LayoutFailure: Error {
        let message: String
    }

    /// The SVG Graphviz draws for `dot`, from the `<svg` element on (the XML
    /// prolog, the DOCTYPE naming an external DTD and the comments before it dropped).
    static func layout(_ dot: String) -> Result<String, LayoutFailure> {
        var output: UnsafeMutablePointer<CChar>?
        var length = 0
        var failure = [CChar](repeating: 0, count: 512)
        let ok = modelc_graphviz_render(dot, "svg", &output, &length, &failure, failure.count)
        guard ok == 1, let output else {
            let message = failure.withUnsafeBufferPointer { buffer in buffer.baseAddress.map { String(cString: $0) } ?? "" }
            return .failure(LayoutFailure(message: message.trimmingCharacters(in: .whitespaces)))
        }
        defer { modelc_graphviz_free(output) }
        let text = String(decoding: UnsafeRawBufferPointer(start: output, count: length), as: UTF8.self)
        guard let start = text.range(of: "<svg") else { return .failure(LayoutFailure(message: "no <svg> element in Graphviz's output")) }
        return .success(String(text[start.lowerBound...]))
    }
}
