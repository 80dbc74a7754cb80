import ArgumentParsing
import BundleFormat
import ExitCodes
import ModelLoader

/// `modelc verify BUNDLE`: check a compiled bundle completely.
enum VerifyCommand {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "Check a compiled bundle: format version, files, weight records, and every file's SHA-256.",
        discussion: """
            Does everything opening a bundle does (manifest and metadata, every file present with its
            recorded size, every weight record inside the weight file and matching the index), then reads
            every file and compares its SHA-256 with the manifest.
            """,
        arguments: [PositionalSpec(name: "BUNDLE", help: "The compiled bundle directory.")])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "BUNDLE"] else { return .usage }
        do {
            _ = try ModelBundle.open(path)
            let manifest = try ModelBundle.verify(path)
            let bytes = manifest.files.reduce(UInt64(0)) { $0 + $1.size }
            Output.print("\(path): ok (\(manifest.files.count + 1) files, \(byteCount(Int(bytes))), "
                + "compiled from \(manifest.source.name) by \(manifest.compiler.name) \(manifest.compiler.version))\n")
            return .success
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return ExitCode(error)
        }
    }
}
