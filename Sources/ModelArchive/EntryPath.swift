/// Entry names reduced to safe relative paths, and symlink targets resolved
/// lexically, without touching the file system.
enum EntryPath {
    /// The components of an entry name relative to the destination: leading
    /// "./", empty and "." components dropped. Throws the reason when the
    /// name is empty, absolute, has a ".." component or holds a NUL byte.
    /// An empty result names the destination itself (a "./" entry).
    static func components(of name: String) throws(Refusal) -> [String] {
        guard !name.isEmpty else { throw Refusal("empty name") }
        guard !name.contains("\0") else { throw Refusal("NUL byte in the name") }
        guard !name.hasPrefix("/") else { throw Refusal("absolute path") }
        let parts = name.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.contains("..") else { throw Refusal("\"..\" in the path") }
        return parts.filter { $0 != "." }
    }

    /// Where a symlink at `link` (components) pointing to `target` leads,
    /// with every path passed on the way (including the result), resolved
    /// lexically against the link's directory. Throws when the target is
    /// absolute, empty or climbs above the destination.
    static func resolve(symlink link: [String], target: String) throws(Refusal) -> (result: [String], visited: [[String]]) {
        guard !target.isEmpty else { throw Refusal("empty symlink target") }
        guard !target.contains("\0") else { throw Refusal("NUL byte in the symlink target") }
        guard !target.hasPrefix("/") else { throw Refusal("symlink to the absolute path \"\(target)\"") }
        var current = Array(link.dropLast())
        var visited: [[String]] = []
        for part in target.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..":
                guard !current.isEmpty else { throw Refusal("symlink to \"\(target)\" leaves the destination") }
                current.removeLast()
            default:
                current.append(String(part))
                visited.append(current)
            }
        }
        return (current, visited)
    }

    /// Why a name or target is refused.
    struct Refusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
