import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

extension ArchiveExtractor {
    /// The models an archive holds, as relative paths, sorted: every
    /// `*.mlmodel` file and every `*.mlpackage` directory (one holding a
    /// `Manifest.json`), not counting the files inside an `.mlpackage`.
    ///
    /// Reads the entry headers only; throws `ArchiveError` for unreadable,
    /// damaged archives and for unsafe entry names.
    public static func models(in path: String) throws(ArchiveError) -> [String] {
        let reader = try ArchiveReader(path: path)
        var found: Set<String> = []
        while let header = try reader.nextHeader() {
            guard header.kind == .regular else { continue }
            guard let name = header.name else {
                throw .unsafeEntry(path: path, entry: "(unreadable name)", reason: "name is not UTF-8")
            }
            let components: [String]
            do { components = try EntryPath.components(of: name) } catch {
                throw .unsafeEntry(path: path, entry: name, reason: error.reason)
            }
            if let model = model(containing: components) { found.insert(model) }
        }
        return found.sorted()
    }

    /// Extracts the archive into `destination` (as `extract` does) and returns
    /// the path of its one model, or of the model `member` names (its
    /// relative path or last component).
    ///
    /// The archive is read once, within `limits`; the model is chosen before
    /// the extracted files are put at `destination`: no model, several
    /// without `member`, or no match throw `memberNotFound` or
    /// `ambiguousMember` and leave nothing behind.
    public static func extractModel(_ path: String, into destination: String, member: String? = nil, limits: ExtractionLimits = .init()) throws(ArchiveError) -> String {
        let extracted = try extract(path, into: destination, limits: limits) { files throws(ArchiveError) in
            let available = Set(files.compactMap { model(containing: $0.split(separator: "/").map(String.init)) }).sorted()
            return try choose(member, among: available, path: path)
        }
        return destination + "/" + extracted.chosen
    }

    private static func choose(_ member: String?, among available: [String], path: String) throws(ArchiveError) -> String {
        guard let member else {
            if available.count == 1, let only = available.first { return only }
            if available.isEmpty { throw .memberNotFound(path: path, member: "", available: []) }
            throw .ambiguousMember(path: path, candidates: available)
        }
        let wanted = member.split(separator: "/").filter { $0 != "." }.joined(separator: "/")
        let matches = available.filter { $0 == wanted || $0.split(separator: "/").last.map(String.init) == wanted }
        if matches.count == 1, let only = matches.first { return only }
        if matches.isEmpty { throw .memberNotFound(path: path, member: member, available: available) }
        throw .ambiguousMember(path: path, candidates: matches)
    }

    /// The model a regular file's path makes known: the file itself for an
    /// `.mlmodel` outside any package, the package for a `Manifest.json`
    /// directly inside an outermost `.mlpackage`.
    private static func model(containing components: [String]) -> String? {
        guard let last = components.last else { return nil }
        let directories = components.dropLast()
        if let package = directories.firstIndex(where: { $0.hasSuffix(".mlpackage") }) {
            guard last == "Manifest.json", package == directories.count - 1 else { return nil }
            return directories.joined(separator: "/")
        }
        return last.hasSuffix(".mlmodel") ? components.joined(separator: "/") : nil
    }
}

extension ArchiveExtractor {
    /// The model in a directory `extract` filled from `archive`: its one
    /// model, or the one `member` names, chosen as `extractModel` chooses.
    /// Returns the model's path inside `directory`.
    public static func model(in directory: String, extractedFrom archive: String, member: String? = nil) throws(ArchiveError) -> String {
        guard let walker = FileManager.default.enumerator(atPath: directory) else {
            throw .unreadable(path: directory, reason: "cannot list the extracted files")
        }
        var available: Set<String> = []
        while let relative = walker.nextObject() as? String {
            guard walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular else { continue }
            if let model = model(containing: relative.split(separator: "/").map(String.init)) { available.insert(model) }
        }
        return directory + "/" + (try choose(member, among: available.sorted(), path: archive))
    }

    /// Whether the file at `path` starts like an archive `extract` reads: a
    /// zip, a gzip or xz stream, or a POSIX tar.
    public static func looksLikeArchive(_ path: String) -> Bool {
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return false }
        defer { _ = calls.close(fd) }
        var head = [UInt8](repeating: 0, count: 512)
        let count = head.withUnsafeMutableBytes { raw in raw.baseAddress.map { calls.read(fd, $0, raw.count) } ?? 0 }
        guard count > 0 else { return false }
        let bytes = head[..<count]
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + magic.count && Array(bytes[offset..<offset + magic.count]) == magic
        }
        return starts([0x50, 0x4B, 0x03, 0x04]) || starts([0x50, 0x4B, 0x05, 0x06])
            || starts([0x1F, 0x8B]) || starts([0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00])
            || starts(Array("ustar".utf8), at: 257)
    }
}
