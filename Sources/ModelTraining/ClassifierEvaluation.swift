import Dispatch
import Foundation
import ImageDecoding
import ModelFeatures
import ModelRuntime
import ModelSpec
import SystemIO

/// How well any image classifier labels a folder tree (Create ML's evaluation).
public struct ClassifierEvaluation: Sendable {
    public var report: ClassificationReport
    /// Images that could not be decoded or predicted: path and reason.
    public var skipped: [TrainingReport.Skipped]
    /// Folder labels the model does not have (their images count as wrong).
    public var unknownLabels: [String]
    /// Every image classified, in folder order (label indices into `report.labels`).
    public var predictions: [ImagePrediction] = []

    public var jsonObject: [String: Any] {
        var object = report.jsonObject
        object["skipped"] = skipped.map { ["path": $0.path, "reason": $0.reason] }
        object["unknownLabels"] = unknownLabels
        return object
    }

    /// Runs `model` (a classifier with an image input) on every image of `folders`.
    ///
    /// - Throws: `TrainingError.model` when the model is not an image classifier.
    public static func evaluate(_ model: Model, folders: LabelledImageFolders,
                                progress: @Sendable (Int, Int) -> Void = { _, _ in }) throws(TrainingError) -> ClassifierEvaluation {
        let summary = model.summary
        guard let labelOutput = summary.predictedFeatureName, !model.classLabels.isEmpty || summary.classLabels != nil else {
            throw .model(path: model.path, reason: "not a classifier (it names no predicted label output)")
        }
        guard let input = summary.inputs.first(where: { if case .image = $0.type { true } else { false } }),
              case .image(let imageType) = input.type else {
            throw .model(path: model.path, reason: "the classifier has no image input")
        }
        let modelLabels: [String] = switch summary.classLabels {
        case .strings(let labels)?: labels
        case .int64s(let labels)?: labels.map(String.init)
        case nil: []
        }
        var labels = folders.labels
        for label in modelLabels where !labels.contains(label) { labels.append(label) }
        let unknown = folders.labels.filter { !modelLabels.contains($0) }

        let jobs: [(path: String, label: Int)] = folders.files.enumerated().flatMap { label, files in files.map { ($0, label) } }
        let decoder = ImageDecoder(pixelFormat: imageType.space.isGrayscale ? .gray : .rgb)
        let fitting = ImageFitting(width: Int(imageType.width), height: Int(imageType.height), cropAndScale: .centerCrop)
        let probabilitiesOutput = summary.predictedProbabilitiesName
        let outcomes = Locked([Result<(label: String, confidence: Double?), FeatureExtractor.ImageFailure>?](repeating: nil, count: jobs.count))
        let next = Locked(0), finished = Locked(0)
        DispatchQueue.concurrentPerform(iterations: max(1, min(model.configuration.threads, jobs.count))) { _ in
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < jobs.count else { return }
                let outcome: Result<(label: String, confidence: Double?), FeatureExtractor.ImageFailure>
                do {
                    let image = try decoder.decode(file: jobs[index].path, fitting: fitting)
                    let outputs = try model.prediction(from: [input.name: .image(image)])
                    let probabilities = probabilitiesOutput.flatMap { outputs[$0]?.dictionaryValue }
                    switch outputs[labelOutput] {
                    case .string(let text)?:
                        let confidence: Double? = if case .strings(let values)? = probabilities { values[text] } else { nil }
                        outcome = .success((text, confidence))
                    case .int64(let number)?:
                        let confidence: Double? = if case .int64s(let values)? = probabilities { values[number] } else { nil }
                        outcome = .success((String(number), confidence))
                    default: outcome = .failure(.init(reason: "no \"\(labelOutput)\" output"))
                    }
                } catch let error as ImageError {
                    outcome = .failure(.init(reason: FeatureExtractor.reason(error)))
                } catch {
                    outcome = .failure(.init(reason: "\(error)"))
                }
                outcomes.withLock { $0[index] = outcome }
                let done = finished.withLock { value -> Int in
                    value += 1
                    return value
                }
                progress(done, jobs.count)
            }
        }
        var actual: [Int] = [], predicted: [Int] = []
        var skipped: [TrainingReport.Skipped] = []
        var predictions: [ImagePrediction] = []
        for (job, outcome) in zip(jobs, outcomes.withLock { $0 }) {
            switch outcome {
            case .success(let result)?:
                actual.append(job.label)
                if let index = labels.firstIndex(of: result.label) {
                    predicted.append(index)
                } else {
                    labels.append(result.label)
                    predicted.append(labels.count - 1)
                }
                predictions.append(ImagePrediction(path: job.path, actual: job.label, predicted: predicted[predicted.count - 1],
                                                   confidence: result.confidence))
            case .failure(let failure)?:
                skipped.append(.init(path: job.path, reason: failure.reason))
            case nil:
                skipped.append(.init(path: job.path, reason: "not processed"))
            }
        }
        return ClassifierEvaluation(report: ClassificationReport(labels: labels, actual: actual, predicted: predicted),
                                    skipped: skipped, unknownLabels: unknown, predictions: predictions)
    }
}
