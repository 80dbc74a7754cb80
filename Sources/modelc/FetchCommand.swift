import ArgumentParsing
import ExitCodes
import Foundation
import ModelCompiler
import ModelFetch
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// `modelc fetch URL`: download a model through the cache, optionally copy
/// it out and compile it.
enum FetchCommand {
    static let spec = CommandSpec(
        name: "fetch",
        abstract: "Download a model (resumable, verified, cached) and print its path and SHA-256.",
        discussion: """
            URL is http://, https:// or file://. The file goes into the cache ($MODELC_CACHE, else
            $XDG_CACHE_HOME/modelc, else ~/.cache/modelc) by its SHA-256; a cached URL is revalidated
            with its ETag or Last-Modified (a 304 answer transfers nothing), and an interrupted download
            resumes where it stopped on the next run. Processes fetching the same URL share one download.
            A zip or tar archive (gzip or xz too) is unpacked in the cache and the model in it is chosen
            (--member when it holds several). Prints "SHA256  PATH": the downloaded file's SHA-256 and the
            model's path, in the cache (read-only) unless -o names where to copy it.
            Environment: MODELC_CACHE, MODELC_OFFLINE=1 (as --offline), MODELC_TOKEN (sent as
            "Authorization: Bearer TOKEN" unless --header gives an Authorization), CURL_CA_BUNDLE or
            SSL_CERT_FILE (certificate authorities to trust instead of the system's), and libcurl's proxy
            variables (https_proxy, no_proxy, ...). Header values are never printed and never sent to
            another host after a redirect.
            """,
        arguments: [PositionalSpec(name: "URL", help: "The model's http://, https:// or file:// URL.")],
        options: [
            OptionSpec(name: "output", short: "o", valueName: "PATH", help: "Copy the model to PATH (into PATH when it is a directory)."),
            OptionSpec(name: "sha256", valueName: "HEX", help: "The SHA-256 the file must have; a cached copy with it is used without the network."),
            OptionSpec(name: "compile", valueName: "BUNDLE", help: "Compile the fetched model into the bundle directory BUNDLE."),
            OptionSpec(name: "member", valueName: "NAME", help: "The model to take from an archive holding several."),
            OptionSpec(name: "offline", help: "Use the cache only; fail when the URL is not in it."),
            OptionSpec(name: "header", valueName: "'NAME: VALUE'", help: "An extra request header (repeatable), sent only to the URL's host.", repeatable: true),
            OptionSpec(name: "retries", valueName: "N", help: "Retries after timeouts, connection errors, 408, 429 and 5xx (default 5)."),
            OptionSpec(name: "timeout", valueName: "SECONDS", help: "Abort an attempt after this long without a byte, or without connecting (default 30)."),
            OptionSpec(name: "max-size", valueName: "SIZE", help: "Refuse files larger than SIZE (bytes, or with K, M, G suffix)."),
            OptionSpec(name: "quiet", short: "q", help: "Print no progress."),
            OptionSpec(name: "json", help: "Print NDJSON events (start, progress, retry, done, error) on stdout instead."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let url = arguments[positional: "URL"] else { return .usage }
        let options: FetchOptions
        switch fetchOptions(arguments, environment: ProcessInfo.processInfo.environment) {
        case .success(let parsed): options = parsed
        case .failure(let error):
            return Modelc.usageFailure(error, usage: Modelc.usageLine(for: spec))
        }
        if arguments.has("json") && arguments.has("quiet") {
            return Modelc.usageFailure(.conflictingOptions("quiet", "json"),
                                       usage: Modelc.usageLine(for: spec))
        }
        guard let root = FetchCache.defaultRoot() else {
            Output.error("\(Modelc.toolName): error: no cache directory: set MODELC_CACHE (or HOME)\n")
            return .usage
        }
        let reporter = FetchReporter(style: FetchReporter.style(json: arguments.has("json"), quiet: arguments.has("quiet")),
                                     label: displayName(of: url))
        func fail(_ message: String, _ code: ExitCode) -> ExitCode {
            reporter.failed(message, exitCode: code)
            Output.error("\(Modelc.toolName): error: \(message)\n")
            return code
        }

        // Kept from pruning until the copy and the compile are done.
        let cache = FetchCache(root: root)
        return cache.keepingFiles { () -> ExitCode in
            let result: FetchResult
            do throws(FetchError) {
                result = try Fetcher.fetch(url, cache: cache, options: options, events: reporter.report)
            } catch {
                return fail(error.description, ExitCode(error))
            }
            var path = result.path
            if let output = arguments.value("output") {
                path = destination(output, for: result)
                do throws(SystemCallError) {
                    if output.hasSuffix("/"), Syscalls.current.mkdir(output, 0o755) != 0, errno != EEXIST {
                        throw SystemCallError(call: "mkdir", path: output, code: errno)
                    }
                    try FileCopy.copy(result.path, to: path)
                } catch {
                    return fail(error.description, .cannotWrite)
                }
            }
            var fields: [String: Any] = [
                "url": DownloadError.redacted(url), "path": path, "sha256": result.sha256, "bytes": result.bytes,
                "source": result.source.rawValue,
            ]
            if let member = result.archiveMember { fields["member"] = member }
            if let transfer = result.transfer {
                fields["resumedFrom"] = transfer.resumedFrom
                fields["attempts"] = transfer.attempts
            }
            if let bundle = arguments.value("compile") {
                do throws(CompileError) {
                    let report = try BundleCompiler(options: CompileOptions()).compile(path, to: bundle)
                    fields["bundle"] = report.output
                    fields["bundleOutcome"] = report.outcome.rawValue
                } catch {
                    if case .invalid(let source, let diagnostics) = error {
                        Output.error(diagnostics.map { "\(source): \($0)\n" }.joined())
                    }
                    return fail(error.description, ExitCode(error))
                }
            }
            reporter.done(fields)
            if reporter.style != .json {
                var text = "\(result.sha256)  \(path)\n"
                if let bundle = fields["bundle"] as? String, let outcome = fields["bundleOutcome"] as? String {
                    text += "\(bundle): \(outcome == "upToDate" ? "up to date" : "compiled")\n"
                }
                Output.print(text)
                if options.download.expectedSHA256 == nil, reporter.style != .quiet, result.source == .network {
                    Output.error("\(Modelc.toolName): pin this content with --sha256 \(result.sha256)\n")
                }
            }
            return .success
        }
    }

    /// Reads the transfer options from the command line and the environment.
    static func fetchOptions(_ arguments: ParsedArguments, environment: [String: String]) -> Result<FetchOptions, UsageError> {
        var download = DownloadOptions()
        download.userAgent = "\(Modelc.toolName)/\(Modelc.version)"
        if let pin = arguments.value("sha256") {
            guard pin.utf8.count == 64, pin.allSatisfy(\.isHexDigit) else {
                return .failure(.invalidValue(option: "sha256", value: pin, reason: "expected 64 hexadecimal digits"))
            }
            download.expectedSHA256 = pin.lowercased()
        }
        if let retries = arguments.value("retries") {
            guard let count = Int(retries), (0...100).contains(count) else {
                return .failure(.invalidValue(option: "retries", value: retries, reason: "expected a whole number from 0 to 100"))
            }
            download.maximumRetries = count
        }
        if let timeout = arguments.value("timeout") {
            guard let seconds = Int(timeout), (1...86_400).contains(seconds) else {
                return .failure(.invalidValue(option: "timeout", value: timeout, reason: "expected whole seconds from 1 to 86400"))
            }
            download.stallTimeout = .seconds(seconds)
            download.connectTimeout = .seconds(seconds)
        }
        if let size = arguments.value("max-size") {
            guard let bytes = parseByteSize(size) else {
                return .failure(.invalidValue(option: "max-size", value: size, reason: "expected bytes, or a number with K, M or G"))
            }
            download.maximumBytes = bytes
        }
        for header in arguments.values["header"] ?? [] {
            // The value may be a secret: only the name is ever shown.
            let name = header.prefix { $0 != ":" }
            guard name.count < header.count, !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }),
                  !hasLineBreak(header)
            else {
                return .failure(.invalidValue(option: "header", value: String(name.prefix(40)), reason: "expected 'NAME: VALUE' on one line"))
            }
            download.headers.append(header)
        }
        if let token = environment["MODELC_TOKEN"]?.trimmingCharacters(in: .whitespaces), !token.isEmpty,
           !download.headers.contains(where: { $0.lowercased().hasPrefix("authorization:") }) {
            guard !hasLineBreak(token) else {
                return .failure(.invalidValue(option: "header", value: "MODELC_TOKEN", reason: "the token holds a line break"))
            }
            download.headers.append("Authorization: Bearer \(token)")
        }
        // The variables the curl command and OpenSSL read for a CA bundle.
        if let authorities = environment["CURL_CA_BUNDLE"] ?? environment["SSL_CERT_FILE"], !authorities.isEmpty {
            download.certificateAuthorities = authorities
        }
        let offline = arguments.has("offline") || ["1", "true", "yes"].contains(environment["MODELC_OFFLINE"]?.lowercased() ?? "")
        return .success(FetchOptions(download: download, offline: offline, member: arguments.value("member")))
    }

