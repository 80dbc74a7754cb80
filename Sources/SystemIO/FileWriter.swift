import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// Writes a new file in large buffered chunks, hashing what it writes
/// (unless told not to: a caller may hash the same bytes elsewhere).
///
/// The file must not exist (`O_EXCL`): writers create files only inside
/// private temporary directories, which are renamed into place whole. Not
/// thread-safe; one writer per file.
public final class FileWriter {
    public let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let bufferCapacity: Int
    private var hasher = SHA256Hasher()
    private let hashing: Bool
    private var isClosed = false
    /// Bytes written so far (including those still buffered).
    public private(set) var offset: UInt64 = 0
    /// Bytes handed to the kernel, and how many of them it was asked to
    /// start writing back to the disk: large files are written back in
    /// batches as they are written, so `finish`'s fsync has little left.
    private var written: UInt64 = 0
    private var writebackStarted: UInt64 = 0
    static let writebackBatch: UInt64 = 16 << 20

    /// Creates the file at `path` with mode 0644.
    public init(path: String, bufferCapacity: Int = 1 << 20, hashing: Bool = true) throws(SystemCallError) {
        self.path = path
        self.bufferCapacity = bufferCapacity
        self.hashing = hashing
        fd = Syscalls.current.open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        buffer.reserveCapacity(bufferCapacity)
    }

    deinit {
        if !isClosed { _ = Syscalls.current.close(fd) }
    }

    /// Appends `bytes`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        guard !bytes.isEmpty else { return }
        if hashing { hasher.update(bytes) }
        offset += UInt64(bytes.count)
        if buffer.count + bytes.count <= bufferCapacity {
            buffer.append(contentsOf: bytes)
            return
        }
        try flush()
        if bytes.count >= bufferCapacity {
            try writeFully(bytes)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    public func write(_ bytes: [UInt8]) throws(SystemCallError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(SystemCallError) in try write(raw) } }
        try result.get()
    }

    public func write(_ text: String) throws(SystemCallError) {
        try write(Array(text.utf8))
    }

    /// Appends `count` zero bytes.
    public func writeZeros(_ count: Int) throws(SystemCallError) {
        guard count > 0 else { return }
        try write([UInt8](repeating: 0, count: count))
    }

    /// Writes out the buffer, flushes the file to stable storage, and closes
    /// it; returns the SHA-256 of everything written (`nil` when not hashing).
    @discardableResult
    public func finish() throws(SystemCallError) -> SHA256Digest? {
        try flush()
        let calls = Syscalls.current
        guard calls.fsync(fd) == 0 else { throw SystemCallError(call: "fsync", path: path, code: errno) }
        isClosed = true
        guard calls.close(fd) == 0 else { throw SystemCallError(call: "close", path: path, code: errno) }
        guard hashing else { return nil }
        var finished = SHA256Hasher()
        swap(&finished, &hasher)
        return finished.finalize()
    }

    private func flush() throws(SystemCallError) {
        guard !buffer.isEmpty else { return }
        let pending = buffer
        buffer.removeAll(keepingCapacity: true)
        let result = pending.withUnsafeBytes { raw in Result { () throws(SystemCallError) in try writeFully(raw) } }
        try result.get()
    }

    private func writeFully(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        try Syscalls.current.writeAll(bytes, to: fd, path: path)
        written += UInt64(bytes.count)
        if written - writebackStarted >= Self.writebackBatch {
            // Advice only: a file system without it still gets the fsync.
            _ = modelc_start_writeback(fd, Int64(writebackStarted), Int64(written - writebackStarted))
            writebackStarted = written
        }
    }
}
