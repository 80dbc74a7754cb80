import Foundation
import SystemIO

/// Compiles source models into a cache of bundles on demand, as
/// `MLModel.compileModel(at:)` does on Apple systems.
public enum ModelCompilation {
    /// The bundle compiled from `source` (an `.mlmodel` or `.mlpackage`),
    /// kept at `cacheDirectory/compiled/<digest of the source's absolute
    /// path>/<name>.mlmodelc`. A bundle already there is reused while it is up
    /// to date with the source; otherwise it is (re)compiled atomically.
    /// Beside the bundle, `source-files.json` keeps each source file's
    /// identity (device, inode, size, times of modification and change) and
    /// SHA-256, so that an unchanged source is not read whole again at every
    /// load (a 7B decoder's 3.6 GB).
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
        let stamp = "\(directory)/source-files.json"
        do {
            // The source as the caller named it, so errors name it the same way.
            var compiler = BundleCompiler(options: CompileOptions())
            compiler.knownSourceFiles = SourceStamp.read(stamp)
            let report = try compiler.compile(source, to: bundle)
            if report.sourceFiles != compiler.knownSourceFiles { SourceStamp.write(report.sourceFiles, to: stamp) }
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

/// The source files a cached bundle was compiled from, as last hashed: a
/// JSON file beside the bundle. Only a shortcut: one that cannot be read is
/// no stamp, one that cannot be written is left out.
enum SourceStamp {
    private struct Entry: Codable {
        var path: String
        var device, inode, size: UInt64
        var modified, modifiedNanoseconds, changed, changedNanoseconds: Int
        var sha256: String
    }

    static func read(_ path: String) -> [SourceDigest.FileDigest] {
        guard let data = FileManager.default.contents(atPath: path), let entries = try? JSONDecoder().decode([Entry].self, from: data) else { return [] }
        return entries.compactMap { entry in
            guard let digest = SHA256Digest(hex: entry.sha256) else { return nil }
            let identity = FileIdentity(device: entry.device, inode: entry.inode, size: entry.size,
                                        modified: timespec(tv_sec: entry.modified, tv_nsec: entry.modifiedNanoseconds),
                                        changed: timespec(tv_sec: entry.changed, tv_nsec: entry.changedNanoseconds))
            return SourceDigest.FileDigest(path: entry.path, identity: identity, size: entry.size, digest: digest)
        }
    }

    /// Writes `files` to `path` through a temporary file renamed over it.
    static func write(_ files: [SourceDigest.FileDigest], to path: String) {
        let entries = files.map { file in
            Entry(path: file.path, device: file.identity.device, inode: file.identity.inode, size: file.size,
                  modified: file.identity.modified.tv_sec, modifiedNanoseconds: file.identity.modified.tv_nsec,
                  changed: file.identity.changed.tv_sec, changedNanoseconds: file.identity.changed.tv_nsec, sha256: file.digest.description)
        }
        guard let data = try? JSONEncoder().encode(entries) else { return }
        let temporary = path + ".\(getpid()).tmp"
        if !FileManager.default.createFile(atPath: temporary, contents: data) || rename(temporary, path) != 0 {
            try? FileManager.default.removeItem(atPath: temporary)
        }
    }
}
