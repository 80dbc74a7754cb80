import Foundation

/// The `Manifest.json` of an `.mlpackage`: the items the package holds and
/// which of them is the root model specification.
struct PackageManifest: Decodable {
    struct Item: Decodable {
        let path: String
        let name: String?
        let author: String?
        let description: String?
    }

    let fileFormatVersion: String
    let itemInfoEntries: [String: Item]
    let rootModelIdentifier: String

    /// The root model item, if the manifest names one that exists.
    var rootItem: Item? { itemInfoEntries[rootModelIdentifier] }
}

/// Resolves paths named inside a package, refusing any that leave it.
struct PackagePaths {
    /// The package directory with symbolic links resolved.
    let root: URL

    init(packageURL: URL) {
        root = packageURL.resolvingSymlinksInPath().standardizedFileURL
    }

    /// The file `relativePath` (relative to `base`, a directory inside the
    /// package) resolved through symbolic links, or `nil` when it is absolute,
    /// climbs with `..`, or resolves to a place outside the package.
    func resolve(_ relativePath: String, under base: URL) -> URL? {
        guard !relativePath.isEmpty, !relativePath.hasPrefix("/"), !relativePath.contains("\0") else { return nil }
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: true)
        guard !components.contains("..") else { return nil }
        let candidate = base.appendingPathComponent(relativePath).resolvingSymlinksInPath().standardizedFileURL
        return contains(candidate) ? candidate : nil
    }

    /// Whether `url` (already resolved) lies inside the package.
    func contains(_ url: URL) -> Bool {
        let rootPath = root.path.hasSuffix("/") ? root.path : root.path + "/"
        return url.path.hasPrefix(rootPath)
    }
}
