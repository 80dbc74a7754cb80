import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Finding the memory pressure source that fits this process.
public enum MemoryPressureSources {
    /// The path of this process's own cgroup v2 `memory.pressure` file, or nil
    /// when there is no v2 hierarchy.
    ///
    /// `procSelfCgroup` is the text of `/proc/self/cgroup`, whose `0::/path`
    /// line names the v2 cgroup; `mountInfo` is the text of
    /// `/proc/self/mountinfo`, which says where cgroup2 is mounted (empty:
    /// assume `/sys/fs/cgroup`). When the mount shows only part of the
    /// hierarchy (its root is not `/`), the cgroup must lie inside it.
    public static func cgroupPressurePath(procSelfCgroup: String, mountInfo: String) -> String? {
        guard let line = procSelfCgroup.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else {
            return nil
        }
        var cgroup = String(line.dropFirst(3))
        guard cgroup.hasPrefix("/"), !cgroup.hasSuffix(" (deleted)") else { return nil }
        let mounts = mountInfo.isEmpty ? [(root: "/", point: "/sys/fs/cgroup")] : cgroup2Mounts(mountInfo)
        guard let mount = mounts.first(where: { $0.root == "/" || cgroup == $0.root || cgroup.hasPrefix($0.root + "/") })
        else { return nil }
        if mount.root != "/" { cgroup.removeFirst(mount.root.count) }
        let parts = (mount.point + "/" + cgroup).split(separator: "/", omittingEmptySubsequences: true)
        return "/" + (parts + ["memory.pressure"]).joined(separator: "/")
    }

    /// The best source available here, in order: systemd's variables, this
    /// process's cgroup v2 `memory.pressure`, `/proc/pressure/memory`; or nil.
    ///
    /// Also returns, one line each, why the sources before the one returned
    /// were not available, so the caller can say so once. A PSI file whose
    /// kernel refuses the default triggers (1 s windows need
    /// `CAP_SYS_RESOURCE`) is tried again with `Trigger.unprivileged` ones.
    /// When systemd turned pressure watching off (`/dev/null`), nothing else
    /// is tried.
    public static func best(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> (source: (any MemoryPressureSource)?, unavailable: [String]) {
        var unavailable: [String] = []
        do throws(MemoryPressureError) {
            return (try SystemdPressureSource(environment: environment), unavailable)
        } catch .turnedOff {
            return (nil, ["systemd: \(MemoryPressureError.turnedOff)"])
        } catch {
            unavailable.append("systemd: \(error)")
        }
        let cgroup = readText("/proc/self/cgroup") ?? ""
        let mountInfo = readText("/proc/self/mountinfo") ?? ""
        if let path = cgroupPressurePath(procSelfCgroup: cgroup, mountInfo: mountInfo) {
            switch psiSource(path) {
            case .success(let source): return (source, unavailable)
            case .failure(let error): unavailable.append("cgroup: \(error)")
            }
        } else {
            unavailable.append("cgroup: this process is in no cgroup v2 hierarchy")
        }
        switch psiSource("/proc/pressure/memory") {
        case .success(let source): return (source, unavailable)
        case .failure(let error): unavailable.append("system: \(error)")
        }
        return (nil, unavailable)
    }

    /// A PSI source on `path` with the default triggers, or if the kernel
    /// refuses those, with their unprivileged equivalents.
    private static func psiSource(_ path: String) -> Result<PSIPressureSource, MemoryPressureError> {
        do throws(MemoryPressureError) {
            return .success(try PSIPressureSource(path: path))
        } catch .invalidTrigger {
            return Result { () throws(MemoryPressureError) in
                try PSIPressureSource(path: path, warning: .warning.unprivileged, critical: .critical.unprivileged)
            }
        } catch {
            return .failure(error)
        }
    }

    /// `(root, mount point)` of every cgroup2 mount in a mountinfo text.
    private static func cgroup2Mounts(_ mountInfo: String) -> [(root: String, point: String)] {
        mountInfo.split(separator: "\n").compactMap { line in
            // ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER-OPTIONS
            let fields = line.split(separator: " ")
            guard fields.count >= 7, let separator = fields.firstIndex(of: "-"), separator >= 6,
                separator + 1 < fields.count, fields[separator + 1] == "cgroup2"
            else { return nil }
            return (root: unescape(fields[3]), point: unescape(fields[4]))
        }
    }

    /// Undoes mountinfo's octal escapes (`\040` for a space).
    private static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
                let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A small text file read whole (procfs files report size 0, so read to the end).
    static func readText(_ path: String) -> String? {
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        defer { _ = calls.close(fd) }
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while text.count < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return calls.read(fd, base, raw.count)
            }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            text += buffer[..<count]
        }
        return String(decoding: text, as: UTF8.self)
    }
}
