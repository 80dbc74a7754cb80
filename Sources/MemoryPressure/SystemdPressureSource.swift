import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Memory pressure as systemd's service manager offers it to a service
/// (`MemoryPressureWatch=` in the unit).
///
/// `$MEMORY_PRESSURE_WATCH` names the file to watch and
/// `$MEMORY_PRESSURE_WRITE` holds base64 bytes to write to it right after
/// opening it (for a PSI file, a trigger line and its NUL). The file may be:
/// - a PSI file (procfs or cgroup2): an event is `POLLPRI`; the stream ends
///   when the kernel drops the trigger;
/// - a FIFO: opened for reading and writing (so it never reports a hang-up);
///   an event is data arriving, which is read and dropped. Bytes this source
///   writes to it come back as one event unless another reader takes them;
/// - an `AF_UNIX` stream socket, connected to: an event is data arriving;
///   the stream ends when the peer closes the connection.
///
/// systemd has a single degree of pressure, so every event is `.warning`.
/// One thread of the source's own polls the file; `stop()` or deinit ends it.
public final class SystemdPressureSource: MemoryPressureSource {
    /// "systemd MEMORY_PRESSURE_WATCH=PATH (…)", saying what kind of file PATH is.
    public let name: String
    /// The file named by `$MEMORY_PRESSURE_WATCH`.
    public let path: String
    private let channel = LevelChannel()
    private let watcher: PressureWatcher

    static let watchVariable = "MEMORY_PRESSURE_WATCH"
    static let writeVariable = "MEMORY_PRESSURE_WRITE"

    /// Opens (or connects to) the file `environment` names, writes the
    /// trigger bytes to it and starts watching.
    ///
    /// Throws `.notConfigured` when `MEMORY_PRESSURE_WATCH` is unset or empty,
    /// `.turnedOff` when it is `/dev/null`, `.invalidEnvironment` when it is
    /// not an absolute path or `MEMORY_PRESSURE_WRITE` is not base64 (or is
    /// missing for a PSI file), and the errors of `PSIPressureSource` for the
    /// file itself.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws(MemoryPressureError) {
        guard let path = environment[Self.watchVariable], !path.isEmpty else { throw .notConfigured }
        guard path != "/dev/null" else { throw .turnedOff }
        guard path.hasPrefix("/") else {
            throw .invalidEnvironment(variable: Self.watchVariable, reason: "not an absolute path: \"\(path)\"")
        }
        var trigger: [UInt8] = []
        if let encoded = environment[Self.writeVariable] {
            guard let decoded = Data(base64Encoded: encoded) else {
                throw .invalidEnvironment(variable: Self.writeVariable, reason: "not base64: \"\(encoded)\"")
            }
            trigger = Array(decoded)
        }
        self.path = path
        let calls = Syscalls.current
        let (fd, kind, described) = try Self.open(path, trigger: trigger, calls: calls)
        name = "systemd \(Self.watchVariable)=\(path) (\(described))"
        do throws(SystemCallError) {
            watcher = try PressureWatcher(
                watches: [PressureWatch(fd: fd, kind: kind, level: .warning)], channel: channel, calls: calls)
        } catch {
            throw .unavailable(path: path, reason: error.description)
        }
    }

    public var levels: AsyncStream<MemoryPressureLevel> { channel.claim() }

    public func stop() {
        watcher.stop()
    }

    /// Opens or connects to `path` as the protocol says for its kind of file
    /// and writes `trigger`; returns the descriptor, how to poll it, and a
    /// few words for the name.
    private static func open(
        _ path: String, trigger: [UInt8], calls: Syscalls
    ) throws(MemoryPressureError) -> (Int32, PressureWatch.Kind, String) {
        var fd = calls.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0)
        var kind = PressureWatch.Kind.readable
        var described: String
        if fd < 0 && errno == ENXIO {
            // open(2) refuses sockets with ENXIO; the protocol connects to them.
            fd = calls.connectUnix(path)
            guard fd >= 0 else {
                let code = errno
                if code == EACCES || code == EPERM { throw .permissionDenied(path: path) }
                throw .unavailable(path: path, reason: "connect failed: \(String(cString: strerror(code)))")
            }
            described = "socket"
        } else {
            guard fd >= 0 else { throw PSIPressureSource.openError(path: path, code: errno) }
            var info = stat()
            guard calls.fstat(fd, &info) == 0 else {
                let code = errno
                _ = calls.close(fd)
                throw .unavailable(path: path, reason: "fstat failed: \(String(cString: strerror(code)))")
            }
            switch info.st_mode & S_IFMT {
            case S_IFIFO:
                described = "FIFO"
            case S_IFREG:
                if let problem = PSIPressureSource.notPSIFile(fd, calls: calls) {
                    _ = calls.close(fd)
                    throw .unavailable(path: path, reason: problem)
                }
                guard !trigger.isEmpty else {
                    _ = calls.close(fd)
                    throw .invalidEnvironment(
                        variable: writeVariable, reason: "unset or empty, but \(path) is a PSI file, which needs a trigger")
                }
                kind = .psiTrigger
                described = "PSI trigger \"\(String(decoding: trigger.prefix { $0 != 0 }, as: UTF8.self))\""
            default:
                _ = calls.close(fd)
                throw .unavailable(path: path, reason: "neither a PSI file, a FIFO nor a socket")
            }
        }
        guard !trigger.isEmpty else { return (fd, kind, described) }
        do throws(MemoryPressureError) {
            if kind == .psiTrigger {
                try PSIPressureSource.register(trigger, fd: fd, path: path, calls: calls)
            } else {
                try writeAll(trigger, fd: fd, path: path, socket: described == "socket", calls: calls)
                // We hold the FIFO open for reading too: take our own bytes
                // back (unless the other end already did), or they would
                // come back as a pressure event the moment watching starts.
                if described == "FIFO" { drain(fd, upTo: trigger.count, calls: calls) }
            }
        } catch {
            _ = calls.close(fd)
            throw error
        }
        return (fd, kind, described)
    }

    /// Reads and discards up to `count` bytes that are ready now (the FIFO is
    /// non-blocking, so this never waits).
    private static func drain(_ fd: Int32, upTo count: Int, calls: Syscalls) {
        var buffer = [UInt8](repeating: 0, count: count)
        var taken = 0
        while taken < count {
            let read = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return calls.read(fd, base, count - taken)
            }
            if read < 0, errno == EINTR { continue }
            guard read > 0 else { return }
            taken += read
        }
    }

    /// Writes `bytes` to a FIFO, or sends them on a socket (a closed peer is
    /// an error, not a `SIGPIPE`).
    private static func writeAll(
        _ bytes: [UInt8], fd: Int32, path: String, socket: Bool, calls: Syscalls
    ) throws(MemoryPressureError) {
        let written = bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return socket ? calls.send(fd, base, raw.count) : calls.write(fd, base, raw.count)
        }
        guard written != bytes.count else { return }
        let reason = written < 0 ? String(cString: strerror(errno)) : "short write"
        throw .unavailable(path: path, reason: "write failed: \(reason)")
    }
}
