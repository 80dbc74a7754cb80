import Foundation
import NameMatching

/// The models a `modelc build` makes: a JSON file checked in beside the code
/// that uses them (docs/cli.md, `modelc build`, lists its keys).
///
///     { "models": [
///         { "name": "classifier", "source": "https://example.com/c.zip",
///           "sha256": "…", "member": "c.mlpackage", "options": { "fp16": true } },
///         { "name": "local", "source": "models/local.mlmodel" } ] }
public struct BuildManifest: Sendable, Equatable {
    /// One model to build.
    public struct Model: Sendable, Equatable {
        /// The bundle's name: the output is `NAME.mlmodelc`.
        public var name: String
        /// The source as written in the manifest.
        public var source: String
        /// Where the source comes from.
        public var location: Location
        /// The SHA-256 the source file must have.
        public var sha256: String?
        /// The model to take from an archive holding several.
        public var member: String?
        /// Store float32 weights as float16.
        public var fp16: Bool
    }

    public enum Location: Sendable, Equatable {
        /// An http, https or file URL, fetched through the cache.
        case url(String)
        /// A path, made absolute against the manifest's directory.
        case path(String)
    }

    /// The manifest file.
    public var path: String
    public var models: [Model]

    static let modelKeys = ["name", "source", "sha256", "member", "options"]
    static let optionKeys = ["fp16"]

    /// Reads and checks the manifest at `path`. URL sources need a `sha256`
    /// unless `allowUnpinned`.
    public static func read(_ path: String, allowUnpinned: Bool = false) throws(BuildError) -> BuildManifest {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableManifest(path: path, reason: FileManager.default.fileExists(atPath: path) ? "cannot be read" : "no such file")
        }
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: data) } catch {
            throw .invalidManifest(path: path, location: "", reason: "not valid JSON")
        }
        guard let object = root as? [String: Any] else { throw .invalidManifest(path: path, location: "", reason: "expected an object with \"models\"") }
        try checkKeys(object, allowed: ["models"], at: "", path: path)
        guard let list = object["models"] as? [Any] else { throw .invalidManifest(path: path, location: "models", reason: "expected a list of models") }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var models: [Model] = []
        var names: Set<String> = []
        for (index, item) in list.enumerated() {
            let at = "models[\(index)]"
            guard let entry = item as? [String: Any] else { throw .invalidManifest(path: path, location: at, reason: "expected an object") }
            try checkKeys(entry, allowed: modelKeys, at: at, path: path)
            let name = try string(entry, "name", at: at, path: path)
            guard let name, isValidName(name) else {
                throw .invalidManifest(path: path, location: at + ".name", reason: "expected a name of letters, digits, '.', '-' and '_', not starting with '.'")
            }
            guard names.insert(name).inserted else { throw .invalidManifest(path: path, location: at + ".name", reason: "'\(name)' is used twice") }
            guard let source = try string(entry, "source", at: at, path: path), !source.isEmpty else {
                throw .invalidManifest(path: path, location: at + ".source", reason: "expected a URL or a path")
            }
            let location: Location
            if source.contains("://") {
                let scheme = source.prefix { $0 != ":" }.lowercased()
                guard ["http", "https", "file"].contains(scheme) else {
                    throw .invalidManifest(path: path, location: at + ".source", reason: "unsupported scheme '\(scheme)' (http, https and file are)")
                }
                location = .url(source)
            } else {
                location = .path(source.hasPrefix("/") ? source : directory + "/" + source)
            }
            let sha256 = try string(entry, "sha256", at: at, path: path)?.lowercased()
            if let sha256, sha256.utf8.count != 64 || !sha256.allSatisfy(\.isHexDigit) {
                throw .invalidManifest(path: path, location: at + ".sha256", reason: "expected 64 hexadecimal digits")
            }
            if case .url = location, sha256 == nil, !allowUnpinned {
                throw .invalidManifest(path: path, location: at + ".sha256", reason: "a URL source needs a sha256 (or --allow-unpinned)")
            }
            var fp16 = false
            if let options = entry["options"] {
                guard let options = options as? [String: Any] else { throw .invalidManifest(path: path, location: at + ".options", reason: "expected an object") }
                try checkKeys(options, allowed: optionKeys, at: at + ".options", path: path)
                if let value = options["fp16"] {
                    guard let flag = value as? Bool else {
                        throw .invalidManifest(path: path, location: at + ".options.fp16", reason: "expected true or false")
                    }
                    fp16 = flag
                }
            }
            let member = try string(entry, "member", at: at, path: path)
            models.append(Model(name: name, source: source, location: location, sha256: sha256, member: member, fp16: fp16))
        }
        return BuildManifest(path: path, models: models)
    }

    private static func string(_ object: [String: Any], _ key: String, at: String, path: String) throws(BuildError) -> String? {
        guard let value = object[key] else { return nil }
        guard let text = value as? String else { throw .invalidManifest(path: path, location: at + "." + key, reason: "expected a string") }
        return text
    }

    private static func checkKeys(_ object: [String: Any], allowed: [String], at: String, path: String) throws(BuildError) {
        for key in object.keys.sorted() where !allowed.contains(key) {
            let suggestion = closestMatch(to: key, among: allowed)
            throw .invalidManifest(path: path, location: at.isEmpty ? key : at + "." + key,
                                   reason: "unknown key" + didYouMean(suggestion))
        }
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && name.utf8.count <= 200
            && name.unicodeScalars.allSatisfy { ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "._-".unicodeScalars.contains($0) }
    }
}
