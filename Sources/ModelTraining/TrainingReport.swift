import Foundation

/// One image as a classifier saw it: its true label, the label predicted
/// and that label's probability (label indices into the report's labels).
public struct ImagePrediction: Sendable, Equatable {
    public var path: String
    public var actual: Int
    public var predicted: Int
    /// The predicted label's probability; `nil` when the model gives none.
    public var confidence: Double?

    public init(path: String, actual: Int, predicted: Int, confidence: Double?) {
        self.path = path
        self.actual = actual
        self.predicted = predicted
        self.confidence = confidence
    }

    public var isMistake: Bool { actual != predicted }
}

/// What training did and how well the classifier does: images per label,
/// the training and validation reports, the fit and the time taken.
public struct TrainingReport: Sendable {
    public struct Skipped: Sendable, Equatable {
        public var path: String
        public var reason: String
    }

    public var labels: [String]
    /// Original training images per label (augmented copies not counted).
    public var trainingImages: [Int]
    public var validationImages: [Int]
    public var augmentedCopies: Int
    public var featureName: String
    public var featureCount: Int
    public var featureAutomatic: Bool
    /// On the original training images.
    public var training: ClassificationReport
    public var validation: ClassificationReport?
    public var iterations: Int
    public var loss: Double
    public var status: String
    public var extraction: ExtractionSummary
    public var fitSeconds: Double
    public var skipped: [Skipped]
    public var warnings: [String]
    /// Every L-BFGS iteration, in order (the charts of `--report`).
    public var history: [LogisticRegression.Iteration] = []
    /// The predictions on the validation images, or on the original training
    /// images when there are none (`predictionsAreValidation`).
    public var predictions: [ImagePrediction] = []
    public var predictionsAreValidation = false

    /// The report as a JSON-ready dictionary; `timings` leaves out the
    /// seconds (which change from run to run) when `false`.
    public func jsonObject(timings: Bool = true) -> [String: Any] {
        var object: [String: Any] = [
            "labels": labels.indices.map { index -> [String: Any] in
                ["label": labels[index], "trainingImages": trainingImages[index], "validationImages": validationImages[index]]
            },
            "augmentedCopies": augmentedCopies,
            "featureOutput": ["name": featureName, "count": featureCount, "automatic": featureAutomatic] as [String: Any],
            "trainingAccuracy": training.accuracy,
            "validationAccuracy": validation.map { $0.accuracy as Any } ?? NSNull(),
            "training": training.jsonObject,
            "validation": validation.map { $0.jsonObject as Any } ?? NSNull(),
            "fit": ["iterations": iterations, "loss": loss, "status": status] as [String: Any],
            "features": ["vectors": extraction.vectors, "cacheHits": extraction.cacheHits, "computed": extraction.computed] as [String: Any],
            "skipped": skipped.map { ["path": $0.path, "reason": $0.reason] },
            "warnings": warnings,
        ]
        if timings {
            object["seconds"] = ["featureExtraction": extraction.seconds, "fit": fitSeconds]
        }
        return object
    }

    /// The report for people.
    public var text: String {
        var lines: [String] = []
        let width = max(5, labels.map(\.count).max() ?? 0)
        lines.append("images per label (training, validation)")
        for index in labels.indices {
            lines.append("  " + labels[index].padding(toLength: width, withPad: " ", startingAt: 0)
                         + "  " + String(trainingImages[index]).leftPadded(6) + "  " + String(validationImages[index]).leftPadded(6))
        }
        if augmentedCopies > 0 { lines.append("  plus \(augmentedCopies) augmented copies for training") }
        lines.append("features: \(extraction.vectors) vectors (\(extraction.cacheHits) from the cache, \(extraction.computed) computed) in "
                     + String(format: "%.2f s", extraction.seconds))
        lines.append("fit: \(iterations) iterations, loss \(String(format: "%.5f", loss)), \(status), " + String(format: "%.2f s", fitSeconds))
        return lines.joined(separator: "\n") + "\n" + training.text(title: "training")
            + (validation.map { $0.text(title: "validation") } ?? "validation: none\n")
    }
}
