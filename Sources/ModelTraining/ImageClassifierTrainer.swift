import Dispatch
import Foundation

/// How to train an image classifier.
public struct TrainingOptions: Sendable {
    /// Where validation images come from.
    public enum Validation: Sendable, Equatable {
        /// A seeded, per-label fraction of the training folders.
        case split(Double)
        /// Another labelled folder tree.
        case directory(String)
    }

    public var basePath: String
    /// The base output to cut at; `nil` finds the input of the final classification layers.
    public var featureOutput: String?
    public var validation: Validation
    public var maxIterations: Int
    /// λ of the penalty `λ/2 · ‖W‖²` on the mean cross-entropy.
    public var l2: Double
    public var augmentations: [Augmentation]
    public var seed: UInt64
    public var author: String
    public var shortDescription: String
    public var version: String
    /// The cache root (`$MODELC_CACHE`); `nil` caches no features.
    public var cacheRoot: String?
    public var threads: Int

    public static let defaultValidationSplit = 0.1
    public static let defaultMaxIterations = 100
    public static let defaultL2 = 0.001

    public init(basePath: String, featureOutput: String? = nil, validation: Validation = .split(defaultValidationSplit),
                maxIterations: Int = defaultMaxIterations, l2: Double = defaultL2, augmentations: [Augmentation] = [],
                seed: UInt64 = 0, author: String = "", shortDescription: String = "", version: String = "",
                cacheRoot: String? = nil, threads: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.basePath = basePath
        self.featureOutput = featureOutput
        self.validation = validation
        self.maxIterations = maxIterations
        self.l2 = l2
        self.augmentations = augmentations
        self.seed = seed
        self.author = author
        self.shortDescription = shortDescription
        self.version = version
        self.cacheRoot = cacheRoot
        self.threads = threads
    }
}

/// What training tells while it runs.
public enum TrainingEvent: Sendable {
    /// Something a person should know (unbalanced labels, a skipped image).
    case warning(String)
    /// The base network was cut: the feature, its length, how it was found.
    case featureNetwork(FeatureNetwork)
    /// The validation images and where they come from.
    case validationPlan(String)
    /// Images whose features are done, of all.
    case extracting(done: Int, total: Int)
    case extracted(ExtractionSummary)
    case iteration(LogisticRegression.Iteration)
}

/// Counts and time of the feature extraction.
public struct ExtractionSummary: Sendable, Equatable {
    public var vectors: Int
    public var cacheHits: Int
    public var computed: Int
    public var seconds: Double
}

/// A trained classifier: the model to write and the report.
public struct TrainedImageClassifier: Sendable {
    public let network: FeatureNetwork
    public let export: ClassifierExport
    public let report: TrainingReport
    /// The feature rows fitted (augmented copies included) and validated on.
    public let trainingRows: LogisticRegression.Rows
    public let validationRows: LogisticRegression.Rows

    /// Writes the pipeline `.mlmodel` atomically, after validating it.
    public func write(to path: String) throws(TrainingError) {
        try export.write(to: path, network: network)
    }
}

