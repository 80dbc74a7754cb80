import ArgumentParsing
import ExitCodes
import Foundation
import ModelCompiler
import ModelSpec
import ModelValidation

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
            PositionalSpec(name: "OUTPUT", help: "The bundle directory to write (not needed with --check).", isOptional: true),
        ],
        options: [
            OptionSpec(name: "check", help: "Only validate SOURCE: print every problem found, write nothing."),
            OptionSpec(name: "fp16", help: "Store float32 weights as float16 and print the largest relative error."),
            OptionSpec(name: "force", help: "Rebuild even when OUTPUT is up to date."),
            OptionSpec(name: "json", help: "Print the result as JSON."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let source = arguments[positional: "SOURCE"] else { return .usage }
        if arguments.has("check") {
            if let output = arguments[positional: "OUTPUT"] {
                return Modelc.usageFailure(.extraArgument(output, command: spec.name),
                                           usage: "USAGE: modelc compile --check [--json] SOURCE")
            }
            return check(source, json: arguments.has("json"))
        }
        guard let output = arguments[positional: "OUTPUT"] else {
            return Modelc.usageFailure(.missingArgument(name: "OUTPUT", command: spec.name),
                                       usage: Modelc.usageLine(for: spec))
        }
        let progress = arguments.has("json") ? nil : ProgressLine.forTerminal(label: "writing weights")
        var compiler = BundleCompiler(options: CompileOptions(fp16: arguments.has("fp16"), force: arguments.has("force")))
        if let progress {
            compiler.progress = { update in progress.update(done: update.bytesWritten, total: update.totalBytes) }
        }
        do throws(CompileError) {
            let report = try compiler.compile(source, to: output)
            progress?.finish()
            Output.print(arguments.has("json") ? json(report) : text(report))
            return .success
        } catch {
            progress?.finish()
            if case .invalid(let path, let diagnostics) = error {
                Output.error(diagnostics.map { "\(path): \($0)\n" }.joined())
            }
            return Modelc.failure(error)
        }
    }

    /// `--check`: validation alone; the findings are the result, on stdout.
    private static func check(_ source: String, json: Bool) -> ExitCode {
        let model: ModelFile
        do {
            model = try ModelFile.open(source)
        } catch {
            return Modelc.failure(error)
        }
        let diagnostics = ModelValidator.validate(model)
        let errors = diagnostics.filter { $0.severity == .error }.count
        let warnings = diagnostics.count - errors
        if json {
            let objects = diagnostics.map { diagnostic in
                ["severity": diagnostic.severity.rawValue, "rule": diagnostic.rule,
                 "location": diagnostic.location, "message": diagnostic.message] as [String: Any]
            }
            Output.print(jsonText(["path": source, "valid": errors == 0, "errors": errors, "warnings": warnings,
                                   "diagnostics": objects]))
        } else {
            var text = diagnostics.map { "\(source): \($0.severity.rawValue): \($0)\n" }.joined()
            text += "\(source): \(errors == 0 ? "valid" : "invalid") (\(counted(errors, "error")), \(counted(warnings, "warning")))\n"
            Output.print(text)
        }
        return errors == 0 ? .success : .invalidModel
    }

    private static func counted(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
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
