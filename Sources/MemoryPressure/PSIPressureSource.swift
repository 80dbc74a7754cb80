import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Memory pressure from a kernel PSI trigger file: `/proc/pressure/memory`
/// (the whole system), a cgroup v2 `memory.pressure` (one cgroup), or another
/// file of procfs or cgroup2 with the same protocol.
///
/// Registers two triggers, each on a descriptor of its own (the kernel allows
/// one per descriptor): `warning` yields `.warning`, `critical` yields
/// `.critical`. The kernel reports a trigger at most once per window, so
/// levels arrive at most once per window each. One thread of the source's own
/// polls both; `stop()` or deinit ends it and closes the files. The stream
/// ends by itself if the kernel drops the triggers (the cgroup was removed).
///
/// Files on other file systems are refused: a regular file accepts the
/// trigger line as data (so it would be overwritten) and never reports an
/// event.
public final class PSIPressureSource: MemoryPressureSource {
    /// A PSI trigger: report when tasks stalled on memory for `stall` in total
    /// within any `window`.
    public struct Trigger: Sendable, Equatable {
        /// Which tasks count.
        public enum Kind: String, Sendable {
            /// At least one task stalled on memory.
            case some
            /// All non-idle tasks stalled on memory at once.
            case full
        }

        public var kind: Kind
        /// The stall time within `window` that triggers an event; microsecond precision.
        public var stall: Duration
        /// The time window; the kernel accepts 500 ms to 10 s, and from a process
        /// without `CAP_SYS_RESOURCE` only multiples of 2 s (see `unprivileged`).
        public var window: Duration

        public init(kind: Kind, stall: Duration, window: Duration) {
            self.kind = kind
            self.stall = stall
            self.window = window
        }

        /// Some tasks stalled 150 ms in a second.
        public static let warning = Trigger(kind: .some, stall: .milliseconds(150), window: .seconds(1))
        /// All tasks stalled 100 ms in a second.
        public static let critical = Trigger(kind: .full, stall: .milliseconds(100), window: .seconds(1))

        /// The same share of stalled time over the next window that is a
        /// multiple of 2 s, which the kernel accepts from processes without
        /// `CAP_SYS_RESOURCE` (150 ms in 1 s becomes 300 ms in 2 s).
        public var unprivileged: Trigger {
            let period = Self.unprivilegedPeriod
            let windowMicroseconds = window.microseconds
            guard windowMicroseconds > 0, windowMicroseconds % period != 0 else { return self }
            let widened = (windowMicroseconds / period + 1) * period
            let scaled = stall.microseconds * widened / windowMicroseconds
            return Trigger(kind: kind, stall: .microseconds(scaled), window: .microseconds(widened))
        }

        /// The line the kernel expects, in microseconds: "some 150000 1000000".
        var line: String { "\(kind.rawValue) \(stall.microseconds) \(window.microseconds)" }

        /// For names: "some 150ms/1s".
        var summary: String { "\(kind.rawValue) \(stall.microseconds.readableMicroseconds)/\(window.microseconds.readableMicroseconds)" }

        /// Why the kernel would refuse this trigger whatever the privileges, or nil.
        var problem: String? {
            let stall = stall.microseconds
            let window = window.microseconds
            if stall <= 0 { return "the stall time must be positive" }
            if window < 500_000 || window > 10_000_000 { return "the window must be 500ms to 10s" }
            if stall > window { return "the stall time must not exceed the window" }
            return nil
        }

        static let unprivilegedPeriod: Int64 = 2_000_000
    }

    /// "kernel PSI PATH (some 150ms/1s, full 100ms/1s)".
    public let name: String
    /// The PSI file watched.
    public let path: String
    private let channel = LevelChannel()
    private let watcher: PressureWatcher

