import CArchive
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// One archive opened for reading with libarchive: zip, or tar plain or
/// compressed with gzip or xz, recognized by content. Not thread-safe.
final class ArchiveReader {
    /// An entry header, as the archive states it (the name not yet checked).
    struct Header {
        enum Kind: Equatable {
            case regular, directory, symlink(String), hardlink(String), other(String)
        }
        /// The name as stored, or `nil` when it is not valid UTF-8.
        var name: String?
        var kind: Kind
    }

    let path: String
    private let handle: OpaquePointer
    private let fd: Int32
    private var sawHeader = false

    /// Opens `path`; throws `unreadable` when the file cannot be opened.
    init(path: String) throws(ArchiveError) {
        self.path = path
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY, 0)
        guard fd >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        var info = stat()
        guard calls.fstat(fd, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            _ = calls.close(fd)
            throw .unreadable(path: path, reason: reason)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            _ = calls.close(fd)
            throw .unreadable(path: path, reason: "not a regular file")
        }
        guard let handle = archive_read_new() else {
            _ = calls.close(fd)
            throw .unreadable(path: path, reason: modelc_archive_load().map { String(cString: $0) } ?? "cannot allocate a reader")
        }
        self.fd = fd
        self.handle = handle
        archive_read_support_format_zip(handle)
        archive_read_support_format_tar(handle)
        archive_read_support_filter_gzip(handle)
        archive_read_support_filter_xz(handle)
        guard archive_read_open_fd(handle, fd, 64 << 10) == ARCHIVE_OK else {
            throw notAnArchiveOrCorrupt(entry: nil)
        }
    }

    deinit {
        archive_read_free(handle)
        _ = Syscalls.current.close(fd)
    }

    /// Compressed bytes read from the file so far.
    var bytesRead: UInt64 { UInt64(max(0, archive_filter_bytes(handle, -1))) }

    /// The next entry's header, or `nil` at the end of the archive.
    func nextHeader() throws(ArchiveError) -> Header? {
        var entry: OpaquePointer?
        let status = archive_read_next_header(handle, &entry)
        if status == ARCHIVE_EOF { return nil }
        guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else {
            throw notAnArchiveOrCorrupt(entry: nil)
        }
        sawHeader = true
        let name = Self.string(archive_entry_pathname_utf8(entry) ?? archive_entry_pathname(entry))
        if let target = archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry) {
            return Header(name: name, kind: .hardlink(Self.string(target) ?? ""))
        }
        let kind: Header.Kind
        switch archive_entry_filetype(entry) & 0o170000 {
        case 0o100000: kind = .regular
        case 0o040000: kind = .directory
        case 0o120000:
            let target = archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)
            kind = .symlink(target.flatMap(Self.string) ?? "")
        case 0o020000: kind = .other("character device")
        case 0o060000: kind = .other("block device")
        case 0o010000: kind = .other("FIFO")
        case 0o140000: kind = .other("socket")
        default: kind = .other("unknown entry type")
        }
        return Header(name: name, kind: kind)
    }

    /// Reads the current entry's next bytes into `buffer`; returns how many
    /// (0 at the entry's end). Holes of sparse entries come back as zeros.
    func readData(into buffer: UnsafeMutableRawBufferPointer, entry: String) throws(ArchiveError) -> Int {
        let count = archive_read_data(handle, buffer.baseAddress, buffer.count)
        guard count >= 0 else { throw .corrupt(path: path, entry: entry, reason: errorText) }
        return count
    }

    private var errorText: String {
        archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
    }

    /// Before any header was read and with no format chosen, libarchive's
    /// "unrecognized format" (`EILSEQ`) means this is not an archive; any other
    /// failure (a truncated compressed stream, a damaged header) is damage.
    private func notAnArchiveOrCorrupt(entry: String?) -> ArchiveError {
        if !sawHeader && archive_format(handle) == 0 && archive_errno(handle) == EILSEQ {
            return .notAnArchive(path: path)
        }
        return .corrupt(path: path, entry: entry, reason: errorText)
    }

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        return String(validatingCString: pointer)
    }
}
