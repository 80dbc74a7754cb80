#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A regular file mapped read-only into memory.
///
/// The mapping lives as long as the object; `bytes` must not be used after it
/// is released. An empty file has an empty buffer and no mapping.
///
/// `@unchecked Sendable`: every stored property is a constant and the mapping
/// is read-only (`PROT_READ`), so no thread can observe a change.
public final class MappedFile: @unchecked Sendable {
    /// The path the file was opened at.
    public let path: String
    private let base: UnsafeRawPointer?
    private let count: Int

    /// Maps the regular file at `path`.
    ///
    /// - Throws: `MappedFile.OpenError` naming the path: it does not exist,
    ///   cannot be read, is not a regular file, or cannot be mapped.
    public init(path: String) throws(MappedFile.OpenError) {
        self.path = path
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY, 0)
        guard fd >= 0 else {
            throw .system(SystemCallError(call: "open", path: path, code: errno))
        }
        defer { _ = calls.close(fd) }
        var info = stat()
        guard calls.fstat(fd, &info) == 0 else {
            throw .system(SystemCallError(call: "fstat", path: path, code: errno))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .notRegularFile(path: path)
        }
        count = Int(info.st_size)
        if count == 0 {
            base = nil
            return
        }
        guard let address = calls.mmap(count, fd) else {
            throw .system(SystemCallError(call: "mmap", path: path, code: errno))
        }
        base = UnsafeRawPointer(address)
    }

    deinit {
        if let base {
            _ = Syscalls.current.munmap(UnsafeMutableRawPointer(mutating: base), count)
        }
    }

    /// Tells the kernel the pages wholly inside `range` of `bytes` will not be
    /// read again soon: they leave this process's resident memory (the file
    /// keeps them; a later read maps them back in).
    public func releasePages(in range: Range<Int>) {
        guard let base, range.lowerBound >= 0, range.upperBound <= count else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (range.lowerBound + page - 1) / page * page
        let end = range.upperBound / page * page
        guard end > start else { return }
        _ = Syscalls.current.madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, MADV_DONTNEED)
    }

    /// Tells the kernel reads will not be sequential, so a page fault reads
    /// that page and not the pages after it.
    public func adviseRandomAccess() {
        guard let base else { return }
        _ = Syscalls.current.madvise(UnsafeMutableRawPointer(mutating: base), count, MADV_RANDOM)
    }

    /// Undoes `adviseRandomAccess`: faults read ahead again, for callers that
    /// go on to read the data in order.
    public func adviseNormalAccess() {
        guard let base else { return }
        _ = Syscalls.current.madvise(UnsafeMutableRawPointer(mutating: base), count, MADV_NORMAL)
    }

    /// The file's bytes; valid while this object is alive.
    public var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base, count: count)
    }

    /// Why a file could not be mapped.
    public enum OpenError: Error, Equatable, Sendable, CustomStringConvertible {
        case system(SystemCallError)
        case notRegularFile(path: String)

        public var description: String {
            switch self {
            case .system(let error): error.description
            case .notRegularFile(let path): "\(path): not a regular file"
            }
        }
    }
}
