import Foundation
import SystemIO

/// Compiles source models into a cache of bundles on demand, as
/// `MLModel.compileModel(at:)` does on Apple systems.
public enum ModelCompilation {
    /// The bundle compiled from `source` (an `.mlmodel` or `.mlpackage`),
    /// kept at `cacheDirectory/compiled/<digest of the source's absolute
    /// path>/<name>.mlmodelc`. A bundle already there is reused while it is up
    /// to date with the source; otherwise it is (re)compiled atomically.
    ///
    /// - Throws: `CompileError`: the source cannot be read or fails
    ///   validation, or the bundle cannot be written.
    public static func compiledBundle(for source: String, cacheDirectory: String) throws(CompileError) -> String {
        let absolute = URL(fileURLWithPath: source).standardizedFileURL.path
        let key = SHA256Digest.of(Array(absolute.utf8)).description.prefix(32)
        let name = URL(fileURLWithPath: absolute).deletingPathExtension().lastPathComponent
        let directory = "\(cacheDirectory)/compiled/\(key)"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .write(SystemCallError(call: "mkdir", path: directory, code: errno == 0 ? EACCES : errno))
        }
        let bundle = "\(directory)/\(name).mlmodelc"
        do {
            // The source as the caller named it, so errors name it the same way.
            _ = try BundleCompiler(options: CompileOptions()).compile(source, to: bundle)
        } catch {
            // Leave no empty cache entry behind for a source that could not be compiled.
            if (try? FileManager.default.contentsOfDirectory(atPath: directory))?.isEmpty == true {
                try? FileManager.default.removeItem(atPath: directory)
            }
            throw error
        }
        return bundle
    }
}
