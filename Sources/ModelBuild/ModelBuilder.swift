import Dispatch
import Foundation
import ModelArchive
import ModelCompiler
import ModelFetch
import SystemIO

/// How `ModelBuilder.build` runs.
public struct BuildOptions: Sendable {
    /// Where the bundles go, as `NAME.mlmodelc`.
    public var outputDirectory: String
    /// Models built at once.
    public var jobs: Int
    /// Fail, writing nothing to the lockfile, when the build would change it.
    public var frozen: Bool
    /// Start no further model after the first failure.
    public var failFast: Bool
    /// The download cache shared by every fetch.
    public var cache: FetchCache
    /// Retries, timeouts, offline mode and headers for fetches (pins and
    /// members come from the manifest).
    public var fetch: FetchOptions

    public init(outputDirectory: String, jobs: Int = ProcessInfo.processInfo.activeProcessorCount, frozen: Bool = false,
                failFast: Bool = false, cache: FetchCache, fetch: FetchOptions = .init()) {
        self.outputDirectory = outputDirectory
        self.jobs = jobs
        self.frozen = frozen
        self.failFast = failFast
        self.cache = cache
        self.fetch = fetch
    }
}

/// What became of one model.
public struct ModelOutcome: Sendable {
    public enum Status: String, Sendable {
        case compiled
        /// The bundle already held this source, options and compiler version.
        case upToDate
        case failed
        /// Not started: `--fail-fast` after another model failed.
        case skipped
    }

    public var name: String
    public var status: Status
    /// The bundle directory.
    public var bundle: String
    /// The source's size (the downloaded file's, for URLs) and the bundle's.
    public var sourceBytes: UInt64?
    public var bundleBytes: UInt64?
    public var seconds: Double
    /// The lock entry this build resolved, when it succeeded.
    public var lock: BuildLock.Entry?
    /// Why it failed: one line naming the model's source or file.
    public var error: String?
    /// The failure, for callers that map kinds of failure to exit codes.
    public var failure: ModelFailure?
}

/// Why one model failed.
public enum ModelFailure: Error, Sendable, CustomStringConvertible {
    case fetch(FetchError)
    case compile(CompileError)
    case source(String)

    public var description: String {
        switch self {
        case .fetch(let error): error.description
        case .compile(let error): error.description
        case .source(let reason): reason
        }
    }
}

/// What a whole build did.
public struct BuildSummary: Sendable {
    /// In manifest order.
    public var models: [ModelOutcome]
    /// The lockfile, and what the build changed in it (written unless frozen).
    public var lockfilePath: String
    public var lockChanges: [String]
    public var failedCount: Int { models.filter { $0.status == .failed }.count }
}

/// Turns a manifest into bundles: fetches and compiles its models in
/// parallel, skips those already up to date, and keeps the lockfile.
public enum ModelBuilder {
    /// Builds every model of `manifest` into `options.outputDirectory`, then
    /// updates the lockfile beside the manifest (with `frozen`, throws
    /// `lockfileWouldChange` instead, naming each change). A failing model
    /// does not stop the others (unless `failFast`); it keeps its old lock
    /// entry. `progress` is called, from worker threads, as each model ends.
    ///
    /// The bundles are the same bytes wherever and whenever they are built
    /// from the same sources with the same compiler version.
    public static func build(
        _ manifest: BuildManifest, options: BuildOptions, progress: (@Sendable (ModelOutcome) -> Void)? = nil
    ) throws(BuildError) -> BuildSummary {
        let lockPath = BuildLock.path(forManifest: manifest.path)
        let oldLock = try BuildLock.read(lockPath)
        if options.frozen, oldLock == nil {
            throw .lockfileWouldChange(path: lockPath, changes: ["the lockfile does not exist (run modelc build without --frozen to create it)"])
        }
        do {
            try FileManager.default.createDirectory(atPath: options.outputDirectory, withIntermediateDirectories: true)
        } catch {
            throw .write(path: options.outputDirectory, reason: "cannot create the directory")
        }

        let outcomes = Locked([ModelOutcome?](repeating: nil, count: manifest.models.count))
        let next = Locked(0)
        let stopped = Locked(false)
        // Threads of their own: workers block on the network, on locks and on
        // the disk, and --jobs promises that many at once.
        let group = DispatchGroup()
        for _ in 0..<max(1, min(options.jobs, manifest.models.count)) {
            group.enter()
            Thread {
                defer { group.leave() }
                while true {
                    let index = next.withLock { value -> Int? in
                        guard value < manifest.models.count else { return nil }
                        defer { value += 1 }
                        return value
                    }
                    guard let index else { return }
                    let model = manifest.models[index]
                    var outcome: ModelOutcome
                    if stopped.withLock({ $0 }) {
                        outcome = ModelOutcome(name: model.name, status: .skipped, bundle: bundlePath(model, options), seconds: 0)
                    } else {
                        // Under --frozen a URL without a pin in the manifest is pinned by the
                        // lockfile, unless the manifest changed the source (a change --frozen reports).
                        let locked = oldLock?.models[model.name]
                        let lockedPin = options.frozen && locked?.source == model.source ? locked?.sourceSHA256 : nil
                        outcome = buildOne(model, options: options, lockedPin: lockedPin, previous: oldLock?.models[model.name])
                        if outcome.status == .failed, options.failFast { stopped.withLock { $0 = true } }
                    }
                    outcomes.withLock { $0[index] = outcome }
                    progress?(outcome)
                }
            }.start()
        }
        group.wait()
        let models = outcomes.withLock { $0 }.compactMap { $0 }

        var newLock = BuildLock()
        for (model, outcome) in zip(manifest.models, models) {
            if let entry = outcome.lock ?? oldLock?.models[model.name] { newLock.models[model.name] = entry }
        }
        let changes = newLock.changes(from: oldLock ?? BuildLock())
        if options.frozen {
            if !changes.isEmpty { throw .lockfileWouldChange(path: lockPath, changes: changes) }
        } else if oldLock != newLock {
            try newLock.write(to: lockPath)
        }
        return BuildSummary(models: models, lockfilePath: lockPath, lockChanges: changes)
    }

