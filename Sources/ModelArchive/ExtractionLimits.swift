/// Bounds on what extracting one archive may write, so a hostile or broken
/// archive (a "zip bomb") is refused before it fills the disk.
public struct ExtractionLimits: Sendable, Equatable {
    /// The most bytes written for all entries together (after decompression).
    public var maximumTotalBytes: UInt64
    /// The most entries (files, directories, links) the archive may hold.
    public var maximumEntries: Int
    /// The highest ratio of bytes written to archive bytes read so far,
    /// checked continuously once the first MiB has been written.
    public var maximumCompressionRatio: Double

    /// Limits with the given values; the defaults are 8 GiB, 100,000 entries
    /// and a ratio of 200.
    public init(maximumTotalBytes: UInt64 = 8 << 30, maximumEntries: Int = 100_000, maximumCompressionRatio: Double = 200) {
        self.maximumTotalBytes = maximumTotalBytes
        self.maximumEntries = maximumEntries
        self.maximumCompressionRatio = maximumCompressionRatio
    }
}
