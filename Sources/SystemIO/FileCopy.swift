import CSystemShims
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Copies a file or a directory tree so that the destination holds the old
/// content or the whole new copy, never a part: the copy is made beside the
/// destination, flushed to disk, and renamed into place.
public enum FileCopy {
    /// Copies `source` (a regular file, or a directory of files, directories
    /// and symlinks) to `destination`, replacing what is there. Copied files
    /// are 0644 and directories 0755, whatever the source's modes.
    public static func copy(_ source: String, to destination: String) throws(SystemCallError) {
        var info = stat()
        guard Syscalls.current.stat(source, &info) == 0 else { throw SystemCallError(call: "stat", path: source, code: errno) }
        if info.st_mode & S_IFMT == S_IFDIR {
            let staging = try StagingDirectory(for: destination)
            var directories: [String] = []
            try copyTree(source, into: staging.path, relative: "", directories: &directories)
            try staging.commit(syncing: directories)
            return
        }
        try AtomicFile.replace(destination) { temporary throws(SystemCallError) in try copyFile(source, to: temporary) }
    }

    /// Copies one regular file to the new path `destination`, in the kernel
    /// where it can (`copy_file_range`; `read` and `write` where the file
    /// system cannot), and flushes it. `destination` must not exist.
    public static func copyFile(_ source: String, to destination: String) throws(SystemCallError) {
        let calls = Syscalls.current
        let input = calls.open(source, O_RDONLY | O_CLOEXEC, 0)
        guard input >= 0 else { throw SystemCallError(call: "open", path: source, code: errno) }
        defer { _ = calls.close(input) }
        let output = calls.open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw SystemCallError(call: "open", path: destination, code: errno) }
        defer { _ = calls.close(output) }
        var inKernel = true
        var buffer: [UInt8] = []
        while true {
            if inKernel {
                let copied = modelc_copy_file_range(input, output, 1 << 30)
                if copied > 0 { continue }
                if copied == 0 { break }
                if errno == EINTR { continue }
                guard [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP].contains(errno) else {
                    throw SystemCallError(call: "copy_file_range", path: destination, code: errno)
                }
                inKernel = false
                buffer = [UInt8](repeating: 0, count: 1 << 20)
            }
            let count = buffer.withUnsafeMutableBytes { raw in raw.baseAddress.map { calls.read(input, $0, raw.count) } ?? 0 }
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "read", path: source, code: errno)
            }
            if count == 0 { break }
            let written = buffer.withUnsafeBytes { raw in
                Result { () throws(SystemCallError) in try calls.writeAll(UnsafeRawBufferPointer(rebasing: raw[..<count]), to: output, path: destination) }
            }
            try written.get()
        }
        guard calls.fsync(output) == 0 else { throw SystemCallError(call: "fsync", path: destination, code: errno) }
    }

    private static func copyTree(_ source: String, into root: String, relative: String, directories: inout [String]) throws(SystemCallError) {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: source).sorted() } catch {
            throw SystemCallError(call: "opendir", path: source, code: Int32(((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.code ?? Int(EIO)))
        }
        for name in names {
            let from = source + "/" + name
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(from, &info) == 0 else { throw SystemCallError(call: "lstat", path: from, code: errno) }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                guard Syscalls.current.mkdir(root + "/" + path, 0o755) == 0 else {
                    throw SystemCallError(call: "mkdir", path: root + "/" + path, code: errno)
                }
                directories.append(path)
                try copyTree(from, into: root, relative: path, directories: &directories)
            case S_IFREG:
                try copyFile(from, to: root + "/" + path)
            case S_IFLNK:
                let target: String
                do { target = try FileManager.default.destinationOfSymbolicLink(atPath: from) } catch {
                    throw SystemCallError(call: "readlink", path: from, code: EIO)
                }
                guard symlink(target, root + "/" + path) == 0 else {
                    throw SystemCallError(call: "symlink", path: root + "/" + path, code: errno)
                }
            default:
                throw SystemCallError(call: "copy", path: from, code: EINVAL)
            }
        }
    }
}
