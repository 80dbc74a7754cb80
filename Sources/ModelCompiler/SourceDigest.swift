import Dispatch
import Foundation
import Synchronization
import SystemIO

/// The SHA-256 that identifies a compile's source.
///
/// An `.mlmodel` is its file's digest. An `.mlpackage` is the digest of a
/// listing of its regular files, sorted by relative path: for each file one
/// line `PATH NUL SIZE NUL SHA256-HEX LF` (see docs/bundle-format.md).
enum SourceDigest {
    /// A file of the source as hashed: which file and in what state (so any
    /// path to it finds it, and a later change shows), its size and SHA-256.
    struct FileDigest: Equatable, Sendable {
        var path: String
        var identity: FileIdentity
        var size: UInt64
        var digest: SHA256Digest
    }

    /// Starts hashing the source at `path` on another thread, so it overlaps
    /// reading, validating and writing; `wait()` returns the digest.
    final class Pending: Sendable {
        private let result = Mutex<Result<(SHA256Digest, [FileDigest]), CompileError>?>(nil)
        private let done = DispatchSemaphore(value: 0)

        /// `known`: digests of files hashed before, taken as they are for a file whose identity (device, inode,
        /// size, times of modification and change) is still the same.
        init(path: String, known: [FileDigest] = []) {
            DispatchQueue.global(qos: .userInitiated).async { [self] in
                let digest = Result { () throws(CompileError) in try SourceDigest.withFiles(path, known: known) }
                result.withLock { $0 = digest }
                done.signal()
            }
        }

        /// The digest, once hashing has finished.
        func wait() throws(CompileError) -> SHA256Digest {
            try waitForFiles().0
        }

        /// The digest and the digest of each file hashed, once hashing has finished.
        func waitForFiles() throws(CompileError) -> (SHA256Digest, [FileDigest]) {
            waitUntilDone()
            guard let digest = result.withLock({ $0 }) else { preconditionFailure("digest finished without a result") }
            return try digest.get()
        }

        /// Returns when hashing has finished; may be called any number of times.
        func waitUntilDone() {
            done.wait()
            done.signal()
        }
    }

    /// The digest of the model at `path`: a file, or a package directory.
    static func of(_ path: String) throws(CompileError) -> SHA256Digest {
        try withFiles(path).0
    }

    /// The digest of the model at `path`, and of each file it hashed; a file
    /// of `known` whose identity has not changed since is not read again.
    static func withFiles(_ path: String, known: [FileDigest] = []) throws(CompileError) -> (SHA256Digest, [FileDigest]) {
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        let known = Dictionary(known.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        func digest(ofFile path: String) throws(CompileError) -> FileDigest {
            if let before = known[path], let identity = try? FileIdentity(path: path), identity == before.identity { return before }
            return try Self.digest(ofFile: path)
        }
        switch isDirectory.boolValue {
        case false:
            let file = try digest(ofFile: path)
            return (file.digest, [file])
        case true:
            let root = URL(fileURLWithPath: path).standardizedFileURL
            var files: [(String, String)] = []
            if let walker = FileManager.default.enumerator(atPath: root.path) {
                for case let relative as String in walker {
                    let full = root.appendingPathComponent(relative).path
                    guard let attributes = try? FileManager.default.attributesOfItem(atPath: full),
                          attributes[.type] as? FileAttributeType == .typeRegular
                    else { continue }
                    files.append((relative, full))
                }
            }
            var listing = ""
            var digests: [FileDigest] = []
            for (relative, full) in files.sorted(by: { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }) {
                let file = try digest(ofFile: full)
                listing += "\(relative)\u{0}\(file.size)\u{0}\(file.digest)\n"
                digests.append(file)
            }
            return (SHA256Digest.of(Array(listing.utf8)), digests)
        }
    }

    private static func digest(ofFile path: String) throws(CompileError) -> FileDigest {
        do {
            let (digest, size, identity) = try SHA256Digest.ofFileWithIdentity(at: path)
            return FileDigest(path: path, identity: identity, size: size, digest: digest)
        } catch {
            throw .source(.cannotRead(path: path, reason: error.reason))
        }
    }
}
