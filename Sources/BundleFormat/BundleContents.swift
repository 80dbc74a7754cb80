import Foundation
#if canImport(Glibc)
import Glibc
#endif
import ModelSpec
import SystemIO

/// The files of a compiled bundle, opened and checked against its manifest:
/// the manifest, the weight index, the unpacked specification and the
/// memory-mapped weight file.
///
/// Opening reads the small files and the weight file's headers, never the
/// weights themselves (unless `verifyDigests` is set, which hashes every file).
public struct BundleContents: Sendable {
    /// The bundle directory.
    public let path: String
    /// `manifest.json`, checked against the files.
    public let manifest: BundleManifest
    /// `weights/index.json`, checked against the weight file's records.
    public let index: WeightIndex
    /// The specification without weight values.
    public let specification: Specification
    /// The weight file, mapped read-only.
    public let weights: MILBlobFile

    /// Opens the bundle directory at `path`. With `verifyDigests`, also reads
    /// every file to compare its SHA-256 with the manifest and checks every
    /// weight file reference of `model.spec` and `model.mil` (`checkReferences`).
    public static func open(_ path: String, verifyDigests: Bool = false) throws(BundleError) -> BundleContents {
        let manifestPath = path + "/" + BundleLayout.manifest
        guard FileManager.default.fileExists(atPath: manifestPath) else {
            if !FileManager.default.fileExists(atPath: path) {
                throw .unreadable(path: path, reason: "No such file or directory")
            }
            throw .notABundle(path: path)
        }
        guard let manifestData = FileManager.default.contents(atPath: manifestPath) else {
            throw .unreadable(path: manifestPath, reason: "cannot read the file")
        }
        guard let manifest = manifestData.withUnsafeBytes(BundleManifest.read) else {
            throw .malformedFile(path: manifestPath, detail: "not a valid manifest.json")
        }
        guard manifest.formatVersion <= BundleLayout.formatVersion else {
            throw .newerFormat(path: path, version: manifest.formatVersion, supported: BundleLayout.formatVersion)
        }
        let listed = manifest.files.map(\.path)
        guard Set(listed).count == listed.count else {
            throw .malformedFile(path: manifestPath, detail: "a file is listed more than once")
        }
        for required in [BundleLayout.metadata, BundleLayout.specification, BundleLayout.weightFile, BundleLayout.weightIndex]
        where !listed.contains(required) {
            throw .malformedFile(path: manifestPath, detail: "\(required) is not listed")
        }
        for file in manifest.files {
            let filePath = path + "/" + file.path
            guard !file.path.hasPrefix("/"), !file.path.split(separator: "/").contains("..") else {
                throw .malformedFile(path: manifestPath, detail: "file path \"\(file.path)\" leaves the bundle")
            }
            var info = stat()
            guard Syscalls.current.stat(filePath, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw .missingFile(path: filePath)
            }
            let size = UInt64(info.st_size)
            guard size == file.size else { throw .sizeMismatch(path: filePath, expected: file.size, found: size) }
            if verifyDigests {
                let found = try digest(of: filePath)
                guard found == file.sha256 else { throw .digestMismatch(path: filePath, expected: file.sha256, found: found) }
            }
        }
        let indexPath = path + "/" + BundleLayout.weightIndex
        guard let indexData = FileManager.default.contents(atPath: indexPath) else { throw .missingFile(path: indexPath) }
        guard let index = indexData.withUnsafeBytes(WeightIndex.read) else {
            throw .malformedFile(path: indexPath, detail: "not a valid index.json")
        }
        let specificationPath = path + "/" + BundleLayout.specification
        let specification: Specification
        do {
            let file = try MappedFile(path: specificationPath)
            specification = try withExtendedLifetime(file) { () throws(ModelSpecError) -> Specification in
                try Specification.unpack(file.bytes, path: specificationPath)
            }
        } catch let error as ModelSpecError {
            throw .specification(error)
        } catch {
            throw .unreadable(path: specificationPath, reason: "\(error)")
        }
        let weights: MILBlobFile
        do {
            weights = try MILBlobFile(path: path + "/" + BundleLayout.weightFile)
        } catch {
            throw .weightFile(error)
        }
        let contents = BundleContents(path: path, manifest: manifest, index: index,
                                      specification: specification, weights: weights)
        try contents.checkIndex()
        if verifyDigests { try contents.checkReferences() }
        weights.adviseNormalAccess()
        return contents
    }

    /// The stored bytes of one indexed weight; valid while `weights` is alive.
    public func data(for entry: WeightIndex.Entry) throws(BundleError) -> UnsafeRawBufferPointer {
        do {
            return try weights.data(at: entry.blobOffset)
        } catch {
            throw .weightFile(error)
        }
    }

    /// Every index entry must name a blob record of its data type and size.
    private func checkIndex() throws(BundleError) {
        let indexPath = path + "/" + BundleLayout.weightIndex
        for entry in index.weights {
            let record: MILBlobFile.BlobMetadata
            do {
                record = try weights.metadata(at: entry.blobOffset)
            } catch {
                throw .weightFile(error)
            }
            guard let dataType = record.dataType, dataType.name == entry.dataType,
                  record.sizeInBytes == entry.bytes, record.dataOffset == entry.dataOffset
            else {
                throw .inconsistentIndex(path: indexPath, detail: "weight \(entry.path) does not match the blob at offset "
                    + "\(entry.blobOffset) (\(record.sizeInBytes) bytes of type code \(record.dataTypeCode))")
            }
            guard record.dataOffset % UInt64(MILBlobFile.alignment) == 0 else {
                throw .inconsistentIndex(path: indexPath, detail: "weight \(entry.path): data at offset \(record.dataOffset) "
                    + "is not on a \(MILBlobFile.alignment)-byte boundary")
            }
            // The values must fit in the bytes stored (quantized weights pack
            // `quantizationBits` per value), and a shape must multiply to the count.
            let bits = UInt64(entry.quantizationBits ?? dataType.bitWidth)
            let (valueBits, overflow) = UInt64(entry.count).multipliedReportingOverflow(by: bits)
            guard !overflow, valueBits <= record.sizeInBytes * 8, entry.count >= 0 else {
                throw .inconsistentIndex(path: indexPath, detail: "weight \(entry.path): \(entry.count) values of "
                    + "\(bits) bits do not fit in \(record.sizeInBytes) bytes")
            }
            if let shape = entry.shape {
                var product = 1
                for dimension in shape {
                    let (next, overflows) = product.multipliedReportingOverflow(by: dimension)
                    guard !overflows, dimension >= 0 else { product = -1; break }
                    product = next
                }
                guard product == entry.count else {
                    throw .inconsistentIndex(path: indexPath, detail: "weight \(entry.path): shape \(shape) "
                        + "does not hold \(entry.count) values")
                }
            }
        }
    }

    private static func digest(of path: String) throws(BundleError) -> String {
        do {
            let file = try MappedFile(path: path)
            return withExtendedLifetime(file) { SHA256Digest.of(file.bytes).description }
        } catch {
            throw .unreadable(path: path, reason: error.description)
        }
    }
}