/// Trains an image classifier from labelled folders by transfer learning,
/// as Create ML does: features from a fixed base network, then multinomial
/// logistic regression on them.
public enum ImageClassifierTrainer {
    /// Trains on `dataDirectory` (one folder per label).
    ///
    /// - Throws: `TrainingError`: too few labels or images (before any work),
    ///   an unusable base model or option.
    public static func train(dataDirectory: String, options: TrainingOptions,
                             events: @Sendable (TrainingEvent) -> Void = { _ in }) throws(TrainingError) -> TrainedImageClassifier {
        let folders = try LabelledImageFolders.scan(dataDirectory)
        try folders.checkForTraining()
        var validationFolders: LabelledImageFolders?
        switch options.validation {
        case .split(let fraction):
            guard fraction >= 0, fraction < 1 else {
                throw .invalidOption(name: "validation-split", reason: "\(fraction) is not in [0, 1)")
            }
        case .directory(let directory):
            let scanned = try LabelledImageFolders.scan(directory)
            for label in scanned.labels where !folders.labels.contains(label) {
                throw .invalidOption(name: "validation", reason: "\(directory)/\(label): not a label of the training data")
            }
            validationFolders = scanned
        }
        guard options.maxIterations >= 1 else { throw .invalidOption(name: "max-iterations", reason: "must be at least 1") }
        guard options.l2 >= 0, options.l2.isFinite else { throw .invalidOption(name: "l2", reason: "must be a number ≥ 0") }
        if let imbalance = folders.imbalance { events(.warning(imbalance.description)) }

        let network = try FeatureNetwork(basePath: options.basePath, featureOutput: options.featureOutput)
        events(.featureNetwork(network))

        // The jobs: training images (with their augmented copies), then validation images.
        var trainingJobs: [ImageJob] = []
        var validationJobs: [ImageJob] = []
        for (label, files) in folders.files.enumerated() {
            var order = Array(files.indices)
            var held = 0
            if case .split(let fraction) = options.validation, fraction > 0 {
                var random = SplitMix64(seed: options.seed ^ stableHash(folders.labels[label]))
                for index in stride(from: order.count - 1, to: 0, by: -1) {
                    order.swapAt(index, Int(random.next() % UInt64(index + 1)))
                }
                held = min(files.count - 1, max(1, Int((Double(files.count) * fraction).rounded())))
            }
            let validationSet = Set(order.prefix(held))
            for index in files.indices {
                if validationSet.contains(index) {
                    validationJobs.append(ImageJob(path: files[index], label: label))
                } else {
                    trainingJobs.append(ImageJob(path: files[index], label: label, augmentations: options.augmentations))
                }
            }
        }
        if let validationFolders {
            for (label, files) in zip(validationFolders.labels, validationFolders.files) {
                guard let index = folders.labels.firstIndex(of: label) else { continue }
                validationJobs += files.map { ImageJob(path: $0, label: index) }
            }
            events(.validationPlan("\(validationJobs.count) validation images from \(validationFolders.directory)"))
        } else if case .split(let fraction) = options.validation, fraction > 0 {
            events(.validationPlan("\(validationJobs.count) validation images held back from the training folders "
                                   + "(\(percent(fraction)) of each label, chosen with seed \(options.seed))"))
        } else {
            events(.validationPlan("no validation images"))
        }

        let cache = options.cacheRoot.map { FeatureCache(root: $0, network: network) }
        let extractor = FeatureExtractor(network: network, cache: cache, seed: options.seed, threads: options.threads)
        let jobs = trainingJobs + validationJobs
        let extracted = extractor.extract(jobs) { done, total in events(.extracting(done: done, total: total)) }
        events(.extracted(ExtractionSummary(vectors: extracted.cacheHits + extracted.computed, cacheHits: extracted.cacheHits,
                                            computed: extracted.computed, seconds: extracted.seconds)))
        for (path, reason) in extracted.skipped { events(.warning("\(path): skipped: \(reason)")) }

        // Without the skipped images the folders must still pass.
        try folders.removing(Set(extracted.skipped.map(\.path))).checkForTraining()

        var training = LogisticRegression.Rows(width: network.featureCount)
        var trainingOriginals = LogisticRegression.Rows(width: network.featureCount)
        var validation = LogisticRegression.Rows(width: network.featureCount)
        var trainingPaths: [String] = [], validationPaths: [String] = []
        for (index, job) in jobs.enumerated() {
            guard let vectors = extracted.vectors[index] else { continue }
            if index < trainingJobs.count {
                for vector in vectors { training.append(vector, label: job.label) }
                if let original = vectors.first {
                    trainingOriginals.append(original, label: job.label)
                    trainingPaths.append(job.path)
                }
            } else if let original = vectors.first {
                validation.append(original, label: job.label)
                validationPaths.append(job.path)
            }
        }

        let fitStart = DispatchTime.now().uptimeNanoseconds
        let regression = LogisticRegression(l2: options.l2, maxIterations: options.maxIterations)
        var history: [LogisticRegression.Iteration] = []
        let fit = regression.fit(training, classes: folders.labels.count, validation: validation.count > 0 ? validation : nil) { iteration in
            history.append(iteration)
            events(.iteration(iteration))
        }
        let fitSeconds = Double(DispatchTime.now().uptimeNanoseconds - fitStart) / 1e9

        let trainingReport = report(fit, rows: trainingOriginals, labels: folders.labels)
        let validationReport = validation.count > 0 ? report(fit, rows: validation, labels: folders.labels) : nil
        var trainingReportSummary = TrainingReport(
            labels: folders.labels, trainingImages: trainingReport.imagesPerLabel,
            validationImages: validationReport?.imagesPerLabel ?? folders.labels.map { _ in 0 },
            augmentedCopies: training.count - trainingOriginals.count,
            featureName: network.featureName, featureCount: network.featureCount, featureAutomatic: network.isAutomatic,
            training: trainingReport, validation: validationReport,
            iterations: fit.iterations, loss: fit.loss, status: fit.status,
            extraction: ExtractionSummary(vectors: extracted.cacheHits + extracted.computed, cacheHits: extracted.cacheHits,
                                          computed: extracted.computed, seconds: extracted.seconds),
            fitSeconds: fitSeconds, skipped: extracted.skipped.map { TrainingReport.Skipped(path: $0.path, reason: $0.reason) },
            warnings: folders.imbalance.map { [$0.description] } ?? [])
        trainingReportSummary.history = history
        trainingReportSummary.predictionsAreValidation = validation.count > 0
        trainingReportSummary.predictions = validation.count > 0
            ? predictions(fit, rows: validation, paths: validationPaths)
            : predictions(fit, rows: trainingOriginals, paths: trainingPaths)

        var metadata: [String: String] = [
            "trainingAccuracy": String(format: "%.4f", trainingReport.accuracy),
            "baseModel": URL(fileURLWithPath: options.basePath).lastPathComponent,
            "featureOutput": network.featureName,
            "l2": "\(options.l2)",
            "maxIterations": "\(options.maxIterations)",
            "iterations": "\(fit.iterations)",
            "seed": "\(options.seed)",
            "trainingImages": "\(trainingReport.count)",
            "trainer": "modelc train image-classifier",
        ]
        if let validationReport {
            metadata["validationAccuracy"] = String(format: "%.4f", validationReport.accuracy)
            metadata["validationImages"] = "\(validationReport.count)"
        }
        if !options.augmentations.isEmpty {
            metadata["augmentation"] = options.augmentations.map(\.rawValue).joined(separator: ",")
        }
        let export = ClassifierExport(labels: folders.labels, fit: fit, author: options.author,
                                      shortDescription: options.shortDescription.isEmpty
                                        ? "Image classifier of \(folders.labels.count) labels on \(URL(fileURLWithPath: options.basePath).lastPathComponent) features"
                                        : options.shortDescription,
                                      version: options.version, userDefined: metadata)
        return TrainedImageClassifier(network: network, export: export, report: trainingReportSummary,
                                      trainingRows: training, validationRows: validation)
    }

    static func predictions(_ fit: LogisticRegression.Fit, rows: LogisticRegression.Rows, paths: [String]) -> [ImagePrediction] {
        zip(0..<rows.count, paths).map { row, path in
            let probabilities = fit.probabilities(rows.values[(row * rows.width)..<((row + 1) * rows.width)])
            let predicted = probabilities.indices.max { probabilities[$0] < probabilities[$1] || (probabilities[$0] == probabilities[$1] && $0 > $1) } ?? 0
            return ImagePrediction(path: path, actual: rows.labels[row], predicted: predicted, confidence: probabilities[predicted])
        }
    }

    static func report(_ fit: LogisticRegression.Fit, rows: LogisticRegression.Rows, labels: [String]) -> ClassificationReport {
        let predicted = (0..<rows.count).map { row in fit.predict(rows.values[(row * rows.width)..<((row + 1) * rows.width)]) }
        return ClassificationReport(labels: labels, actual: rows.labels, predicted: predicted)
    }
}
