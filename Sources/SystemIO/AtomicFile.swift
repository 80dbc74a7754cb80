import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes whole files so that readers see the old file or the new one, never
/// a part: the bytes go to a private file in the same directory, are flushed
/// to disk, and the file is renamed over the destination.
public enum AtomicFile {
    /// Replaces `destination` with `bytes`.
    public static func write(_ bytes: [UInt8], to destination: String) throws(SystemCallError) {
        try replace(destination) { temporary throws(SystemCallError) in
            let file = try FileWriter(path: temporary)
            try file.write(bytes)
            _ = try file.finish()
        }
    }

    /// Replaces `destination` with the file `fill` creates at the path it is
    /// given (beside `destination`) and flushes; the file is removed when
    /// `fill` throws.
    public static func replace(_ destination: String, with fill: (String) throws(SystemCallError) -> Void) throws(SystemCallError) {
        let url = URL(fileURLWithPath: destination).standardizedFileURL
        let directory = url.deletingLastPathComponent().path
        let temporary = directory + "/.\(url.lastPathComponent).staging-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        do throws(SystemCallError) {
            try fill(temporary)
            guard Syscalls.current.rename(temporary, url.path) == 0 else {
                throw SystemCallError(call: "rename", path: destination, code: errno)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        try Syscalls.current.syncDirectory(directory)
    }
}
