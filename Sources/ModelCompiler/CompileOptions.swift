/// How `BundleCompiler` compiles.
public struct CompileOptions: Equatable, Sendable {
    /// Store float32 neural-network weights as float16.
    public var fp16: Bool
    /// Rebuild even when the output is up to date.
    public var force: Bool

    public init(fp16: Bool = false, force: Bool = false) {
        self.fp16 = fp16
        self.force = force
    }
}

/// How far a compile has come, reported while the weights are written.
public struct CompileProgress: Equatable, Sendable {
    /// Weight bytes written so far, and in all.
    public var bytesWritten: UInt64
    public var totalBytes: UInt64
}

/// What a compile did.
public struct CompileReport: Equatable, Sendable {
    public enum Outcome: String, Equatable, Sendable {
        case compiled
        /// The output already held this source compiled with these options
        /// by this compiler version; nothing was written.
        case upToDate
    }

    public var outcome: Outcome
    /// The output bundle's directory.
    public var output: String
    /// The manifest of the bundle at `output`.
    public var manifest: BundleManifestSummary
    /// Weight tensors in the model and distinct blobs stored for them.
    public var weightCount: Int
    public var blobCount: Int
    /// With `--fp16`: the largest relative error of a converted value, and
    /// the weight (`owner role`) it occurred in.
    public var float16MaxRelativeError: Double?
    public var float16WorstWeight: String?
    /// Each source file as hashed (or taken from `BundleCompiler.knownSourceFiles`).
    var sourceFiles: [SourceDigest.FileDigest] = []
}

/// The facts of a bundle manifest a caller reports.
public struct BundleManifestSummary: Equatable, Sendable {
    public var sourceSHA256: String
    public var totalBytes: UInt64
    public var fileCount: Int
}
