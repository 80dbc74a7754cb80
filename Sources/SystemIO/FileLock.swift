#if canImport(Glibc)
import Glibc
#endif

/// An advisory lock on a file (`flock`), shared between processes.
///
/// The kernel releases it when the holder closes the file or dies, so a
/// killed process never leaves a lock behind. Released on `deinit`.
public final class FileLock {
    /// Shared locks coexist; an exclusive lock excludes every other lock.
    public enum Mode: Sendable {
        case shared
        case exclusive

        fileprivate var operation: Int32 { self == .shared ? LOCK_SH : LOCK_EX }
    }

    public let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit {
        _ = Syscalls.current.close(fd)
    }

    /// Takes the lock on `path` (created if missing) without waiting;
    /// `nil` when another holder's lock conflicts.
    public static func attempt(_ path: String, mode: Mode) throws(SystemCallError) -> FileLock? {
        let fd = try openLockFile(path)
        if flock(fd, mode.operation | LOCK_NB) == 0 { return FileLock(path: path, fd: fd) }
        let code = errno
        _ = Syscalls.current.close(fd)
        if code == EWOULDBLOCK { return nil }
        throw SystemCallError(call: "flock", path: path, code: code)
    }

    /// Takes the lock on `path` (created if missing), waiting as long as it takes.
    public static func acquire(_ path: String, mode: Mode) throws(SystemCallError) -> FileLock {
        let fd = try openLockFile(path)
        while flock(fd, mode.operation) != 0 {
            let code = errno
            if code == EINTR { continue }
            _ = Syscalls.current.close(fd)
            throw SystemCallError(call: "flock", path: path, code: code)
        }
        return FileLock(path: path, fd: fd)
    }

    private static func openLockFile(_ path: String) throws(SystemCallError) -> Int32 {
        let fd = Syscalls.current.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        return fd
    }
}
