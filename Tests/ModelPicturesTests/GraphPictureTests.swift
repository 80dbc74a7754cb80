import FixtureSupport
import Foundation
import Testing
@testable import ModelPictures
import ModelSpec

extension Fixtures.Entry: CustomTestStringConvertible {}

/// Graph pictures checked by parsing them: every node and edge of the graph
/// is drawn, labels survive escaping, nothing outside the file is referenced.
@Suite struct GraphPictureTests {
    static let models = ["Models/ImageClassifier.mlmodel", "Models/PipelineClassifier.mlmodel", "Models/MLProgram.mlpackage",
                         "Graph/ControlFlowProgram.mlpackage", "Models/MultiFunctionProgram.mlpackage", "Models/TreeEnsembleClassifier.mlmodel"]

    @Test(arguments: models)
    func svgDrawsEveryNodeAndEdge(model: String) throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path(model)))
        let picture = GraphRenderer.render(graph, format: .svg, title: model)
        #expect(picture.notes.isEmpty, "\(picture.notes)")
        try expectComplete(picture.text, graph: graph)
        #expect(PictureChecks.externalReferences(picture.text).isEmpty, "\(PictureChecks.externalReferences(picture.text))")
        #expect(!picture.text.contains("<!DOCTYPE"))
    }

    @Test(arguments: models)
    func htmlHoldsTheSVGAndNothingOutside(model: String) throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path(model)))
        let page = GraphRenderer.render(graph, format: .html, title: model).text
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        #expect(page.contains("<input id=\"search\""))
        #expect(page.contains("<script>") && !page.contains("<script src"))
        #expect(PictureChecks.externalReferences(page).isEmpty, "\(PictureChecks.externalReferences(page))")
        let svg = try #require(PictureChecks.inlineSVG(page))
        try expectComplete(svg, graph: graph)
    }

    /// Models that are readable but wrong (missing weight files, duplicate
    /// outputs, invalid parameters) are drawn as they are.
    @Test(arguments: Fixtures.broken.filter { $0.facts["readable"] as? Bool == true })
    func readableBrokenModelsAreDrawn(entry: Fixtures.Entry) throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path(entry.file)))
        #expect(Set(graph.allNodes.map(\.id)).count == graph.allNodes.count)
        let picture = GraphRenderer.render(graph, format: .svg, title: entry.file)
        try expectComplete(picture.text, graph: graph)
    }

    @Test func dotNamesEveryNodeAndEdge() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Graph/ControlFlowProgram.mlpackage")))
        let dot = GraphRenderer.render(graph, format: .dot, title: "x").text
        #expect(dot.hasPrefix("digraph model {") && dot.hasSuffix("}\n"))
        for node in graph.allNodes { #expect(dot.contains("\"\(node.id)\" [id=\"\(node.id)\"")) }
        for edge in graph.edges { #expect(dot.contains("\"\(edge.from)\" -> \"\(edge.to)\"")) }
        for cluster in graph.allClusters { #expect(dot.contains("subgraph \"\(cluster.id)\" {")) }
        #expect(dot.contains("rankdir=TB"))
    }

    /// Quotes, backslashes (Graphviz escapes such as \N and \l), markup and
    /// line breaks in names reach the picture as the same text.
    @Test func awkwardNamesAreEscaped() throws {
        let names = ["say \"hi\"", #"back\slash \N \l"#, "<b>&amp;</b>", "two\nlines", "ünïcødé → ok"]
        var nodes: [GraphNode] = []
        var edges: [GraphEdge] = []
        for (index, name) in names.enumerated() {
            nodes.append(GraphNode(id: "n\(index)", kind: .operation, title: name, name: "", details: [], weights: []))
            if index > 0 { edges.append(GraphEdge(from: "n\(index - 1)", to: "n\(index)", value: name)) }
        }
        let graph = ModelGraph(root: GraphCluster(id: "root", label: "odd \"names\"", nodes: nodes, clusters: []), edges: edges)
        for layout in [GraphRenderer.defaultNodeLimit, 0] {
            let picture = GraphRenderer.render(graph, format: .svg, title: "odd")
            let svg = layout == 0 ? LayeredGraphSVG.svg(graph) : picture.text
            let drawing = try PictureChecks.drawing(svg)
            for name in names {
                let lines = name.split(separator: "\n").map(String.init)
                for line in lines { #expect(drawing.texts.contains(line), "\(line) not drawn (layout limit \(layout))") }
            }
            #expect(Set(drawing.nodes) == Set(nodes.map(\.id)))
        }
    }

    @Test func tooLargeGraphFallsBackToTheLayeredLayout() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Graph/ControlFlowProgram.mlpackage")))
        let picture = GraphRenderer.render(graph, format: .svg, title: "x", nodeLimit: 5)
        #expect(picture.notes.count == 1)
        #expect(picture.notes.first?.contains("simpler layered layout") == true)
        #expect(picture.text.contains("(simplified layout)"))
        try expectComplete(picture.text, graph: graph)
    }

    /// Graphviz's own complaint comes back as the failure (and the next layout still works).
    @Test func rejectedDOTIsAFailureWithGraphvizReason() throws {
        guard case .failure(let failure) = GraphRenderer.layout("digraph model { a -> ; }") else {
            Issue.record("a syntax error was laid out")
            return
        }
        #expect(failure.message.hasPrefix("the DOT text was rejected: "))
        // (Graphviz's line counter runs on across texts read in one process: no line number checked.)
        #expect(failure.message.contains("syntax error in line "), "\(failure.message)")
        #expect(!failure.message.hasSuffix(" ") && !failure.message.contains("\n"))
        guard case .success(let svg) = GraphRenderer.layout("digraph model { a -> b; }") else {
            Issue.record("Graphviz did not recover")
            return
        }
        #expect(try PictureChecks.drawing(svg).edges == ["a->b"])
    }

    @Test func thousandOperationsLayOutWithGraphviz() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Graph/LongProgram.mlpackage")))
        let picture = GraphRenderer.render(graph, format: .svg, title: "long")
        #expect(picture.notes.isEmpty)
        try expectComplete(picture.text, graph: graph)
    }

    @Test(arguments: [("a.svg", GraphFormat.svg), ("dir.x/B.HTML", .html), ("g.dot", .dot)])
    func formatFromExtension(path: String, format: GraphFormat) throws {
        #expect(try GraphFormat(path: path) == format)
    }

    @Test(arguments: ["a.png", "noextension", "dir.svg/file"])
    func unknownExtensionsAreRefused(path: String) {
        #expect(throws: PictureError.self) { try GraphFormat(path: path) }
    }

    @Test func directionFollowsTheLongestChain() throws {
        let short = ModelGraph(try ModelFile.open(Fixtures.path("Models/PipelineClassifier.mlmodel")))
        let long = ModelGraph(try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel")))
        #expect(GraphDirection.chosen(for: short) == .leftToRight)
        #expect(GraphDirection.chosen(for: long) == .topToBottom)
    }

    private func expectComplete(_ svg: String, graph: ModelGraph, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let drawing = try PictureChecks.drawing(svg)
        #expect(Set(drawing.nodes) == Set(graph.allNodes.map(\.id)), sourceLocation: sourceLocation)
        #expect(drawing.nodes.count == graph.allNodes.count, sourceLocation: sourceLocation)
        let edges = graph.edges.map { "\($0.from)->\($0.to)" }
        #expect(drawing.edges.sorted() == edges.sorted(), sourceLocation: sourceLocation)
        for node in graph.allNodes {
            let head = GraphDOT.labelLines(node)[0]
            #expect(drawing.texts.contains(head), "label \(head) not drawn", sourceLocation: sourceLocation)
        }
    }
}
