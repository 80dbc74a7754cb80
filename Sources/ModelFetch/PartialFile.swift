import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The `.partial` file a download appends to, with the running SHA-256 of
/// everything in it. Not thread-safe; one per attempt.
final class PartialFile {
    let path: String
    private var fd: Int32
    private var hasher = SHA256Hasher()
    /// Bytes in the file.
    private(set) var size: UInt64 = 0

    /// Opens `path` for appending after its first `keeping` bytes, hashing
    /// those first; `keeping` 0 starts an empty file.
    init(path: String, keeping: UInt64) throws(SystemCallError) {
        self.path = path
        fd = -1
        if keeping > 0 {
            try hashExisting(count: keeping)
            fd = Syscalls.current.open(path, O_WRONLY | O_APPEND, 0)
        } else {
            fd = Syscalls.current.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
    }

    deinit {
        if fd >= 0 { _ = Syscalls.current.close(fd) }
    }

    /// Empties the file and the hash, for a server that sent the whole file.
    func restart() throws(SystemCallError) {
        let calls = Syscalls.current
        if fd >= 0 { _ = calls.close(fd) }
        fd = calls.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        hasher = SHA256Hasher()
        size = 0
    }

    /// Appends `bytes` and adds them to the hash.
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        guard !bytes.isEmpty else { return }
        try Syscalls.current.writeAll(bytes, to: fd, path: path)
        hasher.update(bytes)
        size += UInt64(bytes.count)
    }

    /// Flushes the file to stable storage, closes it and returns its digest.
    func finish() throws(SystemCallError) -> SHA256Digest {
        let calls = Syscalls.current
        guard calls.fsync(fd) == 0 else { throw SystemCallError(call: "fsync", path: path, code: errno) }
        let closing = fd
        fd = -1
        guard calls.close(closing) == 0 else { throw SystemCallError(call: "close", path: path, code: errno) }
        var finished = SHA256Hasher()
        swap(&finished, &hasher)
        return finished.finalize()
    }

    private func hashExisting(count: UInt64) throws(SystemCallError) {
        let calls = Syscalls.current
        let reader = calls.open(path, O_RDONLY, 0)
        guard reader >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        defer { _ = calls.close(reader) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var remaining = count
        while remaining > 0 {
            let wanted = Int(min(UInt64(buffer.count), remaining))
            let got = buffer.withUnsafeMutableBytes { raw in raw.baseAddress.map { calls.read(reader, $0, wanted) } ?? 0 }
            if got < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "read", path: path, code: errno)
            }
            if got == 0 { throw SystemCallError(call: "read", path: path, code: EIO) }
            buffer.withUnsafeBytes { raw in hasher.update(UnsafeRawBufferPointer(rebasing: raw[..<got])) }
            remaining -= UInt64(got)
        }
        size = count
    }
}
