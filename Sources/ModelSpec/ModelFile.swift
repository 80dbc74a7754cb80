import Foundation
import SystemIO

/// A Core ML model read from disk: an `.mlmodel` file or an `.mlpackage`
/// directory, unpacked and checked.
///
/// Reading is safe on hostile bytes: every failure is a `ModelSpecError`
/// naming the file, never a crash.
public struct ModelFile: Sendable {
    /// How the model was stored.
    public enum Format: String, Sendable, Codable {
        /// A single protobuf file.
        case mlmodel
        /// A directory with `Manifest.json`, the specification and weight files.
        case mlpackage
    }

    /// The path the model was opened at.
    public let path: String
    public let format: Format
    /// The file holding the serialized specification (the package's root
    /// model item, or `path` itself).
    public let specificationPath: String
    /// The directory that `@model_path` in an ML program's blob references
    /// names: the directory holding the specification file.
    public let modelDirectory: String
    /// The unpacked specification.
    public let specification: Specification

    /// Opens the model at `path`, choosing the format from what is there: a
    /// directory is read as an `.mlpackage`, a file as an `.mlmodel`.
    ///
    /// The `.mlmodel` bytes are memory-mapped while unpacking; the unpacked
    /// specification owns copies of everything it needs.
    ///
    /// - Throws: `ModelSpecError` naming the path at fault.
    public static func open(_ path: String) throws(ModelSpecError) -> ModelFile {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .cannotRead(path: path, reason: "No such file or directory")
        }
        if isDirectory.boolValue {
            return try openPackage(path)
        }
        let specification = try unpackFile(at: path)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return ModelFile(path: path, format: .mlmodel, specificationPath: path,
                         modelDirectory: directory, specification: specification)
    }

    private static func unpackFile(at path: String) throws(ModelSpecError) -> Specification {
        let file: MappedFile
        do {
            file = try MappedFile(path: path)
        } catch {
            switch error {
            case .system(let failure): throw .cannotRead(path: path, reason: failure.reason)
            case .notRegularFile: throw .cannotRead(path: path, reason: "not a regular file")
            }
        }
        return try withExtendedLifetime(file) { () throws(ModelSpecError) -> Specification in
            try Specification.unpack(file.bytes, path: path, release: file.releasePages(in:))
        }
    }

    private static func openPackage(_ path: String) throws(ModelSpecError) -> ModelFile {
        let packageURL = URL(fileURLWithPath: path)
        let manifestURL = packageURL.appendingPathComponent("Manifest.json")
        guard FileManager.default.fileExists(atPath: manifestURL.path) else {
            throw .notAPackage(path: path, reason: "it has no Manifest.json")
        }
        let manifestData: Data
        do {
            manifestData = try Data(contentsOf: manifestURL)
        } catch {
            throw .cannotRead(path: manifestURL.path, reason: "\(error.localizedDescription)")
        }
        let manifest: PackageManifest
        do {
            manifest = try JSONDecoder().decode(PackageManifest.self, from: manifestData)
        } catch {
            throw .notAPackage(path: path, reason: "Manifest.json is not a package manifest (\(describe(error)))")
        }
        guard let root = manifest.rootItem else {
            throw .notAPackage(path: path, reason:
                "Manifest.json names root model \"\(manifest.rootModelIdentifier)\", which is not among its items")
        }
        let paths = PackagePaths(packageURL: packageURL)
        let dataDirectory = paths.root.appendingPathComponent("Data")
        guard let specificationURL = paths.resolve(root.path, under: dataDirectory) else {
            throw .unsafePackagePath(path: path, entry: root.path)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: specificationURL.path, isDirectory: &isDirectory),
              !isDirectory.boolValue
        else {
            throw .notAPackage(path: path, reason: "the root model item Data/\(root.path) does not exist")
        }
        let specification = try unpackFile(at: specificationURL.path)
        return ModelFile(path: path, format: .mlpackage, specificationPath: specificationURL.path,
                         modelDirectory: specificationURL.deletingLastPathComponent().path,
                         specification: specification)
    }

    /// Resolves a file an ML program names (`@model_path/weights/weight.bin`),
    /// refusing paths that leave the model's directory.
    ///
    /// - Returns: the path, or `nil` when the reference is unsafe.
    public func resolveProgramFile(_ reference: String) -> String? {
        let prefix = "@model_path/"
        guard reference.hasPrefix(prefix) else { return nil }
        let relative = String(reference.dropFirst(prefix.count))
        let base = URL(fileURLWithPath: modelDirectory)
        let scope = format == .mlpackage ? URL(fileURLWithPath: path) : base
        return PackagePaths(packageURL: scope).resolve(relative, under: base.resolvingSymlinksInPath())?.path
    }
}

extension ModelFile {
    /// A model unpacked from bytes that came from no file on disk (fuzzing,
    /// tests); it has no weight files, so program blob references stay unread.
    package init(unpacked specification: Specification, path: String) {
        self.init(path: path, format: .mlmodel, specificationPath: path,
                  modelDirectory: "/nonexistent/modelc-in-memory", specification: specification)
    }
}

/// A decoding error in a few words for a one-line message.
private func describe(_ error: any Error) -> String {
    switch error {
    case DecodingError.keyNotFound(let key, _): "missing key \"\(key.stringValue)\""
    case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
        "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
    case DecodingError.dataCorrupted: "invalid JSON"
    default: "\(error)"
    }
}
