import ArgumentParsing
import ExitCodes
import Foundation
import ModelFetch
import NameMatching

/// `modelc cache list|verify|prune|path`: look after the download cache.
enum CacheCommand {
    static let actions = ["list", "verify", "prune", "path"]

    static let spec = CommandSpec(
        name: "cache",
        abstract: "Look after the download cache: list, verify, prune, path.",
        discussion: """
            list    the cached URLs (SHA-256, size, last use), unreferenced files and interrupted downloads.
            verify  hash every cached file; a damaged one is removed (the next fetch downloads it again)
                    and the exit code is 89.
            prune   remove what no fetch needs: entries whose file is gone, files no entry uses, leftovers
                    of killed processes; with --max-size also interrupted downloads and the least recently
                    used entries until the cache fits; --all empties it.
            path    print the cache directory.
            The cache is $MODELC_CACHE, else $XDG_CACHE_HOME/modelc, else ~/.cache/modelc. verify and
            prune wait for running fetches and keep new ones waiting until they finish.
            """,
        arguments: [PositionalSpec(name: "ACTION", help: "list, verify, prune or path.")],
        options: [
            OptionSpec(name: "max-size", valueName: "SIZE", help: "prune: shrink the cache to SIZE (bytes, or with K, M, G suffix)."),
            OptionSpec(name: "all", help: "prune: remove everything."),
            OptionSpec(name: "json", help: "Print the result as JSON."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        let usage = Modelc.usageLine(for: spec)
        guard let action = arguments[positional: "ACTION"] else { return .usage }
        guard actions.contains(action) else {
            return Modelc.usageFailure(.invalidArgument(name: "ACTION", value: action, reason: "expected one of \(actions.joined(separator: ", "))"
                + didYouMean(closestMatch(to: action, among: actions))), usage: usage)
        }
        var maximumBytes: UInt64?
        if let size = arguments.value("max-size") {
            guard action == "prune" else { return Modelc.usageFailure(.invalidValue(option: "max-size", value: size, reason: "only prune takes it"), usage: usage) }
            guard let bytes = parseByteSize(size) else {
                return Modelc.usageFailure(.invalidValue(option: "max-size", value: size, reason: "expected bytes, or a number with K, M or G"), usage: usage)
            }
            maximumBytes = bytes
        }
        if arguments.has("all"), action != "prune" {
            return Modelc.usageFailure(.invalidValue(option: "all", value: action, reason: "only prune takes it"), usage: usage)
        }
        guard let root = FetchCache.defaultRoot() else {
            Output.error("\(Modelc.toolName): error: no cache directory: set MODELC_CACHE (or HOME)\n")
            return .usage
        }
        let cache = FetchCache(root: root)
        let json = arguments.has("json")
        switch action {
        case "path":
            Output.print(json ? jsonText(["path": root]) : root + "\n")
            return .success
        case "list":
            list(cache, json: json)
            return .success
        case "verify":
            do {
                let result = try cache.verify()
                if json {
                    Output.print(jsonText(["checked": result.checked, "damaged": result.damaged]))
                } else {
                    Output.print(result.damaged.map { "\(cache.blobPath(sha256: $0)): damaged, removed\n" }.joined()
                        + "\(root): \(result.checked) file\(result.checked == 1 ? "" : "s") checked, \(result.damaged.count) damaged\n")
                }
                return result.damaged.isEmpty ? .success : .cacheDamaged
            } catch {
                Output.error("\(Modelc.toolName): error: \(error)\n")
                return .cannotWrite
            }
        default:
            do {
                let report = try cache.prune(maximumBytes: maximumBytes, everything: arguments.has("all"))
                if json {
                    Output.print(jsonText(["removedURLs": report.removedURLs.map(DownloadError.redacted), "removedItems": report.removedItems,
                                           "freedBytes": report.freedBytes]))
                } else {
                    Output.print(report.removedURLs.map { "removed \(DownloadError.redacted($0))\n" }.joined()
                        + "\(root): freed \(byteCount(Int(report.freedBytes))) (\(report.removedItems) item\(report.removedItems == 1 ? "" : "s") removed)\n")
                }
                return .success
            } catch {
                Output.error("\(Modelc.toolName): error: \(error)\n")
                return .cannotWrite
            }
        }
    }

    private static func list(_ cache: FetchCache, json: Bool) {
        let listing = cache.list()
        if json {
            let entries = listing.entries.map { entry -> [String: Any] in
                var object: [String: Any] = [
                    "url": DownloadError.redacted(entry.url), "sha256": entry.sha256, "bytes": entry.bytes,
                    "downloadedAt": isoDate(entry.downloadedAt), "checkedAt": isoDate(entry.checkedAt), "usedAt": isoDate(entry.usedAt),
                ]
                if let etag = entry.etag { object["etag"] = etag }
                if let lastModified = entry.lastModified { object["lastModified"] = lastModified }
                return object
            }
            let partials = listing.partials.map { partial -> [String: Any] in
                ["url": partial.url.map { DownloadError.redacted($0) as Any } ?? NSNull(), "bytes": partial.bytes]
            }
            Output.print(jsonText(["root": cache.root, "entries": entries, "unreferenced": listing.unreferencedBlobs,
                                   "partials": partials, "totalBytes": listing.totalBytes]))
            return
        }
        var text = ""
        for entry in listing.entries {
            text += "\(entry.sha256)  \(byteCount(Int(entry.bytes)).padding(toLength: 9, withPad: " ", startingAt: 0))  "
                + "\(isoDate(entry.usedAt))  \(DownloadError.redacted(entry.url))\n"
        }
        for blob in listing.unreferencedBlobs { text += "\(blob)  (no URL)\n" }
        for partial in listing.partials {
            text += "partial \(byteCount(Int(partial.bytes)))  \(partial.url.map(DownloadError.redacted) ?? "(unknown URL)")\n"
        }
        text += "\(cache.root): \(listing.entries.count) URL\(listing.entries.count == 1 ? "" : "s"), \(byteCount(Int(listing.totalBytes))) on disk\n"
        Output.print(text)
    }

    private static func isoDate(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}