    private static func bundlePath(_ model: BuildManifest.Model, _ options: BuildOptions) -> String {
        options.outputDirectory + "/" + model.name + ".mlmodelc"
    }

    /// Fetches (when needed) and compiles one model.
    private static func buildOne(_ model: BuildManifest.Model, options: BuildOptions, lockedPin: String?, previous: BuildLock.Entry?) -> ModelOutcome {
        let start = ContinuousClock.now
        let bundle = bundlePath(model, options)
        var outcome = ModelOutcome(name: model.name, status: .failed, bundle: bundle, seconds: 0)
        let result = options.cache.keepingFiles { () -> Result<ModelOutcome, ModelFailure> in
            do throws(ModelFailure) {
                let source = try resolve(model, options: options, lockedPin: lockedPin)
                let report: CompileReport
                do throws(CompileError) {
                    report = try BundleCompiler(options: CompileOptions(fp16: model.fp16)).compile(source.path, to: bundle)
                } catch {
                    throw .compile(error)
                }
                let manifestDigest: String
                do throws(SystemCallError) { manifestDigest = try SHA256Digest.ofFile(at: bundle + "/manifest.json").digest.description } catch {
                    throw .source(error.description)
                }
                let sourceSHA256 = source.sha256 ?? report.manifest.sourceSHA256
                var done = outcome
                done.status = report.outcome == .compiled ? .compiled : .upToDate
                done.sourceBytes = source.bytes
                done.bundleBytes = report.manifest.totalBytes
                done.lock = BuildLock.Entry(
                    source: model.source, sourceSHA256: sourceSHA256,
                    etag: previous?.sourceSHA256 == sourceSHA256 ? previous?.etag : source.etag,
                    member: source.member, fp16: model.fp16,
                    compiler: "\(BundleCompiler.compilerName) \(BundleCompiler.compilerVersion)", bundleSHA256: manifestDigest)
                return .success(done)
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let done): outcome = done
        case .failure(let failure):
            outcome.failure = failure
            outcome.error = "\(model.name): \(failure.description)"
        }
        outcome.seconds = (ContinuousClock.now - start).inSeconds
        return outcome
    }

    /// A source ready to compile: its path, and what the lock records of it.
    private struct ResolvedSource {
        var path: String
        var sha256: String?
        var bytes: UInt64?
        var etag: String?
        var member: String?
    }

    private static func resolve(_ model: BuildManifest.Model, options: BuildOptions, lockedPin: String?) throws(ModelFailure) -> ResolvedSource {
        let url: String
        switch model.location {
        case .url(let address):
            url = address
        case .path(let path):
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw .source("\(path): no such file or directory")
            }
            // A local archive goes through the cache like a download; a model is compiled where it is.
            guard !isDirectory.boolValue, ArchiveExtractor.looksLikeArchive(path) || model.member != nil || model.sha256 != nil else {
                return ResolvedSource(path: path, sha256: nil, bytes: diskBytes(path), etag: nil, member: nil)
            }
            url = "file://" + path
        }
        var fetch = options.fetch
        fetch.download.expectedSHA256 = model.sha256 ?? lockedPin
        fetch.member = model.member
        let result: FetchResult
        do { result = try Fetcher.fetch(url, cache: options.cache, options: fetch) } catch {
            throw .fetch(error)
        }
        return ResolvedSource(path: result.path, sha256: result.sha256, bytes: result.bytes,
                              etag: options.cache.entry(for: url)?.etag, member: result.archiveMember)
    }

    /// The bytes of a file, or of the files below a directory.
    private static func diskBytes(_ path: String) -> UInt64 {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue,
              let walker = FileManager.default.enumerator(atPath: path)
        else {
            return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? UInt64) ?? 0
        }
        var total: UInt64 = 0
        while walker.nextObject() != nil {
            if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular {
                total += (walker.fileAttributes?[.size] as? UInt64) ?? 0
            }
        }
        return total
    }
}
