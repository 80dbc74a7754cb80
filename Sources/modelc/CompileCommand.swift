import ArgumentParsing
import Foundation
import ModelCompiler
import ModelSpec

/// `modelc compile SOURCE OUTPUT`: validate a model and write its bundle.
enum CompileCommand {
    static let spec = CommandSpec(
        name: "compile",
        abstract: "Validate a Core ML model and compile it into a bundle directory.",
        discussion: """
            SOURCE is an .mlmodel file or an .mlpackage directory; OUTPUT is the bundle directory
            to write (conventionally NAME.mlmodelc). The bundle is written beside OUTPUT and renamed
            into place, so OUTPUT is either the old bundle or the new one, never half of either.
            When OUTPUT already holds SOURCE compiled with the same options by this version, nothing
            is written ("up to date"). The bundle format is described in docs/bundle-format.md.
            """,
        arguments: [
            PositionalSpec(name: "SOURCE", help: "The .mlmodel file or .mlpackage directory."),
            PositionalSpec(name: "OUTPUT", help: "The bundle directory to write."),
        ],
        options: [
            OptionSpec(name: "fp16", help: "Store float32 weights as float16 and print the largest relative error."),
            OptionSpec(name: "force", help: "Rebuild even when OUTPUT is up to date."),
            OptionSpec(name: "json", help: "Print the result as JSON."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let source = arguments[positional: "SOURCE"], let output = arguments[positional: "OUTPUT"] else {
            return .usage
        }
        let compiler = BundleCompiler(options: CompileOptions(fp16: arguments.has("fp16"), force: arguments.has("force")))
        do {
            let report = try compiler.compile(source, to: output)
            Output.print(arguments.has("json") ? json(report) : text(report))
            return .success
        } catch {
            return Modelc.failure(error)
        }
    }

    private static func text(_ report: CompileReport) -> String {
        switch report.outcome {
        case .upToDate:
            return "\(report.output): up to date\n"
        case .compiled:
            var lines = ["\(report.output): compiled (\(report.manifest.fileCount) files, \(byteCount(Int(report.manifest.totalBytes))), "
                + "\(report.weightCount) weights in \(report.blobCount) blobs)"]
            if let error = report.float16MaxRelativeError {
                lines.append("float16: largest relative error \(String(format: "%.3g", error))"
                    + (report.float16WorstWeight.map { " (\($0))" } ?? ""))
            }
            return lines.joined(separator: "\n") + "\n"
        }
    }

    private static func json(_ report: CompileReport) -> String {
        var object: [String: Any] = [
            "outcome": report.outcome.rawValue,
            "output": report.output,
            "sourceSHA256": report.manifest.sourceSHA256,
            "bytes": report.manifest.totalBytes,
            "files": report.manifest.fileCount,
        ]
        if report.outcome == .compiled {
            object["weights"] = report.weightCount
            object["blobs"] = report.blobCount
        }
        if let error = report.float16MaxRelativeError { object["float16MaxRelativeError"] = error }
        if let weight = report.float16WorstWeight { object["float16WorstWeight"] = weight }
        return jsonText(object)
    }
}

/// Compact JSON text with sorted keys and a final newline.
func jsonText(_ object: Any) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
        return "{}\n"
    }
    return String(decoding: data, as: UTF8.self) + "\n"
}
