import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Computes the SHA-256 of a file on a thread of its own while another
/// thread writes it: the writer reports how far the file is written, and the
/// hasher reads up to there (from the page cache, just written) and hashes.
/// This takes hashing off the downloading thread, so a download runs at the
/// speed of the network rather than of the network plus SHA-256; it also
/// hashes what is on disk, not merely what was received.
final class TrailingHasher: @unchecked Sendable {
    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    private var written: UInt64
    private var hashed: UInt64 = 0
    private var closing = false
    private var abandoned = false
    private var exited = false
    private var outcome: Result<SHA256Digest, SystemCallError>?

    /// Starts hashing `path`, of which the first `written` bytes are already
    /// there. The thread uses the caller's `Syscalls` table.
    init(path: String, written: UInt64) {
        self.written = written
        let calls = Syscalls.current
        let thread = Thread { [self] in Syscalls.$current.withValue(calls) { run(path: path) } }
        thread.name = "modelc.sha256"
        thread.start()
    }

    /// The writer has written the file up to `size` bytes.
    func advance(to size: UInt64) {
        condition.lock()
        written = size
        condition.signal()
        condition.unlock()
    }

    /// The writer is done: waits until everything written is hashed.
    func finish() throws(SystemCallError) -> SHA256Digest {
        condition.lock()
        closing = true
        condition.broadcast()
        while true {
            if let result = outcome {
                condition.unlock()
                return try result.get()
            }
            condition.wait()
        }
    }

    /// Stops the thread without a result (the file is being restarted or given up).
    func abandon() {
        condition.lock()
        abandoned = true
        condition.broadcast()
        while !exited { condition.wait() }
        condition.unlock()
    }

    private func run(path: String) {
        let result = hash(path: path)
        condition.lock()
        if outcome == nil, let result { outcome = result }
        exited = true
        condition.broadcast()
        condition.unlock()
    }

    /// The digest or a read failure, or `nil` when abandoned.
    private func hash(path: String) -> Result<SHA256Digest, SystemCallError>? {
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return .failure(SystemCallError(call: "open", path: path, code: errno)) }
        defer { _ = calls.close(fd) }
        var hasher = SHA256Hasher()
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            condition.lock()
            while hashed == written, !closing, !abandoned { condition.wait() }
            if abandoned {
                condition.unlock()
                return nil
            }
            if hashed == written {
                condition.unlock()
                return .success(hasher.finalize())
            }
            let offset = hashed
            let end = written
            condition.unlock()

            let wanted = Int(min(UInt64(chunk), end - offset))
            // pread is not in the Syscalls table; the file was opened through it.
            let count = pread(fd, buffer.baseAddress, wanted, off_t(offset))
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(SystemCallError(call: "pread", path: path, code: errno))
            }
            if count == 0 { return .failure(SystemCallError(call: "pread", path: path, code: EIO)) }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            condition.lock()
            hashed = offset + UInt64(count)
            condition.unlock()
        }
    }
}
