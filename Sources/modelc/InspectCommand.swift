import ArgumentParsing
import ExitCodes
import Foundation
import ModelFeatures
import ModelPictures
import ModelRuntime
import ModelSpec
import SystemIO

/// `modelc inspect FILE [--json] [--graph OUT.svg|OUT.dot|OUT.html]`: what a
/// model is, for people or scripts, and a picture of its graph.
enum InspectCommand {
    static let spec = CommandSpec(
        name: "inspect",
        abstract: "Describe a Core ML model: type, inputs and outputs, metadata, layers and weights.",
        discussion: """
            FILE is an .mlmodel file or an .mlpackage directory. The model is checked while it is
            read; a file that is not a readable Core ML model fails with a one-line error and the
            exit code of its kind (docs/cli.md, "Exit codes"). An ML program whose weight file is missing, too
            short, or referenced out of range is described, each problem named, and the command
            fails with the invalid-model exit code.

            --graph draws the model: inputs, every layer or operation (kind, key parameters, output
            type where known), weights (shape and data type) in the labels and tooltips, pipeline
            stages, program functions and the blocks of cond and while_loop as frames. The extension
            picks the form: .svg (laid out by Graphviz), .dot (the Graphviz input), .html (one page
            with the SVG, pan, zoom and search; no network). A graph of more than 1,500 nodes (or
            MODELC_GRAPH_NODE_LIMIT) is drawn in a simpler layered layout, and a note says so.
            """,
        arguments: [PositionalSpec(name: "FILE", help: "The .mlmodel file or .mlpackage directory.")],
        options: [
            OptionSpec(name: "json", help: "Print the summary as JSON (keys are the Core ML schema's names)."),
            OptionSpec(name: "graph", valueName: "OUT", help: "Also draw the model's graph into OUT.svg, OUT.dot or OUT.html."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "FILE"] else { return .usage }
        var graphOutput: (path: String, format: GraphFormat)?
        if let output = arguments.value("graph") {
            do {
                graphOutput = (output, try GraphFormat(path: output))
            } catch {
                return Modelc.usageFailure(.invalidValue(option: "graph", value: output, reason: error.description),
                                           usage: Modelc.usageLine(for: spec))
            }
        }
        do {
            let model = try ModelFile.open(path)
            let summary = ModelSummary(model)
            let support = RuntimeSupport(model.specification)
            Output.print(arguments.has("json") ? jsonText(summary, support) : InspectReport(summary, path: path).text + supportText(support))
            if let graphOutput {
                let code = drawGraph(model, modelPath: path, to: graphOutput.path, format: graphOutput.format)
                guard code == .success else { return code }
            }
            let problems = summary.weightFileProblems
            guard let first = problems.first else { return .success }
            let more = problems.count > 1 ? " (and \(problems.count - 1) more)" : ""
            Output.error("\(Modelc.toolName): error: \(path): \(problems.count) unusable weight file "
                + "\(problems.count == 1 ? "reference" : "references"): \(first)\(more)\n")
            return .invalidModel
        } catch {
            return Modelc.failure(error)
        }
    }

    /// Draws the graph of `model` into `output`; notes and the result go to standard error.
    static func drawGraph(_ model: ModelFile, modelPath: String, to output: String, format: GraphFormat) -> ExitCode {
        let clock = ContinuousClock()
        let started = clock.now
        let graph = ModelGraph(model)
        let limit = ProcessInfo.processInfo.environment["MODELC_GRAPH_NODE_LIMIT"].flatMap { Int($0) }
            ?? GraphRenderer.defaultNodeLimit
        let title = URL(fileURLWithPath: modelPath).lastPathComponent
        let picture = GraphRenderer.render(graph, format: format, title: title, nodeLimit: limit)
        for note in picture.notes { Output.error("\(Modelc.toolName): note: \(note)\n") }
        do {
            try AtomicFile.write(Array(picture.text.utf8), to: output)
        } catch {
            Output.error("\(Modelc.toolName): error: cannot write the graph: \(error)\n")
            return .cannotWrite
        }
        let seconds = (clock.now - started).inSeconds
        Output.error("\(Modelc.toolName): graph written to \(output) (\(graph.allNodes.count) nodes, \(graph.edges.count) edges, "
            + "\(graph.allClusters.count) frames, \(String(format: "%.2f", seconds)) s)\n")
        return .success
    }

    /// The "runs here" rows of the human report.
    static func supportText(_ support: RuntimeSupport) -> String {
        let label = "  runs here" + String(repeating: " ", count: 24 - "runs here".count)
        guard !support.runs else { return label + "yes\n" }
        return label + "no\n" + support.problems.map { "    \($0)\n" }.joined()
    }

    /// The summary's JSON with `"runtime": {"runs": …, "unsupported": […]}` added.
    static func jsonText(_ summary: ModelSummary, _ support: RuntimeSupport) -> String {
        let text = summary.jsonText()
        guard let closing = text.lastIndex(of: "}") else { return text }
        let list = support.problems.map(FeatureJSON.quoted).joined(separator: ", ")
        let entry = ",\n  \"runtime\" : {\n    \"runs\" : \(support.runs),\n    \"unsupported\" : [\(list)]\n  }\n"
        let body = text[..<closing].trimmingCharacters(in: .whitespacesAndNewlines)
        return body + entry + "}\n"
    }
}
