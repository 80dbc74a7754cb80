import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private directory beside a destination, filled and then swapped into
/// place in one step, so readers see the old directory or the new one and
/// never half of either.
///
/// The staging directory is named `.NAME.staging-PID-RANDOM` in the
/// destination's parent (one file system, so the rename is atomic). If the
/// process dies first, the next `StagingDirectory` for the same destination
/// removes the leftover once its process is gone.
public final class StagingDirectory {
    /// The directory being filled.
    public let path: String
    /// Where it goes when committed.
    public let destination: String
    private var finished = false

    /// Creates the staging directory for `destination`.
    public init(for destination: String) throws(SystemCallError) {
        let target = URL(fileURLWithPath: destination).standardizedFileURL
        self.destination = target.path
        let parent = target.deletingLastPathComponent().path
        let name = target.lastPathComponent
        Self.removeAbandoned(in: parent, name: name)
        let random = UInt32.random(in: 0...UInt32.max)
        path = parent + "/.\(name).staging-\(getpid())-\(String(random, radix: 16))"
        guard Syscalls.current.mkdir(path, 0o755) == 0 else {
            throw SystemCallError(call: "mkdir", path: path, code: errno)
        }
    }

    deinit {
        if !finished { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Creates a subdirectory of the staging directory.
    public func makeDirectory(_ relativePath: String) throws(SystemCallError) {
        let full = path + "/" + relativePath
        guard Syscalls.current.mkdir(full, 0o755) == 0 else {
            throw SystemCallError(call: "mkdir", path: full, code: errno)
        }
    }

    /// Flushes the directory entries, then puts the staging directory at the
    /// destination: a plain rename when nothing is there, an atomic exchange
    /// when a directory is (the old one is then removed).
    ///
    /// - Parameter directories: relative paths of subdirectories whose
    ///   entries must reach the disk too.
    public func commit(syncing directories: [String] = []) throws(SystemCallError) {
        for directory in directories + [""] {
            try Syscalls.current.syncDirectory(directory.isEmpty ? path : path + "/" + directory)
        }
        let calls = Syscalls.current
        var replaced = false
        if FileManager.default.fileExists(atPath: destination) {
            guard calls.exchange(path, destination) == 0 else {
                throw SystemCallError(call: "renameat2", path: destination, code: errno)
            }
            replaced = true
        } else {
            guard calls.rename(path, destination) == 0 else {
                throw SystemCallError(call: "rename", path: destination, code: errno)
            }
        }
        finished = true
        try Syscalls.current.syncDirectory(URL(fileURLWithPath: destination).deletingLastPathComponent().path)
        // After an exchange the staging path holds the previous directory.
        if replaced { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Removes the staging directories for `destination` that processes
    /// which no longer run left behind (killed while filling one, or between
    /// swapping it in and removing the old directory).
    public static func removeAbandoned(for destination: String) {
        let target = URL(fileURLWithPath: destination).standardizedFileURL
        removeAbandoned(in: target.deletingLastPathComponent().path, name: target.lastPathComponent)
    }

    /// Removes staging directories for `name` left by processes that no longer run.
    private static func removeAbandoned(in parent: String, name: String) {
        let prefix = ".\(name).staging-"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
        for entry in entries where entry.hasPrefix(prefix) {
            let pidText = entry.dropFirst(prefix.count).prefix { $0 != "-" }
            guard let pid = pid_t(pidText), pid > 0 else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: parent + "/" + entry)
            }
        }
    }
}
