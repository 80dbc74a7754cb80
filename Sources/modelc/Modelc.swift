import ArgumentParsing
import ExitCodes
import ModelCompiler
import ModelSpec
import NameMatching

/// The `modelc` command line: dispatches to subcommands, prints help and
/// usage errors, and turns failures into exit codes.
enum Modelc {
    static let version = BundleCompiler.compilerVersion
    static let toolName = "modelc"
    static let abstract = "fetch, compile, load and run Core ML models on Linux"

    /// A subcommand: its description and what runs it.
    struct Command: Sendable {
        let spec: CommandSpec
        let run: @Sendable (ParsedArguments) -> ExitCode
    }

    static let commands: [Command] = [
        Command(spec: InspectCommand.spec, run: InspectCommand.run),
        Command(spec: CompileCommand.spec, run: CompileCommand.run),
        Command(spec: DecompileCommand.spec, run: DecompileCommand.run),
        Command(spec: VerifyCommand.spec, run: VerifyCommand.run),
        Command(spec: FetchCommand.spec, run: FetchCommand.run),
        Command(spec: CacheCommand.spec, run: CacheCommand.run),
        Command(spec: BuildCommand.spec, run: BuildCommand.run),
        Command(spec: PredictCommand.spec, run: PredictCommand.run),
        Command(spec: GenerateCommand.spec, run: GenerateCommand.run),
        Command(spec: ClassifyCommand.spec, run: ClassifyCommand.run),
        Command(spec: DetectCommand.spec, run: DetectCommand.run),
        Command(spec: TrainCommand.spec, run: TrainCommand.run),
        Command(spec: EvaluateCommand.spec, run: EvaluateCommand.run),
        Command(spec: ServeCommand.spec, run: ServeCommand.run),
        Command(spec: helpSpec, run: { arguments in showHelp(topic: arguments[positional: "COMMAND"]) }),
    ]

    static let helpSpec = CommandSpec(
        name: "help", abstract: "Show help for modelc or one of its commands.",
        arguments: [PositionalSpec(name: "COMMAND", help: "The command to explain.", isOptional: true)])

    static func run(_ arguments: [String]) -> ExitCode {
        guard let first = arguments.first else {
            Output.error(overview())
            return .usage
        }
        switch first {
        case "--help", "-h":
            Output.print(overview())
            return .success
        case "--version":
            Output.print("\(toolName) \(version)\n")
            return .success
        default:
            break
        }
        guard let command = commands.first(where: { $0.spec.name == first }) else {
            let names = commands.map(\.spec.name)
            let error: UsageError = first.hasPrefix("-")
                ? .unknownOption(first, command: toolName,
                                 suggestion: closestMatch(to: String(first.drop { $0 == "-" }), among: ["help", "version"]))
                : .unknownCommand(first, suggestion: closestMatch(to: first, among: names))
            return usageFailure(error, usage: "USAGE: \(toolName) COMMAND [options]  (see '\(toolName) --help')")
        }
        do {
            let parsed = try ArgumentParser.parse(Array(arguments.dropFirst()), for: command.spec)
            if parsed.has("help") {
                Output.print(HelpFormatter.help(for: command.spec, tool: toolName))
                return .success
            }
            return command.run(parsed)
        } catch {
            return usageFailure(error, usage: usageLine(for: command.spec)
                + "  (see '\(toolName) help \(command.spec.name)')")
        }
    }

    /// "USAGE: modelc COMMAND …" for a command.
    static func usageLine(for spec: CommandSpec) -> String {
        "USAGE: \(HelpFormatter.usage(for: spec, tool: toolName))"
    }

    /// Prints a usage error and the usage line on standard error.
    static func usageFailure(_ error: UsageError, usage: String) -> ExitCode {
        Output.error("\(toolName): error: \(error)\n\(usage)\n")
        return .usage
    }

    /// Prints a failure on standard error and returns its exit code.
    static func failure(_ error: ModelSpecError) -> ExitCode {
        Output.error("\(toolName): error: \(error)\n")
        return ExitCode(error)
    }

    static func failure(_ error: CompileError) -> ExitCode {
        Output.error("\(toolName): error: \(error)\n")
        return ExitCode(error)
    }

    static func showHelp(topic: String?) -> ExitCode {
        guard let topic else {
            Output.print(overview())
            return .success
        }
        guard let command = commands.first(where: { $0.spec.name == topic }) else {
            return usageFailure(.unknownCommand(topic, suggestion: closestMatch(to: topic, among: commands.map(\.spec.name))),
                                usage: "USAGE: \(toolName) help [COMMAND]")
        }
        Output.print(HelpFormatter.help(for: command.spec, tool: toolName))
        return .success
    }

    static func overview() -> String {
        HelpFormatter.overview(
            tool: toolName, abstract: abstract, commands: commands.map(\.spec),
            footer: "Run '\(toolName) help COMMAND' for a command's options. '\(toolName) --version' prints the version.")
    }
}
