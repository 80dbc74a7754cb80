import ArgumentParsing
import Foundation
import ModelFeatures
import ModelRuntime
import ModelSpec

/// `modelc inspect FILE [--json]`: what a model is, for people or scripts.
enum InspectCommand {
    static let spec = CommandSpec(
        name: "inspect",
        abstract: "Describe a Core ML model: type, inputs and outputs, metadata, layers and weights.",
        discussion: """
            FILE is an .mlmodel file or an .mlpackage directory. The model is checked while it is
            read; a file that is not a readable Core ML model fails with a one-line error and the
            exit code of its kind (see the README). An ML program whose weight file is missing, too
            short, or referenced out of range is described, each problem named, and the command
            fails with the invalid-model exit code.
            """,
        arguments: [PositionalSpec(name: "FILE", help: "The .mlmodel file or .mlpackage directory.")],
        options: [OptionSpec(name: "json", help: "Print the summary as JSON (keys are the Core ML schema's names).")])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "FILE"] else { return .usage }
        do {
            let model = try ModelFile.open(path)
            let summary = ModelSummary(model)
            let support = RuntimeSupport(model.specification)
            Output.print(arguments.has("json") ? jsonText(summary, support) : InspectReport(summary, path: path).text + supportText(support))
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
