import CSystemShims
#if canImport(Glibc)
import Glibc
#endif

/// The system calls modelc makes that can fail in interesting ways, gathered in
/// one table so tests can make any of them fail.
///
/// Production code calls `Syscalls.current`; a test installs a modified table
/// with `Syscalls.withOverride(_:_:)` and sees its failure surface as a typed
/// error. The override is task-local, so parallel tests do not see each
/// other's. Each entry mirrors the C call: it returns -1 (or `nil` for `mmap`) and
/// leaves the cause in `errno`.
public struct Syscalls: Sendable {
    public var open: @Sendable (_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32
    public var close: @Sendable (_ fd: Int32) -> Int32
    public var fstat: @Sendable (_ fd: Int32, _ buffer: UnsafeMutablePointer<stat>) -> Int32
    public var stat: @Sendable (_ path: String, _ buffer: UnsafeMutablePointer<stat>) -> Int32
    public var read: @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int
    public var mmap: @Sendable (_ length: Int, _ fd: Int32) -> UnsafeMutableRawPointer?
    public var munmap: @Sendable (_ address: UnsafeMutableRawPointer, _ length: Int) -> Int32
    public var madvise: @Sendable (_ address: UnsafeMutableRawPointer, _ length: Int, _ advice: Int32) -> Int32
    public var write: @Sendable (_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int
    public var fsync: @Sendable (_ fd: Int32) -> Int32
    public var mkdir: @Sendable (_ path: String, _ mode: mode_t) -> Int32
    public var rename: @Sendable (_ from: String, _ to: String) -> Int32
    /// Atomically swaps two existing paths (`renameat2` with `RENAME_EXCHANGE`).
    public var exchange: @Sendable (_ from: String, _ to: String) -> Int32
    /// The `f_type` magic number of `fstatfs` (`0x9fa0` for procfs), or -1.
    public var fileSystemType: @Sendable (_ fd: Int32) -> Int
    public var poll: @Sendable (_ fds: UnsafeMutablePointer<pollfd>, _ count: Int, _ timeout: Int32) -> Int32
    /// A pipe whose two ends (`fds[0]` read, `fds[1]` write) are non-blocking
    /// and close-on-exec (`pipe2`).
    public var pipe: @Sendable (_ fds: UnsafeMutablePointer<Int32>) -> Int32
    /// A non-blocking, close-on-exec `AF_UNIX` stream socket connected to the
    /// socket file at `path` (`socket` + `connect`); returns the socket.
    public var connectUnix: @Sendable (_ path: String) -> Int32
    /// `send` with `MSG_NOSIGNAL`: a closed peer is `EPIPE`, never `SIGPIPE`.
    public var send: @Sendable (_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int

    /// The real calls.
    public static let system = Syscalls(
        open: { path, flags, mode in Glibc.open(path, flags | O_CLOEXEC, mode) },
        close: { fd in Glibc.close(fd) },
        fstat: { fd, buffer in Glibc.fstat(fd, buffer) },
        stat: { path, buffer in Glibc.fstatat(AT_FDCWD, path, buffer, 0) },
        read: { fd, buffer, count in Glibc.read(fd, buffer, count) },
        mmap: { length, fd in
            let address = Glibc.mmap(nil, length, PROT_READ, MAP_PRIVATE, fd, 0)
            return address == MAP_FAILED ? nil : address
        },
        munmap: { address, length in Glibc.munmap(address, length) },
        madvise: { address, length, advice in Glibc.madvise(address, length, advice) },
        write: { fd, buffer, count in Glibc.write(fd, buffer, count) },
        fsync: { fd in Glibc.fsync(fd) },
        mkdir: { path, mode in Glibc.mkdir(path, mode) },
        rename: { from, to in Glibc.rename(from, to) },
        exchange: { from, to in modelc_rename_exchange(from, to) },
        fileSystemType: { fd in modelc_file_system_type(fd) },
        poll: { fds, count, timeout in Glibc.poll(fds, nfds_t(count), timeout) },
        pipe: { fds in modelc_pipe_nonblocking(fds) },
        connectUnix: { path in modelc_connect_unix(path) },
        send: { fd, buffer, count in Glibc.send(fd, buffer, count, Int32(MSG_NOSIGNAL)) }
    )

    /// The table in force for the current task: `system` unless a test
    /// installed another with `withOverride(_:_:)`.
    @TaskLocal public static var current: Syscalls = .system

    /// Runs `body` with `table` in force for this task and the tasks it
    /// creates; other tasks, such as tests running in parallel, still see
    /// theirs.
    @discardableResult
    public static func withOverride<T>(_ table: Syscalls, _ body: () throws -> T) rethrows -> T {
        try $current.withValue(table, operation: body)
    }
}

extension Syscalls {
    /// Writes all of `bytes` to `fd`, going on after short writes and
    /// interruptions; `path` names the file in the error.
    public func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, path: String) throws(SystemCallError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let written = write(fd, base + done, bytes.count - done)
            if written < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "write", path: path, code: errno)
            }
            if written == 0 { throw SystemCallError(call: "write", path: path, code: EIO) }
            done += written
        }
    }

    /// Flushes the entries of `directory` to stable storage, so that files
    /// just created or renamed in it survive a crash.
    public func syncDirectory(_ directory: String) throws(SystemCallError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: directory, code: errno) }
        defer { _ = close(fd) }
        guard fsync(fd) == 0 else { throw SystemCallError(call: "fsync", path: directory, code: errno) }
    }
}

/// A failed system call: which call, on what, and the `errno` text.
public struct SystemCallError: Error, Equatable, Sendable, CustomStringConvertible {
    public let call: String
    public let path: String
    public let code: Int32

    public init(call: String, path: String, code: Int32) {
        self.call = call
        self.path = path
        self.code = code
    }

    /// The C library's text for `code` ("No such file or directory").
    public var reason: String { String(cString: strerror(code)) }

    public var description: String { "\(path): \(call) failed: \(reason)" }
}
