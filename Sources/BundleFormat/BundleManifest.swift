/// `manifest.json`: what made a bundle, from what, and the size and SHA-256
/// of every other file in it.
public struct BundleManifest: Codable, Equatable, Sendable {
    /// The program that wrote the bundle.
    public struct Compiler: Codable, Equatable, Sendable {
        /// `modelc`.
        public var name: String
        /// Its version; a bundle from another version is rebuilt.
        public var version: String

        public init(name: String, version: String) {
            self.name = name
            self.version = version
        }
    }

    /// The options that change what is written.
    public struct Options: Codable, Equatable, Sendable {
        /// Float32 weights were stored as float16.
        public var fp16: Bool

        public init(fp16: Bool) {
            self.fp16 = fp16
        }
    }

    /// The model the bundle was compiled from.
    public struct Source: Codable, Equatable, Sendable {
        /// The source's file name (no directory, so bundles are reproducible across machines).
        public var name: String
        /// `mlmodel` or `mlpackage`.
        public var format: String
        /// See docs/bundle-format.md for how a package's digest is formed.
        public var sha256: String

        public init(name: String, format: String, sha256: String) {
            self.name = name
            self.format = format
            self.sha256 = sha256
        }
    }

    /// One file of the bundle.
    public struct File: Codable, Equatable, Sendable {
        /// Relative to the bundle directory, `/`-separated.
        public var path: String
        /// Bytes.
        public var size: UInt64
        /// Lowercase hexadecimal.
        public var sha256: String

        public init(path: String, size: UInt64, sha256: String) {
            self.path = path
            self.size = size
            self.sha256 = sha256
        }
    }

    /// The bundle format version (docs/bundle-format.md).
    public var formatVersion: Int
    public var compiler: Compiler
    public var options: Options
    public var source: Source
    /// Every file of the bundle except the manifest, sorted by path.
    public var files: [File]

    public init(formatVersion: Int, compiler: Compiler, options: Options, source: Source, files: [File]) {
        self.formatVersion = formatVersion
        self.compiler = compiler
        self.options = options
        self.source = source
        self.files = files
    }
}

extension BundleManifest {
    /// Reads `manifest.json` with the bundle's own JSON reader; `nil` when it
    /// is not a valid manifest.
    static func read(_ bytes: UnsafeRawBufferPointer) -> BundleManifest? {
        guard let document = try? JSONScanner.parse(bytes),
              let version = document["formatVersion"]?.integer,
              let compilerName = document["compiler"]?["name"]?.string,
              let compilerVersion = document["compiler"]?["version"]?.string,
              case .bool(let fp16)? = document["options"]?["fp16"],
              let sourceName = document["source"]?["name"]?.string,
              let sourceFormat = document["source"]?["format"]?.string,
              let sourceDigest = document["source"]?["sha256"]?.string,
              let list = document["files"]?.array
        else { return nil }
        var files: [File] = []
        for item in list {
            guard let path = item["path"]?.string, let size = item["size"]?.integer, size >= 0,
                  let digest = item["sha256"]?.string
            else { return nil }
            files.append(File(path: path, size: UInt64(size), sha256: digest))
        }
        return BundleManifest(formatVersion: Int(clamping: version),
                              compiler: Compiler(name: compilerName, version: compilerVersion),
                              options: Options(fp16: fp16),
                              source: Source(name: sourceName, format: sourceFormat, sha256: sourceDigest),
                              files: files)
    }
}

/// The few facts of `metadata.json` a reader checks.
public struct BundleMetadataFacts: Equatable, Sendable {
    public var specificationVersion: Int
    /// The model type's schema name (`neuralNetworkClassifier`, …).
    public var modelType: String

    /// Reads them from `metadata.json`; `nil` when it is not a metadata document.
    public static func read(_ bytes: UnsafeRawBufferPointer) -> BundleMetadataFacts? {
        guard let document = try? JSONScanner.parse(bytes), let first = document.array?.first,
              let version = first["specificationVersion"]?.integer,
              let type = first["modelType"]?["name"]?.string, type.hasPrefix("MLModelType_")
        else { return nil }
        return BundleMetadataFacts(specificationVersion: Int(clamping: version), modelType: String(type.dropFirst("MLModelType_".count)))
    }
}
