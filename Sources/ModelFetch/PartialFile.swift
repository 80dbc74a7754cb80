import CSystemShims
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The `.partial` file a download appends to, hashed as it grows by a
/// `TrailingHasher` on another thread. Not thread-safe; one per attempt.
final class PartialFile {
    let path: String
    private var fd: Int32
    private var hasher: TrailingHasher?
    /// Bytes in the file.
    private(set) var size: UInt64 = 0
    /// Bytes whose writing back to the disk was started.
    private var writebackStarted: UInt64 = 0
    /// How many written bytes wait before their writeback is started, so
    /// that `finish`'s fsync finds little left to write.
    static let writebackBatch: UInt64 = 16 << 20

    /// Opens `path` for appending after its first `keeping` bytes (which are
    /// hashed meanwhile); `keeping` 0 starts an empty file.
    init(path: String, keeping: UInt64) throws(SystemCallError) {
        self.path = path
        let calls = Syscalls.current
        fd = keeping > 0 ? calls.open(path, O_WRONLY | O_APPEND | O_CLOEXEC, 0) : calls.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        size = keeping
        writebackStarted = keeping
        hasher = TrailingHasher(path: path, written: keeping)
    }

    deinit {
        hasher?.abandon()
        if fd >= 0 { _ = Syscalls.current.close(fd) }
    }

    /// Empties the file and the hash, for a server that sent the whole file.
    func restart() throws(SystemCallError) {
        hasher?.abandon()
        hasher = nil
        let calls = Syscalls.current
        if fd >= 0 { _ = calls.close(fd) }
        fd = calls.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        size = 0
        writebackStarted = 0
        hasher = TrailingHasher(path: path, written: 0)
    }

    /// Appends `bytes`; the hasher follows.
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        guard !bytes.isEmpty else { return }
        try Syscalls.current.writeAll(bytes, to: fd, path: path)
        size += UInt64(bytes.count)
        hasher?.advance(to: size)
        if size - writebackStarted >= Self.writebackBatch {
            // Advice only: a file system without it still gets the fsync.
            _ = modelc_start_writeback(fd, Int64(writebackStarted), Int64(size - writebackStarted))
            writebackStarted = size
        }
    }

    /// Flushes the file to stable storage, closes it and returns its digest.
    func finish() throws(SystemCallError) -> SHA256Digest {
        let calls = Syscalls.current
        guard calls.fsync(fd) == 0 else { throw SystemCallError(call: "fsync", path: path, code: errno) }
        let closing = fd
        fd = -1
        guard calls.close(closing) == 0 else { throw SystemCallError(call: "close", path: path, code: errno) }
        guard let hasher else { throw SystemCallError(call: "sha256", path: path, code: EIO) }
        self.hasher = nil
        return try hasher.finish()
    }
}
