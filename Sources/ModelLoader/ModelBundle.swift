import BundleFormat
import Foundation
import ModelSpec

/// A compiled bundle opened for use: manifest and metadata checked, the
/// specification unpacked, the weight file mapped read-only and every index
/// entry checked against it.
///
/// Opening reads only the small files and the weight file's 64-byte records,
/// so it costs the same whatever the size of the weights. Immutable after
/// opening and safe to share across threads; the weights are unmapped when the
/// last reference goes.
public final class ModelBundle: Sendable {
    /// The bundle directory.
    public let path: String
    /// What made the bundle, from what, and its files.
    public let manifest: BundleManifest
    /// The specification without weight values.
    public let specification: Specification
    /// The model type's schema name, from `metadata.json`.
    public let modelType: String
    private let contents: BundleContents
    private let byName: [Key: Int]

    private struct Key: Hashable {
        let owner: String
        let role: String
    }

    /// Opens the bundle directory at `path`.
    ///
    /// - Throws: `BundleError` naming the bundle or the file at fault: not a
    ///   bundle, a newer format, a file missing or of the wrong size, a
    ///   malformed document, a weight record outside the file.
    public static func open(_ path: String) throws(BundleError) -> ModelBundle {
        let contents = try BundleContents.open(path)
        let metadataPath = path + "/" + BundleLayout.metadata
        guard let data = FileManager.default.contents(atPath: metadataPath),
              let facts = data.withUnsafeBytes(BundleMetadataFacts.read),
              facts.specificationVersion == Int(contents.specification.root.pointee.specificationversion)
        else {
            throw .malformedFile(path: metadataPath, detail: "not the metadata of this bundle's specification")
        }
        return ModelBundle(contents: contents, modelType: facts.modelType)
    }

    private init(contents: BundleContents, modelType: String) {
        self.contents = contents
        path = contents.path
        manifest = contents.manifest
        specification = contents.specification
        self.modelType = modelType
        var total = UInt64(contents.weights.bytes.count)
        for file in contents.manifest.files where file.path != BundleLayout.weightFile {
            let (sum, overflow) = total.addingReportingOverflow(file.size)
            total = overflow ? .max : sum
        }
        residentBytes = Int(clamping: total)
        var byName: [Key: Int] = [:]
        for (position, entry) in contents.index.weights.enumerated() {
            byName[Key(owner: entry.owner, role: entry.role)] = byName[Key(owner: entry.owner, role: entry.role)] ?? position
        }
        self.byName = byName
    }

    /// Every weight of the model, in index order.
    public var weights: [WeightIndex.Entry] { contents.index.weights }

    /// The weight `role` of the layer or operation `owner` (`conv1`,
    /// `weights`), found in constant time; `nil` when there is none.
    public func weight(owner: String, role: String) -> WeightView? {
        byName[Key(owner: owner, role: role)].flatMap { view(of: contents.index.weights[$0]) }
    }

    /// The view of one index entry.
    public func view(of entry: WeightIndex.Entry) -> WeightView? {
        guard let data = try? contents.data(for: entry), let base = data.baseAddress,
              let type = MILBlobFile.DataType(name: entry.dataType)
        else { return nil }
        return WeightView(bundle: self, base: base, count: entry.count, byteCount: data.count, dataType: type,
                          shape: entry.shape ?? [entry.count])
    }

    /// Drops the weight file's pages from this process's memory (they stay
    /// in the page cache): for a caller that has decoded the weights into
    /// memory of its own. Views stay valid; reading one faults its pages in again.
    public func releaseWeightPages() {
        contents.weights.releasePages()
    }

    /// Memory the model holds while loaded: the mapped weight file plus the
    /// other files of the bundle, which are read into memory (measured on the
    /// files, not taken from the manifest, and never more than `Int.max`).
    public let residentBytes: Int

    /// Checks every file of the bundle at `path` against the SHA-256 its
    /// manifest records (reading every byte), after the checks of `open`.
    public static func verify(_ path: String) throws(BundleError) -> BundleManifest {
        try BundleContents.open(path, verifyDigests: true).manifest
    }
}

extension MILBlobFile.DataType {
    /// The data type with this bundle-format name.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }
}
