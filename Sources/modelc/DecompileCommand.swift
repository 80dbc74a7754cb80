import ArgumentParsing
import ExitCodes
import ModelCompiler

/// `modelc decompile BUNDLE OUTPUT`: rebuild the model a bundle came from.
enum DecompileCommand {
    static let spec = CommandSpec(
        name: "decompile",
        abstract: "Rebuild the Core ML model a bundle was compiled from.",
        discussion: """
            Every file of BUNDLE is checked against its manifest first. OUTPUT must not exist; it is an
            .mlmodel file, or an .mlpackage directory for ML programs (their weights stay in a weight
            file). Without --fp16 at compile time the model holds the same messages and values as the
            source; float32 weights compiled with --fp16 come back as float16.
            """,
        arguments: [
            PositionalSpec(name: "BUNDLE", help: "The compiled bundle directory."),
            PositionalSpec(name: "OUTPUT", help: "The .mlmodel file or .mlpackage directory to write."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let bundle = arguments[positional: "BUNDLE"], let output = arguments[positional: "OUTPUT"] else { return .usage }
        do {
            let report = try BundleDecompiler.decompile(bundle, to: output)
            Output.print("\(report.output): \(report.format.rawValue) with \(report.weightCount) weights restored\n")
            return .success
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return ExitCode(error)
        }
    }
}
