import BundleFormat
import CoreMLSchema
import Foundation
import ModelSpec
import ModelValidation
import SystemIO

/// Compiles a Core ML model (`.mlmodel` or `.mlpackage`) into a modelc
/// bundle directory (docs/bundle-format.md).
///
/// The bundle is written into a staging directory beside the output, flushed
/// to disk and renamed into place, so a failed or killed compile leaves any
/// previous bundle untouched and never a half-written one. The same source
/// and options always give byte-identical files.
public struct BundleCompiler: Sendable {
    /// Recorded in every manifest; a bundle made by another version is rebuilt.
    public static let compilerName = "modelc"
    public static let compilerVersion = "0.1.0"

    public var options: CompileOptions
    /// Called as weight bytes are written (at least once per 8 MiB and per
    /// blob), on the compiling thread.
    public var progress: (@Sendable (CompileProgress) -> Void)?
    /// Source files hashed by an earlier compile: one whose identity has not
    /// changed since is not read again to tell whether the bundle is up to date.
    var knownSourceFiles: [SourceDigest.FileDigest] = []

    public init(options: CompileOptions = CompileOptions(), progress: (@Sendable (CompileProgress) -> Void)? = nil) {
        self.options = options
        self.progress = progress
    }

    /// Validates `source` and compiles it into the bundle directory `output`.
    ///
    /// - Throws: `CompileError` — `.invalid` with every validation error when
    ///   the model breaks a rule; when it throws, `output` is as it was.
    public func compile(_ source: String, to output: String) throws(CompileError) -> CompileReport {
        // Hashing the source overlaps reading and validating it. Every way
        // out of this function waits for the hash: a caller that exits the
        // process right after a failure must not tear it down under the
        // hashing thread.
        let checkDigest = SourceDigest.Pending(path: source, known: knownSourceFiles)
        defer { checkDigest.waitUntilDone() }
        let model: ModelFile
        do {
            model = try ModelFile.open(source)
        } catch {
            throw .source(error)
        }
        let errors = ModelValidator.validate(model).filter { $0.severity == .error }
        guard errors.isEmpty else { throw .invalid(path: source, diagnostics: errors) }
        let manifestOptions = BundleManifest.Options(fp16: options.fp16)

        // Only an existing bundle made with the same options, compiler and
        // format can be up to date; only then must writing wait for the
        // source's digest. Otherwise hashing the source overlaps writing.
        let existing = BundleReader.existingManifest(at: output)
        switch existing {
        case .notABundle:
            throw .outputNotABundle(path: output)
        case .bundle(let manifest) where !options.force
            && manifest.options == manifestOptions && manifest.compiler.version == Self.compilerVersion
            && manifest.formatVersion == BundleLayout.formatVersion && BundleReader.filesPresent(manifest, in: output):
            let (digest, sourceFiles) = try checkDigest.waitForFiles()
            guard manifest.source.sha256 == digest.description else { break }
            // A compile killed after swapping its bundle in may have left the old one beside it.
            StagingDirectory.removeAbandoned(for: output)
            return CompileReport(outcome: .upToDate, output: output, manifest: summary(manifest),
                                 weightCount: 0, blobCount: 0, sourceFiles: sourceFiles)
        default:
            break
        }

        // Compiling: the digest recorded is the source's as read now. Known files' digests only tell whether
        // an existing bundle is up to date.
        let pendingDigest = knownSourceFiles.isEmpty ? checkDigest : SourceDigest.Pending(path: source)
        defer { pendingDigest.waitUntilDone() }
        let summary = ModelSummary(model)
        let sites = WeightLocator(root: model.specification.root).locations
        let plan = try WeightPlan(model: model, sites: sites, fp16: options.fp16)

        let staging = try writing { () throws(SystemCallError) in try StagingDirectory(for: output) }
        try writing { () throws(SystemCallError) in try staging.makeDirectory(BundleLayout.weightsDirectory) }
        var files: [BundleManifest.File] = []

        let weightPath = staging.path + "/" + BundleLayout.weightFile
        let weightDigest: SHA256Digest
        var conversion = WeightFileWriter.ConversionError()
        if let verbatim = plan.verbatimSource {
            weightDigest = try copyWeightFile(verbatim, to: weightPath, size: plan.fileSize, digest: pendingDigest)
        } else {
            (weightDigest, conversion) = try WeightFileWriter.write(plan, to: weightPath, progress: progress)
        }
        files.append(BundleManifest.File(path: BundleLayout.weightFile, size: plan.fileSize, sha256: weightDigest.description))
        let sourceDigest = try pendingDigest.wait().description

        let root = model.specification.root
        let (specification, programText) = SpecificationPacker.withStrippedWeights(root, plan: plan) {
            let program = root.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM ? root.pointee.mlprogram : nil
            return (SpecificationPacker.pack(root), program.map { ProgramTextPrinter.text(of: $0) })
        }
        files.append(try write(specification, BundleLayout.specification, in: staging))
        if let programText {
            files.append(try write(Array(programText.utf8), BundleLayout.programText, in: staging))
        }
        files.append(try write(try encode(index(plan)), BundleLayout.weightIndex, in: staging))
        let sourceName = URL(fileURLWithPath: source).standardizedFileURL.lastPathComponent
        files.append(try write(try encode(MetadataDocument.make(summary, sourceName: sourceName)),
                               BundleLayout.metadata, in: staging))

        files.sort { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }
        let manifest = BundleManifest(
            formatVersion: BundleLayout.formatVersion,
            compiler: .init(name: Self.compilerName, version: Self.compilerVersion),
            options: manifestOptions,
            source: .init(name: sourceName, format: model.format.rawValue, sha256: sourceDigest),
            files: files)
        _ = try write(try encode(manifest), BundleLayout.manifest, in: staging)
        try writing { () throws(SystemCallError) in try staging.commit(syncing: [BundleLayout.weightsDirectory]) }

        var report = CompileReport(outcome: .compiled, output: output, manifest: self.summary(manifest),
                                   weightCount: plan.weights.count, blobCount: plan.blobs.count,
                                   sourceFiles: try pendingDigest.waitForFiles().1)
        if options.fp16, plan.weights.contains(where: { if case .float32AsFloat16 = $0.data { true } else { false } }) {
            report.float16MaxRelativeError = conversion.maximum
            report.float16WorstWeight = "\(conversion.owner) \(conversion.role)"
        }
        return report
    }

