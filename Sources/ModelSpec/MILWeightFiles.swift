/// The weight files of one ML program, each opened (mapped) once, at the first
/// reference into it: turns a `@model_path/…` reference and an offset into the
/// blob's bytes.
///
/// The bytes stay valid as long as this object lives (or the `MILBlobFile`
/// `blob(reference:offset:)` returns with them). Not for sharing between
/// threads: one reader of a program holds one.
public final class MILWeightFiles {
    /// The directory `@model_path` names (a bundle, or a package's model folder); `nil` when there is none.
    public let modelDirectory: String?
    private var open: [String: MILBlobFile] = [:]

    public init(modelDirectory: String?) {
        self.modelDirectory = modelDirectory
    }

    /// The bytes of the blob at `offset` of the weight file `reference` names.
    ///
    /// - Throws: `MILWeightReferenceError` when there is no model directory,
    ///   the reference leaves the model, or the file or blob is unreadable.
    public func bytes(reference: String, offset: UInt64) throws(MILWeightReferenceError) -> UnsafeRawBufferPointer {
        try blob(reference: reference, offset: offset).data
    }

    /// The blob at `offset` of the weight file `reference` names, with the
    /// file it lies in: its bytes stay valid while that file value lives, so
    /// a reader may keep them past this object.
    ///
    /// - Throws: `MILWeightReferenceError`, as `bytes(reference:offset:)`.
    public func blob(reference: String, offset: UInt64) throws(MILWeightReferenceError) -> (file: MILBlobFile, data: UnsafeRawBufferPointer) {
        guard let modelDirectory else { throw .noModelDirectory }
        let prefix = "@model_path/"
        guard reference.hasPrefix(prefix), !reference.contains("..") else { throw .outsideModel(reference) }
        let path = modelDirectory + "/" + reference.dropFirst(prefix.count)
        do throws(BlobFileError) {
            let file: MILBlobFile
            if let opened = open[path] {
                file = opened
            } else {
                file = try MILBlobFile(path: path)
                open[path] = file
            }
            return (file, try file.data(at: offset))
        } catch {
            throw .unreadable(error)
        }
    }
}

/// Why a weight file reference of an ML program cannot be read.
public enum MILWeightReferenceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The program was read without the directory its references are relative to.
    case noModelDirectory
    /// The reference does not start with `@model_path/` or climbs out of the model.
    case outsideModel(String)
    /// The weight file or the blob at the offset is missing, short or corrupt.
    case unreadable(BlobFileError)

    public var description: String {
        switch self {
        case .noModelDirectory: "a weight file reference without a model directory"
        case .outsideModel(let reference): "weight file \"\(reference)\" is not inside the model"
        case .unreadable(let error): error.description
        }
    }
}
