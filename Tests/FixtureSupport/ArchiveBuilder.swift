import CArchive
import Foundation

/// Writes archives for the tests with libarchive's writer.
public struct ArchiveBuilder {
    public enum Format: String, CaseIterable, CustomStringConvertible, Sendable {
        case zip, tar, tarGzip = "tar.gz", tarXz = "tar.xz"
        public var description: String { rawValue }
    }

    public enum Entry: Sendable {
        case file(String, [UInt8])
        case directory(String)
        case symlink(String, target: String)
        case hardlink(String, target: String)
        /// A special entry with the given file type bits (FIFO, device).
        case special(String, type: UInt32)
        /// A regular file of `size` zero bytes, streamed.
        case zeros(String, size: Int)
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func write(_ entries: [Entry], format: Format, to path: String) throws {
        guard let archive = archive_write_new() else { throw Failure(description: "archive_write_new") }
        defer { archive_write_free(archive) }
        switch format {
        case .zip: archive_write_set_format_zip(archive)
        case .tar: archive_write_set_format_pax_restricted(archive)
        case .tarGzip:
            archive_write_set_format_pax_restricted(archive)
            archive_write_add_filter_gzip(archive)
        case .tarXz:
            archive_write_set_format_pax_restricted(archive)
            archive_write_add_filter_xz(archive)
        }
        try check(archive, archive_write_open_filename(archive, path))
        for item in entries {
            guard let entry = archive_entry_new() else { throw Failure(description: "archive_entry_new") }
            defer { archive_entry_free(entry) }
            var data: [UInt8] = []
            var zeros = 0
            switch item {
            case let .file(name, bytes):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, 0o100000)
                archive_entry_set_perm(entry, 0o600)
                archive_entry_set_size(entry, Int64(bytes.count))
                data = bytes
            case let .zeros(name, size):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, 0o100000)
                archive_entry_set_perm(entry, 0o644)
                archive_entry_set_size(entry, Int64(size))
                zeros = size
            case let .directory(name):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, 0o040000)
                archive_entry_set_perm(entry, 0o700)
            case let .symlink(name, target):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, 0o120000)
                archive_entry_set_perm(entry, 0o777)
                archive_entry_set_symlink(entry, target)
            case let .hardlink(name, target):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, 0o100000)
                archive_entry_set_perm(entry, 0o644)
                archive_entry_set_hardlink(entry, target)
                archive_entry_set_size(entry, 0)
            case let .special(name, type):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, type)
                archive_entry_set_perm(entry, 0o644)
                archive_entry_set_rdev(entry, 0x0103)
            }
            try check(archive, archive_write_header(archive, entry))
            if !data.isEmpty {
                let written = data.withUnsafeBytes { archive_write_data(archive, $0.baseAddress, $0.count) }
                guard written == data.count else { throw Failure(description: "archive_write_data wrote \(written)") }
            }
            let chunk = [UInt8](repeating: 0, count: 1 << 20)
            while zeros > 0 {
                let size = min(zeros, chunk.count)
                let written = chunk.withUnsafeBytes { archive_write_data(archive, $0.baseAddress, size) }
                guard written == size else { throw Failure(description: "archive_write_data wrote \(written)") }
                zeros -= size
            }
        }
        try check(archive, archive_write_close(archive))
    }

    /// Entries for the directory at `path` and everything below it, named
    /// `NAME/…` after the directory (an `.mlpackage` as it would be zipped).
    public static func entries(ofDirectory path: String) throws -> [Entry] {
        let name = URL(fileURLWithPath: path).lastPathComponent
        var entries: [Entry] = []
        for relative in try FileManager.default.subpathsOfDirectory(atPath: path).sorted() {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path + "/" + relative, isDirectory: &isDirectory)
            entries.append(isDirectory.boolValue
                ? .directory(name + "/" + relative)
                : .file(name + "/" + relative, Array(try Data(contentsOf: URL(fileURLWithPath: path + "/" + relative)))))
        }
        return entries
    }

    private static func check(_ archive: OpaquePointer, _ status: Int32) throws {
        guard status == ARCHIVE_OK else {
            let text = archive_error_string(archive).map { String(cString: $0) } ?? "status \(status)"
            throw Failure(description: text)
        }
    }
}

/// A private directory for one test, removed at the end.
public final class TemporaryDirectory {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "modelarchive-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    public func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }
}
