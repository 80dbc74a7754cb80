import FixtureSupport
import Foundation
import Testing

/// `modelc inspect MODEL --graph OUT` run as a user runs it.
@Suite struct InspectGraphTests {
    @Test(arguments: ["svg", "dot", "html"])
    func writesTheGraphInTheFormOfTheExtension(format: String) throws {
        let directory = try Fixtures.temporaryDirectory("graph")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("classifier.\(format)").path
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models/ImageClassifier.mlmodel", "--graph", output])
        #expect(result.status == 0, "\(result.standardError)")
        // The usual summary still goes to standard output; the graph line to standard error.
        #expect(result.standardOutput.hasPrefix("Fixtures/Models/ImageClassifier.mlmodel\n"))
        #expect(result.standardError == "modelc: graph written to \(output) (14 nodes, 13 edges, 0 frames, "
            + "\(result.standardError.split(separator: ",").last?.dropFirst() ?? "")")
        let text = try String(contentsOfFile: output, encoding: .utf8)
        switch format {
        case "svg":
            let drawing = try PictureChecks.drawing(text)
            #expect(drawing.nodes.count == 14 && drawing.edges.count == 13)
            #expect(drawing.texts.contains("convolution · conv1"))
            #expect(drawing.tooltips.contains { $0.contains("weights: float32 [8, 3, 3, 3]") })
        case "dot":
            #expect(text.hasPrefix("digraph model {"))
            #expect(text.contains("label=\"convolution · conv1\\n"))
        default:
            #expect(text.hasPrefix("<!DOCTYPE html>"))
            #expect(PictureChecks.externalReferences(text).isEmpty)
            let drawing = try PictureChecks.drawing(try #require(PictureChecks.inlineSVG(text)))
            #expect(drawing.nodes.count == 14)
        }
    }

    @Test func jsonAndGraphTogether() throws {
        let directory = try Fixtures.temporaryDirectory("graph")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("p.svg").path
        let result = try ModelcProcess.run(["inspect", "--json", "Fixtures/Models/PipelineClassifier.mlmodel", "--graph", output])
        #expect(result.status == 0)
        #expect(Fixtures.parseJSON(result.standardOutput) != nil)
        #expect(FileManager.default.fileExists(atPath: output))
    }

    @Test(arguments: ["graph.png", "graph", "graph.svgz"])
    func unknownExtensionIsAUsageError(name: String) throws {
        let directory = try Fixtures.temporaryDirectory("graph")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent(name).path
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models/MLProgram.mlpackage", "--graph", output])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        let first = try #require(result.standardError.split(separator: "\n").first)
        #expect(first.hasPrefix("modelc: error: invalid value '\(output)' for '--graph': "))
        #expect(first.hasSuffix("expected .svg, .dot, .html"))
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test(arguments: ["/nonexistent-directory/graph.svg", "READONLY/graph.html"])
    func unwritableOutputExits74(path: String) throws {
        let directory = try Fixtures.temporaryDirectory("graph")
        defer {
            try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
            try? FileManager.default.removeItem(at: directory)
        }
        var output = path
        if path.hasPrefix("READONLY/") {
            // A directory no one may write to; root ignores modes, so a file stands in for the directory.
            let blocker = directory.appendingPathComponent("READONLY")
            try Data("not a directory".utf8).write(to: blocker)
            output = directory.path + "/" + path
        }
        let result = try ModelcProcess.run(["inspect", "Fixtures/Models/MLProgram.mlpackage", "--graph", output])
        #expect(result.status == 74)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix("modelc: error: cannot write the graph: ") == true)
    }

    @Test func tooLargeGraphFallsBackAndSaysSo() throws {
        let directory = try Fixtures.temporaryDirectory("graph")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("long.svg").path
        let result = try ModelcProcess.run(["inspect", "Fixtures/Graph/LongProgram.mlpackage", "--graph", output],
                                           environment: ["MODELC_GRAPH_NODE_LIMIT": "500"])
        #expect(result.status == 0)
        #expect(result.standardError.hasPrefix("modelc: note: 1002 nodes are more than Graphviz lays out in bounded time (limit 500); "
            + "drawn in a simpler layered layout without clusters\n"))
        let drawing = try PictureChecks.drawing(try String(contentsOfFile: output, encoding: .utf8))
        #expect(drawing.nodes.count == 1002 && drawing.edges.count == 1112)
    }
}
