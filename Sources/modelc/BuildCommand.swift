import ArgumentParsing
import ExitCodes
import Foundation
import ModelBuild
import ModelFetch
import Synchronization

/// `modelc build [MANIFEST]`: fetch and compile every model a manifest lists.
enum BuildCommand {
    static let spec = CommandSpec(
        name: "build",
        abstract: "Fetch and compile every model of a manifest, in parallel, keeping a lockfile.",
        discussion: """
            MANIFEST (default models.json) lists models: {"models": [{"name", "source" (URL or path,
            relative to the manifest), "sha256" (required for URLs unless --allow-unpinned), "member",
            "options": {"fp16"}}]}. Bundles go to OUT/NAME.mlmodelc; those whose source, options and
            compiler are unchanged are left alone (up to date). Fetches share the download cache
            (see 'modelc help fetch'). The lockfile (models.lock.json beside models.json) records each
            model's source SHA-256, ETag, member, options, compiler and bundle SHA-256; --frozen fails,
            naming each change, when the build would change it, and pins unpinned URLs to it.
            A failing model does not stop the others (unless --fail-fast); the exit code is then 90.
            """,
        arguments: [PositionalSpec(name: "MANIFEST", help: "The manifest (default models.json).", isOptional: true)],
        options: [
            OptionSpec(name: "out", valueName: "DIR", help: "Where the bundles go (default: build/ beside the manifest)."),
            OptionSpec(name: "jobs", short: "j", valueName: "N", help: "Models built at once (default: the number of cores)."),
            OptionSpec(name: "frozen", help: "Fail when the build would change the lockfile (for CI)."),
            OptionSpec(name: "keep-going", help: "Build every other model when one fails (the default)."),
            OptionSpec(name: "fail-fast", help: "Start no further model after one fails."),
            OptionSpec(name: "allow-unpinned", help: "Accept URL sources without a sha256."),
            OptionSpec(name: "offline", help: "Fetch from the cache only."),
            OptionSpec(name: "retries", valueName: "N", help: "Retries per download (default 5)."),
            OptionSpec(name: "timeout", valueName: "SECONDS", help: "Abort a download attempt after this long without a byte (default 30)."),
            OptionSpec(name: "json", help: "Print the summary as JSON."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        let usage = Modelc.usageLine(for: spec)
        if arguments.has("keep-going"), arguments.has("fail-fast") {
            return Modelc.usageFailure(.conflictingOptions("keep-going", "fail-fast"), usage: usage)
        }
        var jobs = ProcessInfo.processInfo.activeProcessorCount
        if let text = arguments.value("jobs") {
            guard let count = Int(text), (1...256).contains(count) else {
                return Modelc.usageFailure(.invalidValue(option: "jobs", value: text, reason: "expected a whole number from 1 to 256"), usage: usage)
            }
            jobs = count
        }
        let fetchOptions: FetchOptions
        switch FetchCommand.fetchOptions(arguments, environment: ProcessInfo.processInfo.environment) {
        case .success(let options): fetchOptions = options
        case .failure(let error): return Modelc.usageFailure(error, usage: usage)
        }
        guard let root = FetchCache.defaultRoot() else {
            Output.error("\(Modelc.toolName): error: no cache directory: set MODELC_CACHE (or HOME)\n")
            return .usage
        }
        let manifestPath = arguments[positional: "MANIFEST"] ?? "models.json"
        let json = arguments.has("json")

        let manifest: BuildManifest
        do { manifest = try BuildManifest.read(manifestPath, allowUnpinned: arguments.has("allow-unpinned")) } catch {
            return failure(error)
        }
        let output = arguments.value("out")
            ?? URL(fileURLWithPath: manifestPath).deletingLastPathComponent().appendingPathComponent("build").path
        let options = BuildOptions(outputDirectory: output, jobs: jobs, frozen: arguments.has("frozen"),
                                   failFast: arguments.has("fail-fast"), cache: FetchCache(root: root), fetch: fetchOptions)
        let finished = Mutex(0)
        let total = manifest.models.count
        let summary: BuildSummary
        do {
            summary = try ModelBuilder.build(manifest, options: options) { outcome in
                let count = finished.withLock { value in
                    value += 1
                    return value
                }
                if let error = outcome.error { Output.error("\(Modelc.toolName): error: \(error)\n") }
                if !json { Output.error("[\(count)/\(total)] \(outcome.name): \(label(outcome.status)) (\(seconds(outcome.seconds)))\n") }
            }
        } catch {
            return failure(error)
        }
        Output.print(json ? jsonSummary(summary) : table(summary))
        return summary.failedCount > 0 ? .buildFailed : .success
    }

    private static func failure(_ error: BuildError) -> ExitCode {
        Output.error("\(Modelc.toolName): error: \(error)\n")
        return switch error {
        case .unreadableManifest: .cannotRead
        case .invalidManifest, .invalidLockfile: .invalidManifest
        case .lockfileWouldChange: .lockfileChanged
        case .write: .cannotWrite
        }
    }

    private static func label(_ status: ModelOutcome.Status) -> String {
        switch status {
        case .compiled: "compiled"
        case .upToDate: "up to date"
        case .failed: "failed"
        case .skipped: "skipped"
        }
    }

    private static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    /// NAME, STATUS, SOURCE, BUNDLE and TIME columns, then the lockfile's line.
    private static func table(_ summary: BuildSummary) -> String {
        let rows = [["NAME", "STATUS", "SOURCE", "BUNDLE", "TIME"]] + summary.models.map { outcome in
            [outcome.name, label(outcome.status),
             outcome.sourceBytes.map { byteCount(Int($0)) } ?? "-", outcome.bundleBytes.map { byteCount(Int($0)) } ?? "-",
             outcome.status == .skipped ? "-" : seconds(outcome.seconds)]
        }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        var text = rows.map { row in
            row.enumerated().map { column, cell in column == 4 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
        let changes = summary.lockChanges.count
        text += "\(summary.lockfilePath): " + (changes == 0 ? "unchanged" : "updated (\(changes) change\(changes == 1 ? "" : "s"))") + "\n"
        text += summary.lockChanges.map { "  \($0)\n" }.joined()
        return text
    }

    private static func jsonSummary(_ summary: BuildSummary) -> String {
        let models = summary.models.map { outcome -> [String: Any] in
            var object: [String: Any] = ["name": outcome.name, "status": outcome.status.rawValue, "bundle": outcome.bundle, "seconds": outcome.seconds]
            if let bytes = outcome.sourceBytes { object["sourceBytes"] = bytes }
            if let bytes = outcome.bundleBytes { object["bundleBytes"] = bytes }
            if let lock = outcome.lock {
                object["sourceSHA256"] = lock.sourceSHA256
                object["bundleSHA256"] = lock.bundleSHA256
            }
            if let error = outcome.error { object["error"] = error }
            return object
        }
        return jsonText(["models": models, "failed": summary.failedCount,
                         "lockfile": ["path": summary.lockfilePath, "changes": summary.lockChanges] as [String: Any]])
    }
}
