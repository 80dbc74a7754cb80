import Foundation
import ModelBuild
import ModelCompiler
import ModelFetch
import ModelRuntime
import SystemIO

/// The models a server offers: the bundles (`NAME.mlmodelc`) and source
/// models (`NAME.mlmodel`, `NAME.mlpackage`) of one directory, looked up by
/// name on every request, so models added or removed are seen at once.
///
/// A name found is remembered with the directory's identity and modification time: while both
/// stay (no entry added, removed or renamed), the next lookup is one `stat` of the directory
/// instead of one per extension tried.
public struct ModelRepository: Sendable {
    /// The directory served.
    public let directory: String
    /// Where source models are compiled on first use.
    public let compileCache: String
    private let found = FoundPaths()

    /// A repository over `directory`.
    ///
    /// - Throws: `ServingError.modelRepository` when it is not a readable directory.
    public init(directory: String, compileCache: String) throws(ServingError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .modelRepository(path: directory, reason: "no such directory")
        }
        guard (try? FileManager.default.contentsOfDirectory(atPath: directory)) != nil else {
            throw .modelRepository(path: directory, reason: "the directory cannot be listed")
        }
        self.directory = URL(fileURLWithPath: directory).standardizedFileURL.path
        self.compileCache = compileCache
    }

    /// Builds a `modelc build` manifest (fetching, pinning, compiling through
    /// the download cache) into `cacheRoot/serve/<digest>/`, then serves that.
    ///
    /// - Throws: `ServingError.modelRepository` naming the manifest and the
    ///   first model that failed.
    public static func building(manifest path: String, cacheRoot: String, jobs: Int) throws(ServingError) -> ModelRepository {
        let manifest: BuildManifest
        do {
            manifest = try BuildManifest.read(path)
        } catch {
            throw .modelRepository(path: path, reason: error.description)
        }
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let key = SHA256Digest.of(Array(absolute.utf8)).description.prefix(24)
        let output = "\(cacheRoot)/serve/\(key)"
        let summary: BuildSummary
        do {
            summary = try ModelBuilder.build(manifest, options: BuildOptions(outputDirectory: output, jobs: jobs, cache: FetchCache(root: cacheRoot)))
        } catch {
            throw .modelRepository(path: path, reason: error.description)
        }
        if let failed = summary.models.first(where: { $0.status == .failed }) {
            throw .modelRepository(path: path, reason: "model '\(failed.name)': \(failed.error ?? "failed")")
        }
        return try ModelRepository(directory: output, compileCache: cacheRoot)
    }

    static let extensions = [".mlmodelc", ".mlpackage", ".mlmodel"]

    /// The file or bundle serving `name`, if the directory holds one.
    public func path(for name: String) -> String? {
        guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else { return nil }
        let stamp = DirectoryStamp(of: directory)
        if let stamp, let known = found.path(for: name, under: stamp) { return known }
        for suffix in Self.extensions {
            let path = "\(directory)/\(name)\(suffix)"
            if FileManager.default.fileExists(atPath: path) {
                if let stamp { found.remember(path, for: name, under: stamp) }
                return path
            }
        }
        return nil
    }

    /// The names of every model in the directory, sorted.
    public func names() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var names: Set<String> = []
        for entry in entries where !entry.hasPrefix(".") {
            for suffix in Self.extensions where entry.hasSuffix(suffix) {
                names.insert(String(entry.dropLast(suffix.count)))
            }
        }
        return names.sorted()
    }

    /// Opens the model at `path` (from `path(for:)`): a bundle as it is, a
    /// source model compiled into the cache first (reused while up to date).
    public func load(_ path: String, configuration: ModelConfiguration) throws(ModelLoadError) -> Model {
        var bundle = path
        if !FileManager.default.fileExists(atPath: path + "/manifest.json") {
            do {
                bundle = try ModelCompilation.compiledBundle(for: path, cacheDirectory: compileCache)
            } catch {
                throw .compile(error)
            }
        }
        do {
            return try Model(contentsOf: bundle, configuration: configuration)
        } catch {
            throw .model(error)
        }
    }
}

/// What tells that a directory's entries may have changed: its device, inode and modification time.
struct DirectoryStamp: Equatable {
    var device: UInt64
    var inode: UInt64
    var seconds: Int
    var nanoseconds: Int

    /// How recent a modification time may not be: the kernel stamps a change with a coarse clock
    /// (a few milliseconds), so a second change within that tick would leave the time as it was.
    static let settledNanoseconds = 1_000_000_000

    /// The directory's stamp, or nil when it cannot be read or changed within the last second
    /// (nothing is remembered under such a stamp).
    init?(of directory: String, now: timespec = DirectoryStamp.realtime()) {
        var info = stat()
        guard Syscalls.current.stat(directory, &info) == 0 else { return nil }
        let modified = info.st_mtim
        let age = (now.tv_sec - modified.tv_sec) * 1_000_000_000 + (now.tv_nsec - modified.tv_nsec)
        guard age >= Self.settledNanoseconds else { return nil }
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), seconds: modified.tv_sec, nanoseconds: modified.tv_nsec)
    }

    init(device: UInt64, inode: UInt64, seconds: Int, nanoseconds: Int) {
        self.device = device
        self.inode = inode
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    static func realtime() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }
}

/// The paths found by name under one directory stamp; a lookup under another stamp forgets them.
/// Names not found are not remembered (any name a client sends would stay otherwise).
final class FoundPaths: Sendable {
    private let state = Locked<(stamp: DirectoryStamp?, paths: [String: String])>((nil, [:]))

    func path(for name: String, under stamp: DirectoryStamp) -> String? {
        state.withLock { state in
            guard state.stamp == stamp else {
                state = (stamp, [:])
                return nil
            }
            return state.paths[name]
        }
    }

    func remember(_ path: String, for name: String, under stamp: DirectoryStamp) {
        state.withLock { state in
            if state.stamp != stamp { state = (stamp, [:]) }
            state.paths[name] = path
        }
    }
}
