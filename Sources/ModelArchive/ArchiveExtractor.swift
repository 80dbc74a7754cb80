import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Extracts zip and tar archives (plain, gzip or xz; recognized by content)
/// safely: every entry is checked before anything is written, and a refused
/// archive leaves nothing behind.
///
/// Refused: absolute names, ".." components, empty names, names that are not
/// UTF-8, symlinks whose target is absolute, climbs out of the destination or
/// passes through another symlink, entries below a symlink or a file,
/// duplicate entries, hard links (never extracted, to keep one kind of link to
/// check), devices, FIFOs and sockets. Directories are created 0755 and files
/// 0644 whatever the archive says. A "./" directory entry names the
/// destination itself and is skipped.
public enum ArchiveExtractor {
    /// Extracts the archive at `path` into the new directory `destination`,
    /// which must not exist.
    ///
    /// The entries are written into a staging directory beside `destination`
    /// that is renamed into place only when every entry was written; on any
    /// error nothing is left. Returns the relative paths of the regular files
    /// written, sorted. Throws `ArchiveError`; an existing `destination` is
    /// `.write` with `EEXIST`.
    public static func extract(_ path: String, into destination: String, limits: ExtractionLimits = .init()) throws(ArchiveError) -> [String] {
        try extract(path, into: destination, limits: limits) { _ throws(ArchiveError) in () }.files
    }

    /// Extracts into a staging directory, lets `accept` inspect the sorted
    /// list of regular files (and refuse by throwing), and only then puts the
    /// staging directory at `destination`.
    static func extract<Chosen>(
        _ path: String, into destination: String, limits: ExtractionLimits,
        accept: ([String]) throws(ArchiveError) -> Chosen
    ) throws(ArchiveError) -> (files: [String], chosen: Chosen) {
        var info = stat()
        guard lstat(destination, &info) != 0 else {
            throw .write(SystemCallError(call: "mkdir", path: destination, code: EEXIST))
        }
        let reader = try ArchiveReader(path: path)
        let staging: StagingDirectory
        do { staging = try StagingDirectory(for: destination) } catch { throw .write(error) }
        var extraction = Extraction(reader: reader, staging: staging, limits: limits)
        try extraction.run()
        let files = extraction.files.sorted()
        let chosen = try accept(files)
        do { try staging.commit(syncing: extraction.directories) } catch { throw .write(error) }
        return (files, chosen)
    }
}
