import Foundation

/// How well a classifier labels a set of images: accuracy, per-label
/// precision and recall, and the confusion matrix (rows: the true label,
/// columns: the predicted one).
public struct ClassificationReport: Sendable, Equatable {
    public var labels: [String]
    /// `confusion[actual][predicted]`.
    public var confusion: [[Int]]

    /// A report over `labels` from true and predicted label indices.
    public init(labels: [String], actual: [Int], predicted: [Int]) {
        self.labels = labels
        var confusion = Array(repeating: Array(repeating: 0, count: labels.count), count: labels.count)
        for (truth, guess) in zip(actual, predicted) { confusion[truth][guess] += 1 }
        self.confusion = confusion
    }

    public var count: Int { confusion.reduce(0) { $0 + $1.reduce(0, +) } }

    /// Images of each true label.
    public var imagesPerLabel: [Int] { confusion.map { $0.reduce(0, +) } }

    /// The fraction labelled correctly (0 for no images).
    public var accuracy: Double {
        let correct = labels.indices.reduce(0) { $0 + confusion[$1][$1] }
        return count == 0 ? 0 : Double(correct) / Double(count)
    }

    /// Of the images predicted as each label, the fraction that are; `nil` when none was predicted so.
    public var precision: [Double?] {
        labels.indices.map { label in
            let predicted = confusion.reduce(0) { $0 + $1[label] }
            return predicted == 0 ? nil : Double(confusion[label][label]) / Double(predicted)
        }
    }

    /// Of the images of each label, the fraction predicted so; `nil` for a label with no images.
    public var recall: [Double?] {
        labels.indices.map { label in
            let actual = confusion[label].reduce(0, +)
            return actual == 0 ? nil : Double(confusion[label][label]) / Double(actual)
        }
    }

    /// The report as a JSON-ready dictionary.
    public var jsonObject: [String: Any] {
        [
            "images": count,
            "accuracy": accuracy,
            "labels": labels.indices.map { index -> [String: Any] in
                ["label": labels[index], "images": imagesPerLabel[index],
                 "precision": precision[index] as Any? ?? NSNull(), "recall": recall[index] as Any? ?? NSNull()]
            },
            "confusionMatrix": ["labels": labels, "rows": confusion] as [String: Any],
        ]
    }

    /// The report for people: the accuracy, a table of labels, the confusion matrix.
    public func text(title: String) -> String {
        var lines = ["\(title): \(percent(accuracy)) accuracy on \(count) images"]
        let width = max(5, labels.map(\.count).max() ?? 0)
        lines.append("  " + "label".padding(toLength: width, withPad: " ", startingAt: 0) + "  images  precision  recall")
        for index in labels.indices {
            let name = labels[index].padding(toLength: width, withPad: " ", startingAt: 0)
            let images = String(imagesPerLabel[index]).leftPadded(6)
            let precisionText = (precision[index].map(percent) ?? "-").leftPadded(9)
            let recallText = (recall[index].map(percent) ?? "-").leftPadded(6)
            lines.append("  \(name)  \(images)  \(precisionText)  \(recallText)")
        }
        lines.append("  confusion matrix (rows: true label, columns: predicted)")
        let cell = max(width, confusion.flatMap { $0 }.map { String($0).count }.max() ?? 1)
        lines.append("  " + "".padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                     + labels.map { $0.leftPadded(cell) }.joined(separator: " "))
        for index in labels.indices {
            lines.append("  " + labels[index].padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                         + confusion[index].map { String($0).leftPadded(cell) }.joined(separator: " "))
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// "97.5%".
func percent(_ value: Double) -> String {
    String(format: "%.1f%%", value * 100)
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
