import SystemIO

/// Why training or evaluating could not be done.
public enum TrainingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The data directory cannot be listed.
    case unreadableDirectory(path: String, reason: String)
    /// Fewer than two label folders (with readable images).
    case tooFewLabels(directory: String, labels: [String])
    /// Label folders with fewer readable images than required: each folder with its count.
    case tooFewImages(minimum: Int, folders: [LabelCount])
    /// The base model cannot be used as a feature extractor.
    case baseModel(path: String, reason: String)
    /// The feature network failed on an image.
    case extraction(reason: String)
    /// An option value that cannot be used (a validation split outside (0, 1), …).
    case invalidOption(name: String, reason: String)
    /// The exported model failed modelc's own validation (a bug): every problem.
    case invalidExport(problems: [String])
    /// The model (to evaluate) cannot be opened or is not a classifier.
    case model(path: String, reason: String)
    /// Writing the model failed; nothing was left behind.
    case write(SystemCallError)
    /// The base is an ML program (its weights stay in a weight file) and the
    /// output path is not an `.mlpackage`.
    case outputNeedsPackage(path: String)

    /// A label folder and how many images it holds.
    public struct LabelCount: Equatable, Sendable {
        public var label: String
        public var count: Int

        public init(label: String, count: Int) {
            self.label = label
            self.count = count
        }
    }

    public var description: String {
        switch self {
        case .unreadableDirectory(let path, let reason):
            return "\(path): cannot list the directory: \(reason)"
        case .tooFewLabels(let directory, let labels):
            let found = labels.isEmpty ? "none" : labels.map { "\"\($0)\"" }.joined(separator: ", ")
            return "\(directory): at least 2 label folders with images are needed, found \(labels.count) (\(found))"
        case .tooFewImages(let minimum, let folders):
            let list = folders.map { "\"\($0.label)\" (\($0.count))" }.joined(separator: ", ")
            return "at least \(minimum) images per label are needed; too few in \(list)"
        case .baseModel(let path, let reason):
            return "\(path): cannot be the base network: \(reason)"
        case .extraction(let reason):
            return "feature extraction failed: \(reason)"
        case .invalidOption(let name, let reason):
            return "--\(name): \(reason)"
        case .invalidExport(let problems):
            return "the trained model fails validation (a bug in modelc): " + problems.joined(separator: "; ")
        case .model(let path, let reason):
            return "\(path): \(reason)"
        case .write(let error):
            return error.description
        case .outputNeedsPackage(let path):
            return "-o \(path): the base is an ML program, whose weights stay in a weight file; "
                + "the trained model must be an .mlpackage (use -o NAME.mlpackage)"
        }
    }
}
