import Foundation

/// Reads what is needed to decide about an existing bundle directory.
public enum BundleReader {
    /// What is at a bundle's path.
    public enum Existing: Equatable, Sendable {
        /// Nothing, or an empty directory.
        case nothing
        /// A bundle with a readable manifest.
        case bundle(BundleManifest)
        /// A file, or a directory with content but no readable manifest.
        case notABundle
    }

    /// What is at `path`.
    public static func existingManifest(at path: String) -> Existing {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .nothing }
        guard isDirectory.boolValue else { return .notABundle }
        let manifestPath = path + "/" + BundleLayout.manifest
        guard let data = FileManager.default.contents(atPath: manifestPath) else {
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? ["?"]
            return contents.isEmpty ? .nothing : .notABundle
        }
        guard let manifest = data.withUnsafeBytes(BundleManifest.read) else { return .notABundle }
        return .bundle(manifest)
    }

    /// Whether every file the manifest lists is in `directory` with its recorded size.
    public static func filesPresent(_ manifest: BundleManifest, in directory: String) -> Bool {
        manifest.files.allSatisfy { file in
            let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + file.path)
            return (attributes?[.size] as? UInt64) == file.size
        }
    }
}
