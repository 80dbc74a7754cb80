import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes whole files so that readers see the old file or the new one, never
/// a part: the bytes go to a private file in the same directory, are flushed
/// to disk, and the file is renamed over the destination.
public enum AtomicFile {
    public static func write(_ bytes: [UInt8], to destination: String) throws(SystemCallError) {
        let url = URL(fileURLWithPath: destination).standardizedFileURL
        let directory = url.deletingLastPathComponent().path
        let temporary = directory + "/.\(url.lastPathComponent).staging-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        do throws(SystemCallError) {
            let file = try FileWriter(path: temporary)
            try file.write(bytes)
            try file.finish()
            guard Syscalls.current.rename(temporary, url.path) == 0 else {
                throw SystemCallError(call: "rename", path: destination, code: errno)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        let calls = Syscalls.current
        let fd = calls.open(directory, O_RDONLY | O_DIRECTORY, 0)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: directory, code: errno) }
        defer { _ = calls.close(fd) }
        guard calls.fsync(fd) == 0 else { throw SystemCallError(call: "fsync", path: directory, code: errno) }
    }
}