    /// Opens `path` twice, registers `warning` on one descriptor and
    /// `critical` on the other, and starts watching.
    ///
    /// Throws `.unavailable` when the file is missing (no PSI in this kernel)
    /// or is not a PSI file, `.permissionDenied` when it cannot be opened or
    /// written, and `.invalidTrigger` when the kernel refuses a trigger (a
    /// window that is not a multiple of 2 s, without `CAP_SYS_RESOURCE`).
    public init(path: String, warning: Trigger = .warning, critical: Trigger = .critical) throws(MemoryPressureError) {
        self.path = path
        name = "kernel PSI \(path) (\(warning.summary), \(critical.summary))"
        let calls = Syscalls.current
        var watches: [PressureWatch] = []
        do throws(MemoryPressureError) {
            for (trigger, level) in [(warning, MemoryPressureLevel.warning), (critical, .critical)] {
                if let problem = trigger.problem {
                    throw .invalidTrigger(path: path, line: trigger.line, reason: problem)
                }
                let fd = try Self.openPSIFile(path, calls: calls)
                watches.append(PressureWatch(fd: fd, kind: .psiTrigger, level: level))
                try Self.register(Array(trigger.line.utf8) + [0], fd: fd, path: path, calls: calls)
            }
        } catch {
            for watch in watches { _ = calls.close(watch.fd) }
            throw error
        }
        do throws(SystemCallError) {
            watcher = try PressureWatcher(watches: watches, channel: channel, calls: calls)
        } catch {
            throw .unavailable(path: path, reason: error.description)
        }
    }

    public var levels: AsyncStream<MemoryPressureLevel> { channel.claim() }

    public func stop() {
        watcher.stop()
    }

    /// Opens a PSI file for registering a trigger; refuses files that are not
    /// on procfs or cgroup2.
    static func openPSIFile(_ path: String, calls: Syscalls) throws(MemoryPressureError) -> Int32 {
        let fd = calls.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0)
        guard fd >= 0 else { throw openError(path: path, code: errno) }
        guard let problem = notPSIFile(fd, calls: calls) else { return fd }
        _ = calls.close(fd)
        throw .unavailable(path: path, reason: problem)
    }

    /// Why the open file `fd` cannot be a PSI file, or nil.
    static func notPSIFile(_ fd: Int32, calls: Syscalls) -> String? {
        let type = Int64(calls.fileSystemType(fd))
        guard type >= 0 else { return "fstatfs failed: \(String(cString: strerror(errno)))" }
        guard type == procMagic || type == cgroup2Magic else {
            return "not a PSI file (not on procfs or cgroup2, file system type 0x\(String(type, radix: 16)))"
        }
        return nil
    }

    /// Writes `bytes` (a trigger line and its NUL) to the PSI file open as `fd`.
    ///
    /// The NUL matters: the kernel replaces the last byte written with one.
    static func register(_ bytes: [UInt8], fd: Int32, path: String, calls: Syscalls) throws(MemoryPressureError) {
        let written = bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return calls.write(fd, base, raw.count)
        }
        if written == bytes.count { return }
        let code = written < 0 ? errno : EIO
        let line = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        switch code {
        case EACCES, EPERM:
            throw .permissionDenied(path: path)
        case EINVAL:
            throw .invalidTrigger(path: path, line: line, reason: refusalReason(line: line))
        case EBUSY:
            throw .invalidTrigger(path: path, line: line, reason: "the file already has a trigger")
        case EOPNOTSUPP:
            throw .unavailable(path: path, reason: "PSI is turned off in this kernel (psi=0)")
        default:
            throw .unavailable(path: path, reason: "write failed: \(String(cString: strerror(code)))")
        }
    }

    /// Why the kernel answered EINVAL to a trigger line that passed our checks.
    static func refusalReason(line: String) -> String {
        let fields = line.split(separator: " ")
        if fields.count == 3, let window = Int64(fields[2]), window % Trigger.unprivilegedPeriod != 0 {
            return "the kernel refused it; without CAP_SYS_RESOURCE the window must be a multiple of 2s"
        }
        return "the kernel refused it (invalid argument)"
    }

    static func openError(path: String, code: Int32) -> MemoryPressureError {
        switch code {
        case ENOENT:
            .unavailable(path: path, reason: "no such file (a kernel without PSI, or PSI turned off with psi=0)")
        case EACCES, EPERM:
            .permissionDenied(path: path)
        default:
            .unavailable(path: path, reason: "open failed: \(String(cString: strerror(code)))")
        }
    }

    /// `PROC_SUPER_MAGIC` and `CGROUP2_SUPER_MAGIC` from linux/magic.h.
    static let procMagic: Int64 = 0x9fa0
    static let cgroup2Magic: Int64 = 0x6367_7270
}

extension Duration {
    /// Whole microseconds, rounded toward zero.
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}

extension Int64 {
    /// "1s", "150ms" or "1500µs": the largest unit that is exact.
    var readableMicroseconds: String {
        if self != 0 && self % 1_000_000 == 0 { return "\(self / 1_000_000)s" }
        if self % 1000 == 0 { return "\(self / 1000)ms" }
        return "\(self)µs"
    }
}