    /// Whether `text` holds a CR or LF, which would end a header line early.
    private static func hasLineBreak(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0 == "\r" || $0 == "\n" }
    }

    /// `output`, or the model's name inside it when `output` is a directory
    /// (or ends with "/").
    private static func destination(_ output: String, for result: FetchResult) -> String {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory)
        guard output.hasSuffix("/") || (exists && isDirectory.boolValue && !output.hasSuffix(".mlpackage")) else { return output }
        let name = result.archiveMember.map { URL(fileURLWithPath: $0).lastPathComponent } ?? displayName(of: result.url)
        return (output.hasSuffix("/") ? output : output + "/") + name
    }

    /// The URL's last path component (without query or fragment), or "download".
    static func displayName(of url: String) -> String {
        let withoutQuery = url.prefix { $0 != "?" && $0 != "#" }
        let afterScheme = withoutQuery.range(of: "://").map { withoutQuery[$0.upperBound...] } ?? withoutQuery
        let components = afterScheme.split(separator: "/", omittingEmptySubsequences: true)
        guard components.count > 1, let last = components.last, last != "..", last != "." else { return "download" }
        // Not percent-decoded: "%2F" must not become a directory separator.
        return String(last)
    }
}

/// Bytes from "1048576", "512K", "300M" or "2G" (powers of 1024); `nil` otherwise.
func parseByteSize(_ text: String) -> UInt64? {
    let multipliers: [Character: UInt64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
    var digits = Substring(text.uppercased())
    if digits.hasSuffix("IB") || digits.hasSuffix("B") { digits = digits.dropLast(digits.hasSuffix("IB") ? 2 : 1) }
    var multiplier: UInt64 = 1
    if let last = digits.last, let found = multipliers[last] {
        multiplier = found
        digits = digits.dropLast()
    }
    guard let value = UInt64(digits) else { return nil }
    let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
    return overflow ? nil : product
}
