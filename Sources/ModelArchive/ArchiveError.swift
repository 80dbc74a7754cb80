import SystemIO

/// Why an archive could not be read or extracted; each case names the archive
/// and, where there is one, the entry at fault.
public enum ArchiveError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The archive file cannot be opened or read.
    case unreadable(path: String, reason: String)
    /// The file is not a zip or tar archive (plain or gzip/xz compressed).
    case notAnArchive(path: String)
    /// The archive is truncated or damaged; `entry` is the one being read, if any.
    case corrupt(path: String, entry: String?, reason: String)
    /// An entry that would write outside the destination or is not a plain
    /// file, directory or contained symlink.
    case unsafeEntry(path: String, entry: String, reason: String)
    /// One of the `ExtractionLimits` was passed; `limit` says which.
    case limitExceeded(path: String, limit: String)
    /// No model matches `member` (an empty `member` means the archive holds no model).
    case memberNotFound(path: String, member: String, available: [String])
    /// Several models match and none was chosen.
    case ambiguousMember(path: String, candidates: [String])
    /// Writing the extracted files failed.
    case write(SystemCallError)

    /// One line naming the archive and, where there is one, the entry.
    public var description: String {
        switch self {
        case let .unreadable(path, reason):
            return "\(path): cannot read archive: \(reason)"
        case let .notAnArchive(path):
            return "\(path): not a zip or tar archive"
        case let .corrupt(path, entry, reason):
            if let entry { return "\(path): corrupt archive at entry \"\(entry)\": \(reason)" }
            return "\(path): corrupt archive: \(reason)"
        case let .unsafeEntry(path, entry, reason):
            return "\(path): unsafe entry \"\(entry)\": \(reason)"
        case let .limitExceeded(path, limit):
            return "\(path): archive refused: \(limit)"
        case let .memberNotFound(path, member, available):
            let list = available.isEmpty ? "none" : available.joined(separator: ", ")
            if member.isEmpty { return "\(path): no .mlmodel or .mlpackage in the archive" }
            return "\(path): no model matches \"\(member)\" (models: \(list))"
        case let .ambiguousMember(path, candidates):
            return "\(path): several models, choose one: \(candidates.joined(separator: ", "))"
        case let .write(error):
            return error.description
        }
    }
}
