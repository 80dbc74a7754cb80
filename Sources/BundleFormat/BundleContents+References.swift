import Foundation
import ModelSpec

extension BundleContents {
    /// Checks that every weight file reference of `model.spec` and `model.mil`
    /// names this bundle's weight file and a blob record in it whose data type
    /// and size hold the values of the reference's tensor type, and that both
    /// files make the same references.
    ///
    /// - Throws: `BundleError.unresolvedReference` naming the file, the
    ///   reference and what is wrong with it.
    public func checkReferences() throws(BundleError) {
        let specificationPath = path + "/" + BundleLayout.specification
        var offsets: [UInt64: Int] = [:]
        let locations = withExtendedLifetime(specification) { WeightLocator(root: specification.root).locations }
        for location in locations {
            guard let (file, offset) = location.blobReference else { continue }
            let name = "\(location.displayName) (\(location.path))"
            try check(file: file, offset: offset, in: specificationPath, name: name) { record throws(BundleError) in
                guard let tensor = location.tensorType,
                      let mismatch = BlobTensorMismatch.check(record, offset: offset, tensor: tensor)
                else { return }
                throw .unresolvedReference(path: specificationPath, reference: name, detail: mismatch.description)
            }
            offsets[offset, default: 0] += 1
        }
        let specificationCounts = offsets
        guard manifest.files.contains(where: { $0.path == BundleLayout.programText }) else { return }
        let textPath = path + "/" + BundleLayout.programText
        guard let data = FileManager.default.contents(atPath: textPath) else {
            throw .unreadable(path: textPath, reason: "cannot read the file")
        }
        let references: [ProgramTextReference]
        switch ProgramTextReferences.scan(Array(data)) {
        case .success(let found): references = found
        case .failure(let malformed):
            throw .unresolvedReference(path: textPath, reference: "line \(malformed.line)", detail: "malformed BLOBFILE reference")
        }
        for reference in references {
            let name = "line \(reference.line) \(reference.type)"
            try check(file: reference.file, offset: reference.offset, in: textPath, name: name) { record throws(BundleError) in
                guard let expected = reference.dataType else {
                    throw .unresolvedReference(path: textPath, reference: name, detail: "a weight file cannot store this type")
                }
                guard record.dataType == expected else {
                    throw .unresolvedReference(path: textPath, reference: name, detail: "its blob at offset \(reference.offset) "
                        + "holds \(record.dataType?.name ?? "code \(record.dataTypeCode)") data")
                }
                if let count = reference.count, let (bytes, _) = expected.packedSize(count: count), bytes != record.sizeInBytes {
                    throw .unresolvedReference(path: textPath, reference: name, detail: "its blob at offset \(reference.offset) "
                        + "holds \(record.sizeInBytes) bytes, expected \(bytes) = \(count) values × \(expected.bitWidth) bits")
                }
            }
            guard let remaining = offsets[reference.offset], remaining > 0 else {
                let times = specificationCounts[reference.offset].map { "only \($0 == 1 ? "once" : "\($0) times")" } ?? "never"
                throw .unresolvedReference(path: textPath, reference: name,
                                           detail: "\(BundleLayout.specification) refers to offset \(reference.offset) \(times)")
            }
            offsets[reference.offset] = remaining - 1
        }
        if let (offset, _) = offsets.filter({ $0.value > 0 }).min(by: { $0.key < $1.key }) {
            throw .unresolvedReference(path: textPath, reference: "offset \(offset)",
                                       detail: "\(BundleLayout.specification) refers to it, this file does not")
        }
    }

    /// Resolves one reference: the bundle's weight file, a valid record at
    /// `offset`; then `fits` checks the record against the reference's type.
    private func check(
        file: String, offset: UInt64, in referrer: String, name: String,
        fits: (MILBlobFile.BlobMetadata) throws(BundleError) -> Void
    ) throws(BundleError) {
        guard file == BundleLayout.programWeightReference else {
            throw .unresolvedReference(path: referrer, reference: name,
                                       detail: "names \(file), not \(BundleLayout.programWeightReference)")
        }
        let record: MILBlobFile.BlobMetadata
        do {
            record = try weights.metadata(at: offset)
        } catch {
            throw .unresolvedReference(path: referrer, reference: name, detail: "\(file) at offset \(offset): \(error.detail)")
        }
        try fits(record)
    }
}
