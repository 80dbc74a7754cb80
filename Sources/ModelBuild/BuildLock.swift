import Foundation
import SystemIO

/// The lockfile (`models.lock.json` beside `models.json`): for each model,
/// what its last build resolved and produced, so that a CI build with
/// `--frozen` can insist on exactly that.
public struct BuildLock: Sendable, Equatable, Codable {
    /// What one model resolved to.
    public struct Entry: Sendable, Equatable, Codable {
        /// The source as the manifest writes it.
        public var source: String
        /// The SHA-256 of the fetched file (for URLs, of the archive when it
        /// is one), or of the local source as the compiler digests it.
        public var sourceSHA256: String
        /// The server's ETag for a URL source, when it sent one. For
        /// information: kept while the content is the same, so it never makes
        /// a change by itself.
        public var etag: String?
        /// The model taken from an archive.
        public var member: String?
        /// The compile options.
        public var fp16: Bool
        /// The compiler that made the bundle, "modelc VERSION".
        public var compiler: String
        /// The SHA-256 of the bundle's `manifest.json`, which holds every
        /// file's SHA-256: equal hashes mean byte-identical bundles.
        public var bundleSHA256: String

        public init(source: String, sourceSHA256: String, etag: String?, member: String?, fp16: Bool, compiler: String, bundleSHA256: String) {
            self.source = source
            self.sourceSHA256 = sourceSHA256
            self.etag = etag
            self.member = member
            self.fp16 = fp16
            self.compiler = compiler
            self.bundleSHA256 = bundleSHA256
        }
    }

    public var lockfileVersion = 1
    /// By model name.
    public var models: [String: Entry]

    public init(models: [String: Entry] = [:]) {
        self.models = models
    }

    /// The lockfile for the manifest at `manifestPath`: `NAME.lock.json`
    /// beside `NAME.json`.
    public static func path(forManifest manifestPath: String) -> String {
        (manifestPath.hasSuffix(".json") ? String(manifestPath.dropLast(5)) : manifestPath) + ".lock.json"
    }

    /// The lockfile at `path`, or `nil` when there is none.
    public static func read(_ path: String) throws(BuildError) -> BuildLock? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else { throw .invalidLockfile(path: path, reason: "cannot be read") }
        let lock: BuildLock
        do { lock = try JSONDecoder().decode(BuildLock.self, from: data) } catch {
            throw .invalidLockfile(path: path, reason: "malformed")
        }
        guard lock.lockfileVersion == 1 else { throw .invalidLockfile(path: path, reason: "version \(lock.lockfileVersion) is not 1") }
        return lock
    }

    /// The file's text: pretty-printed, keys sorted, so that diffs are small
    /// and the same lock is always the same bytes.
    public var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }

    /// Writes the lockfile atomically.
    public func write(to path: String) throws(BuildError) {
        do { try AtomicFile.write(Array(text.utf8), to: path) } catch {
            throw .write(path: path, reason: error.description)
        }
    }

    /// What differs from `old`, one line each, in model-name order.
    public func changes(from old: BuildLock) -> [String] {
        var lines: [String] = []
        for name in Set(models.keys).union(old.models.keys).sorted() {
            switch (old.models[name], models[name]) {
            case (nil, .some):
                lines.append("\(name): not in the lockfile")
            case (.some, nil):
                lines.append("\(name): in the lockfile but not in the manifest")
            case let (before?, after?):
                let fields: [(String, String?, String?)] = [
                    ("source", before.source, after.source),
                    ("source sha256", before.sourceSHA256, after.sourceSHA256),
                    ("member", before.member, after.member),
                    ("fp16", String(before.fp16), String(after.fp16)),
                    ("compiler", before.compiler, after.compiler),
                    ("bundle sha256", before.bundleSHA256, after.bundleSHA256),
                ]
                for (field, was, now) in fields where was != now {
                    lines.append("\(name): \(field) \(was ?? "none") → \(now ?? "none")")
                }
            case (nil, nil):
                break
            }
        }
        return lines
    }
}
