import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Structural checks of the SVG and HTML that modelc writes.
public enum PictureChecks {
    /// What an SVG drawing of a graph holds: node ids (the `<title>` of each
    /// `g.node`), edges (`from->to`, the `<title>` of each `g.edge`) and all text.
    public struct Drawing {
        public var nodes: [String] = []
        public var edges: [String] = []
        public var texts: [String] = []
        public var tooltips: [String] = []
    }

    /// Parses `svg` as XML (it must be well-formed) and collects its nodes, edges and text.
    public static func drawing(_ svg: String) throws -> Drawing {
        let document = try XMLDocument(data: Data(svg.utf8), options: [])
        var drawing = Drawing()
        // attribute(forName:) finds nothing in a namespaced document on Linux.
        func attribute(_ element: XMLElement, _ name: String) -> String? {
            element.attributes?.first { $0.name == name }?.stringValue
        }
        func visit(_ element: XMLElement) {
            let type = attribute(element, "class")
            if element.localName == "g", type == "node" || type == "edge",
               let title = (element.children ?? []).first(where: { $0.localName == "title" })?.stringValue {
                if type == "node" { drawing.nodes.append(title) } else { drawing.edges.append(title) }
            }
            if element.localName == "text", let text = element.stringValue { drawing.texts.append(text) }
            if element.localName == "a", let tip = attribute(element, "xlink:title") { drawing.tooltips.append(tip) }
            if element.localName == "title", let tip = element.stringValue { drawing.tooltips.append(tip) }
            for case let child as XMLElement in element.children ?? [] { visit(child) }
        }
        if let root = document.rootElement() { visit(root) }
        return drawing
    }

    /// Every reference in `text` to something outside it: `src`/`href`
    /// attributes that are not `#fragments` or `data:` URIs, CSS `url(...)`
    /// and `@import` of anything but `#` or `data:`, and any `http(s)://`
    /// except the XML namespace names (`xmlns` values, which are never fetched).
    public static func externalReferences(_ text: String) -> [String] {
        var found: [String] = []
        let patterns = [
            #"(?:src|href)\s*=\s*["']([^"']*)["']"#,
            #"url\(\s*["']?([^)"']*)"#,
            #"@import\s+["']?([^"';\s]*)"#,
        ]
        for pattern in patterns {
            guard let regex = try? NSRegularExpression(pattern: pattern, options: [.caseInsensitive]) else { continue }
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range(at: 1), in: text) else { continue }
                let target = String(text[range])
                if !target.hasPrefix("#") && !target.hasPrefix("data:") { found.append(target) }
            }
        }
        let withoutNamespaces = text.replacingOccurrences(
            of: #"xmlns(:\w+)?\s*=\s*"[^"]*""#, with: "", options: .regularExpression)
        if let regex = try? NSRegularExpression(pattern: #"https?://[^\s"'<>)]*"#) {
            for match in regex.matches(in: withoutNamespaces, range: NSRange(withoutNamespaces.startIndex..., in: withoutNamespaces)) {
                if let range = Range(match.range, in: withoutNamespaces) { found.append(String(withoutNamespaces[range])) }
            }
        }
        return found
    }

    /// The `<svg …>…</svg>` element inside an HTML page.
    public static func inlineSVG(_ html: String) -> String? {
        guard let start = html.range(of: "<svg"), let end = html.range(of: "</svg>", options: .backwards) else { return nil }
        return String(html[start.lowerBound..<end.upperBound])
    }
}