    /// Writes the bundle's weight file as a copy of the source's, in the
    /// kernel (the plan found them byte-for-byte the same), and returns its
    /// SHA-256: the one the source digest computed for that file when the file
    /// has not changed since, else the copy's own.
    private func copyWeightFile(
        _ source: MILBlobFile, to path: String, size: UInt64, digest: SourceDigest.Pending
    ) throws(CompileError) -> SHA256Digest {
        let before = try? FileIdentity(path: source.path)
        try writing { () throws(SystemCallError) in try FileCopy.copyFile(source.path, to: path) }
        progress?(CompileProgress(bytesWritten: size, totalBytes: size))
        let hashed = try digest.waitForFiles().1
        if let before, let file = hashed.first(where: { $0.identity == before }), file.size == size,
           (try? FileIdentity(path: source.path)) == before {
            return file.digest
        }
        return try writing { () throws(SystemCallError) in try SHA256Digest.ofFile(at: path).digest }
    }

    private func index(_ plan: WeightPlan) -> WeightIndex {
        WeightIndex(weights: plan.weights.map { weight in
            let blob = plan.blobs[weight.blob]
            return WeightIndex.Entry(
                path: weight.site.path, owner: weight.site.owner, role: weight.site.role,
                source: weight.sourceForm, dataType: weight.dataType.name, count: weight.count,
                shape: WeightShape.of(weight.site, count: weight.count),
                quantizationBits: weight.quantizationBits, blobOffset: blob.recordOffset,
                dataOffset: blob.dataOffset, bytes: UInt64(blob.data.storedByteCount))
        })
    }

    private func encode<Value: Encodable>(_ value: Value) throws(CompileError) -> [UInt8] {
        do {
            return try BundleJSON.encode(value)
        } catch {
            throw .encoding("\(error)")
        }
    }

    private func write(_ bytes: [UInt8], _ relativePath: String, in staging: StagingDirectory) throws(CompileError) -> BundleManifest.File {
        try writing { () throws(SystemCallError) in
            let file = try FileWriter(path: staging.path + "/" + relativePath)
            try file.write(bytes)
            try file.finish()
            return BundleManifest.File(path: relativePath, size: UInt64(bytes.count), sha256: SHA256Digest.of(bytes).description)
        }
    }

    private func summary(_ manifest: BundleManifest) -> BundleManifestSummary {
        BundleManifestSummary(sourceSHA256: manifest.source.sha256,
                              totalBytes: manifest.files.reduce(0) { $0 + $1.size },
                              fileCount: manifest.files.count + 1)
    }
}
