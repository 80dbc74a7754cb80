import Foundation

/// A directory with one folder per label, the folder's name being the label,
/// and the image files in each (hidden files and subfolders are ignored).
public struct LabelledImageFolders: Sendable, Equatable {
    public let directory: String
    /// Label names, sorted by their UTF-8 bytes.
    public let labels: [String]
    /// Per label, the paths of its files, sorted by their UTF-8 bytes.
    public let files: [[String]]

    public init(directory: String, labels: [String], files: [[String]]) {
        self.directory = directory
        self.labels = labels
        self.files = files
    }

    /// The fewest images per label training accepts.
    public static let minimumImagesPerLabel = 10
    /// Labels are called unbalanced above this ratio of the largest to the smallest.
    public static let imbalanceRatio = 2.0

    /// Lists `directory`.
    ///
    /// - Throws: `TrainingError.unreadableDirectory` when it cannot be listed.
    public static func scan(_ directory: String) throws(TrainingError) -> LabelledImageFolders {
        let manager = FileManager.default
        let names: [String]
        do {
            names = try manager.contentsOfDirectory(atPath: directory)
        } catch {
            var isDirectory: ObjCBool = false
            let reason = !manager.fileExists(atPath: directory, isDirectory: &isDirectory) ? "no such directory"
                : !isDirectory.boolValue ? "not a directory" : "permission denied"
            throw .unreadableDirectory(path: directory, reason: reason)
        }
        var labels: [String] = []
        var files: [[String]] = []
        for name in names.sorted(by: utf8Order) where !name.hasPrefix(".") {
            let folder = directory + "/" + name
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
            guard let entries = try? manager.contentsOfDirectory(atPath: folder) else {
                throw .unreadableDirectory(path: folder, reason: "permission denied")
            }
            let images = entries.sorted(by: utf8Order).filter { entry in
                var isDirectory: ObjCBool = false
                return !entry.hasPrefix(".") && manager.fileExists(atPath: folder + "/" + entry, isDirectory: &isDirectory) && !isDirectory.boolValue
            }
            labels.append(name)
            files.append(images.map { folder + "/" + $0 })
        }
        return LabelledImageFolders(directory: directory, labels: labels, files: files)
    }

    /// How many files each label has.
    public var counts: [TrainingError.LabelCount] {
        zip(labels, files).map { TrainingError.LabelCount(label: $0, count: $1.count) }
    }

    /// The checks training makes before any work: at least two labels with
    /// files, and at least `minimum` files in each.
    ///
    /// - Throws: `TrainingError.tooFewLabels` or `.tooFewImages` naming the folders.
    public func checkForTraining(minimum: Int = minimumImagesPerLabel) throws(TrainingError) {
        let nonEmpty = counts.filter { $0.count > 0 }
        guard nonEmpty.count >= 2 else {
            throw .tooFewLabels(directory: directory, labels: nonEmpty.map(\.label))
        }
        let short = counts.filter { $0.count < minimum }
        guard short.isEmpty else { throw .tooFewImages(minimum: minimum, folders: short) }
    }

    /// The same folders without the files in `skipped`.
    public func removing(_ skipped: Set<String>) -> LabelledImageFolders {
        LabelledImageFolders(directory: directory, labels: labels, files: files.map { $0.filter { !skipped.contains($0) } })
    }

    /// The largest and the smallest label when their ratio is over `imbalanceRatio`.
    public var imbalance: Imbalance? {
        guard let largest = counts.max(by: { $0.count < $1.count }),
              let smallest = counts.min(by: { $0.count < $1.count }), smallest.count > 0 else { return nil }
        let ratio = Double(largest.count) / Double(smallest.count)
        return ratio > Self.imbalanceRatio ? Imbalance(largest: largest, smallest: smallest, ratio: ratio) : nil
    }

    /// Unbalanced labels: the largest has `ratio` times the images of the smallest.
    public struct Imbalance: Sendable, Equatable, CustomStringConvertible {
        public var largest: TrainingError.LabelCount
        public var smallest: TrainingError.LabelCount
        public var ratio: Double

        public var description: String {
            "labels are unbalanced: \"\(largest.label)\" has \(largest.count) images, \"\(smallest.label)\" \(smallest.count) "
                + "(\(String(format: "%.1f", ratio))×); the classifier will favour the larger labels"
        }
    }
}

/// Byte order of UTF-8: the same on every machine and locale.
func utf8Order(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
