import Foundation
import ModelSpec
import SystemIO

/// The SHA-256 that identifies a compile's source.
///
/// An `.mlmodel` is its file's digest. An `.mlpackage` is the digest of a
/// listing of its regular files, sorted by relative path: for each file one
/// line `PATH NUL SIZE NUL SHA256-HEX LF` (see docs/bundle-format.md).
enum SourceDigest {
    static func of(_ model: ModelFile) throws(CompileError) -> SHA256Digest {
        switch model.format {
        case .mlmodel:
            return try digest(ofFile: model.path).digest
        case .mlpackage:
            let root = URL(fileURLWithPath: model.path).standardizedFileURL
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
            for (relative, full) in files.sorted(by: { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }) {
                let (size, fileDigest) = try digest(ofFile: full)
                listing += "\(relative)\u{0}\(size)\u{0}\(fileDigest)\n"
            }
            return SHA256Digest.of(Array(listing.utf8))
        }
    }

    private static func digest(ofFile path: String) throws(CompileError) -> (size: Int, digest: SHA256Digest) {
        do {
            let file = try MappedFile(path: path)
            return withExtendedLifetime(file) { (file.bytes.count, SHA256Digest.of(file.bytes)) }
        } catch {
            switch error {
            case .system(let failure): throw .source(.cannotRead(path: path, reason: failure.reason))
            case .notRegularFile: throw .source(.cannotRead(path: path, reason: "not a regular file"))
            }
        }
    }
}
