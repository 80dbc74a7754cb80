/// Why a picture of a model or a report page could not be made.
public enum PictureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The output path's extension names no format this picture has
    /// (`--graph` takes .svg, .dot and .html; reports .html).
    case unknownFormat(path: String, expected: [String])

    public var description: String {
        switch self {
        case .unknownFormat(let path, let expected):
            let name = path.split(separator: "/").last.map(String.init) ?? path
            let dot = name.lastIndex(of: ".").map { String(name[$0...]) }
            let found = dot.map { "extension \($0)" } ?? "no extension"
            return "\(path): \(found); expected \(expected.joined(separator: ", "))"
        }
    }
}
