import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The state of one extraction into a staging directory: what has been
/// created (so no later entry is written through a symlink or over another
/// entry) and what has been counted against the limits.
struct Extraction {
    private enum Node { case directory, file, symlink }

    private let reader: ArchiveReader
    private let staging: StagingDirectory
    private let limits: ExtractionLimits
    private var nodes: [String: Node] = [:]
    /// Every path a symlink's target passes through; no symlink may be created there.
    private var symlinkPaths: Set<String> = []
    private var entryCount = 0
    private var bytesWritten: UInt64 = 0
    private(set) var files: [String] = []
    private(set) var directories: [String] = []

    init(reader: ArchiveReader, staging: StagingDirectory, limits: ExtractionLimits) {
        self.reader = reader
        self.staging = staging
        self.limits = limits
    }

    /// Reads every entry and writes it into the staging directory.
    mutating func run() throws(ArchiveError) {
        while let header = try reader.nextHeader() {
            entryCount += 1
            guard entryCount <= limits.maximumEntries else {
                throw .limitExceeded(path: reader.path, limit: "more than \(limits.maximumEntries) entries")
            }
            try extract(header)
        }
    }

    private mutating func extract(_ header: ArchiveReader.Header) throws(ArchiveError) {
        guard let name = header.name else { throw unsafe("(unreadable name)", "name is not UTF-8") }
        let components: [String]
        do { components = try EntryPath.components(of: name) } catch { throw unsafe(name, error.reason) }
        let key = components.joined(separator: "/")
        switch header.kind {
        case let .other(kind):
            throw unsafe(name, "\(kind) entries are not extracted")
        case .hardlink:
            throw unsafe(name, "hard links are not extracted")
        case .directory:
            guard !components.isEmpty else { return }
            try makeParents(of: components, entry: name)
            switch nodes[key] {
            case .directory: return
            case .file, .symlink: throw unsafe(name, "already extracted as something else")
            case nil: try makeDirectory(key)
            }
        case .regular:
            guard !components.isEmpty else { throw unsafe(name, "empty name") }
            try makeParents(of: components, entry: name)
            guard nodes[key] == nil else { throw unsafe(name, "duplicate entry") }
            try writeFile(key, entry: name)
        case let .symlink(target):
            guard !components.isEmpty else { throw unsafe(name, "empty name") }
            try makeParents(of: components, entry: name)
            guard nodes[key] == nil else { throw unsafe(name, "duplicate entry") }
            try makeSymlink(key, components: components, target: target, entry: name)
        }
    }

    /// Creates the missing parent directories of an entry; refuses when one
    /// exists as anything but a directory this extraction created.
    private mutating func makeParents(of components: [String], entry: String) throws(ArchiveError) {
        var prefix = ""
        for component in components.dropLast() {
            prefix = prefix.isEmpty ? component : prefix + "/" + component
            switch nodes[prefix] {
            case .directory: continue
            case .file, .symlink: throw unsafe(entry, "\"\(prefix)\" is not a directory")
            case nil: try makeDirectory(prefix)
            }
        }
    }

    private mutating func makeDirectory(_ key: String) throws(ArchiveError) {
        do { try staging.makeDirectory(key) } catch { throw .write(error) }
        nodes[key] = .directory
        directories.append(key)
    }

    private mutating func writeFile(_ key: String, entry: String) throws(ArchiveError) {
        nodes[key] = .file
        let writer: FileWriter
        do { writer = try FileWriter(path: staging.path + "/" + key, hashing: false) } catch { throw .write(error) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = try reader.readData(into: buffer, entry: entry)
            if count == 0 { break }
            try account(bytes: UInt64(count))
            do { try writer.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) } catch { throw .write(error) }
        }
        do { try writer.finish() } catch { throw .write(error) }
        files.append(key)
    }

    /// Counts bytes about to be written against the total and the ratio.
    private mutating func account(bytes: UInt64) throws(ArchiveError) {
        bytesWritten += bytes
        guard bytesWritten <= limits.maximumTotalBytes else {
            throw .limitExceeded(path: reader.path, limit: "more than \(limits.maximumTotalBytes) bytes")
        }
        guard bytesWritten > 1 << 20 else { return }
        let ratio = Double(bytesWritten) / Double(max(reader.bytesRead, 1))
        guard ratio <= limits.maximumCompressionRatio else {
            throw .limitExceeded(path: reader.path, limit: "compression ratio above \(Self.format(limits.maximumCompressionRatio))")
        }
    }

    /// Creates a symlink whose target stays inside the destination and passes
    /// through no other symlink (in either order of creation), so following
    /// links can never leave the destination.
    private mutating func makeSymlink(_ key: String, components: [String], target: String, entry: String) throws(ArchiveError) {
        let resolved: (result: [String], visited: [[String]])
        do { resolved = try EntryPath.resolve(symlink: components, target: target) } catch { throw unsafe(entry, error.reason) }
        let visited = resolved.visited.map { $0.joined(separator: "/") }
        if visited.contains(where: { nodes[$0] == .symlink }) || symlinkPaths.contains(key) {
            throw unsafe(entry, "symlink chains are not extracted")
        }
        let full = staging.path + "/" + key
        guard symlink(target, full) == 0 else { throw .write(SystemCallError(call: "symlink", path: full, code: errno)) }
        nodes[key] = .symlink
        symlinkPaths.formUnion(visited)
    }

    private func unsafe(_ entry: String, _ reason: String) -> ArchiveError {
        .unsafeEntry(path: reader.path, entry: entry, reason: reason)
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
