import ArgumentParsing
import BundleFormat
import Foundation
import ModelFetch
import ModelSpec
import ModelTraining
import Synchronization

/// `modelc train image-classifier DATA_DIR --base MODEL -o OUT.mlmodel [options]`.
enum TrainCommand {
    static let spec = CommandSpec(
        name: "train",
        abstract: "Train an image classifier from labelled folders (transfer learning, as Create ML does).",
        discussion: """
            KIND is image-classifier. DATA_DIR holds one folder per label, named by the label, with at
            least 10 images each. The base network (an image model modelc runs) is cut at the feature
            output (--feature-output, by default the input of its final classification layers); each
            image's feature vector is computed once and cached by content in $MODELC_CACHE/features.
            A multinomial logistic regression with L2 (objective: mean cross-entropy + λ/2·‖W‖²) is
            fitted by L-BFGS. OUT.mlmodel is a pipeline classifier (the cut network, then a GLM
            classifier with the folder names as labels), written atomically; the same data, options
            and seed give the same bytes. With an ML-program base the output must be an .mlpackage
            (the cut program's weights stay in weights/weight.bin). Without --validation, --validation-split of each label's
            images (default 0.1, chosen with the seed) is held back for validation.
            Augmentation kinds: flip, crop, rotate, blur, exposure, noise (each adds a copy of every
            training image).
            """,
        arguments: [PositionalSpec(name: "KIND", help: "What to train: image-classifier."),
                    PositionalSpec(name: "DATA_DIR", help: "One folder of images per label.")],
        options: [
            OptionSpec(name: "base", valueName: "MODEL", help: "The base network: an .mlmodel, .mlpackage or bundle with an image input."),
            OptionSpec(name: "output", short: "o", valueName: "OUT.mlmodel", help: "Where to write the trained model (.mlpackage for an ML-program base)."),
            OptionSpec(name: "feature-output", valueName: "NAME", help: "The base's value to use as the feature vector."),
            OptionSpec(name: "validation", valueName: "DIR", help: "Validation images: one folder per label."),
            OptionSpec(name: "validation-split", valueName: "F", help: "Fraction of each label held back for validation (default 0.1)."),
            OptionSpec(name: "max-iterations", valueName: "N", help: "L-BFGS iterations at most (default 100)."),
            OptionSpec(name: "l2", valueName: "λ", help: "L2 penalty (default 0.001)."),
            OptionSpec(name: "augment", valueName: "KINDS", help: "Comma-separated augmentation kinds."),
            OptionSpec(name: "seed", valueName: "N", help: "Seed of the validation split and augmentation (default 0)."),
            OptionSpec(name: "author", valueName: "TEXT", help: "The model's author (metadata)."),
            OptionSpec(name: "description", valueName: "TEXT", help: "The model's description (metadata)."),
            OptionSpec(name: "version", valueName: "TEXT", help: "The model's version (metadata)."),
            OptionSpec(name: "threads", valueName: "N", help: "Threads for feature extraction (default: every core)."),
            OptionSpec(name: "json", help: "Print the report as JSON."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let kind = arguments[positional: "KIND"], let data = arguments[positional: "DATA_DIR"] else { return .usage }
        let usage = Modelc.usageLine(for: spec)
        guard kind == "image-classifier" else {
            return Modelc.usageFailure(.invalidArgument(name: "KIND", value: kind, reason: "expected image-classifier"), usage: usage)
        }
        guard let base = arguments.value("base") else {
            return Modelc.usageFailure(.missingArgument(name: "--base MODEL", command: "train"), usage: usage)
        }
        guard let output = arguments.value("output") else {
            return Modelc.usageFailure(.missingArgument(name: "-o OUT.mlmodel", command: "train"), usage: usage)
        }
        // An ML program's weights stay in its weight file: refused before any work.
        if !output.hasSuffix(".mlpackage"), baseIsProgram(base) {
            return failure(.outputNeedsPackage(path: output))
        }
        var options = TrainingOptions(basePath: base, cacheRoot: FetchCache.defaultRoot())
        options.featureOutput = arguments.value("feature-output")
        if arguments.value("validation") != nil, arguments.value("validation-split") != nil {
            return Modelc.usageFailure(.conflictingOptions("validation", "validation-split"), usage: usage)
        }
        if let directory = arguments.value("validation") { options.validation = .directory(directory) }
        if let text = arguments.value("validation-split") {
            guard let fraction = Double(text), fraction >= 0, fraction < 1 else {
                return Modelc.usageFailure(.invalidValue(option: "validation-split", value: text, reason: "expected a number in [0, 1)"), usage: usage)
            }
            options.validation = .split(fraction)
        }
        if let text = arguments.value("max-iterations") {
            guard let value = Int(text), value >= 1 else {
                return Modelc.usageFailure(.invalidValue(option: "max-iterations", value: text, reason: "expected a positive integer"), usage: usage)
            }
            options.maxIterations = value
        }
        if let text = arguments.value("l2") {
            guard let value = Double(text), value >= 0, value.isFinite else {
                return Modelc.usageFailure(.invalidValue(option: "l2", value: text, reason: "expected a number ≥ 0"), usage: usage)
            }
            options.l2 = value
        }
        if let text = arguments.value("augment") {
            do throws(TrainingError) {
                options.augmentations = try Augmentation.parse(text)
            } catch {
                return Modelc.usageFailure(.invalidValue(option: "augment", value: text,
                                                         reason: "expected some of \(Augmentation.allCases.map(\.rawValue).joined(separator: ","))"), usage: usage)
            }
        }
        if let text = arguments.value("seed") {
            guard let value = UInt64(text) else {
                return Modelc.usageFailure(.invalidValue(option: "seed", value: text, reason: "expected a non-negative integer"), usage: usage)
            }
            options.seed = value
        }
        if let text = arguments.value("threads") {
            guard let value = Int(text), value >= 1 else {
                return Modelc.usageFailure(.invalidValue(option: "threads", value: text, reason: "expected a positive integer"), usage: usage)
            }
            options.threads = value
        }
        options.author = arguments.value("author") ?? ""
        options.shortDescription = arguments.value("description") ?? ""
        options.version = arguments.value("version") ?? ""

        let json = arguments.has("json")
        let progress = TrainingProgress(quiet: json)
        let trained: TrainedImageClassifier
        do throws(TrainingError) {
            trained = try ImageClassifierTrainer.train(dataDirectory: data, options: options) { event in progress.show(event) }
            progress.finish()
            try trained.write(to: output)
        } catch {
            progress.finish()
            return failure(error)
        }
        let bytes = writtenSize(output)
        if json {
            var object = trained.report.jsonObject()
            object["output"] = output
            object["bytes"] = bytes
            Output.print(jsonText(object) + "\n")
        } else {
            Output.print(trained.report.text + "\(output): written (\(byteCount(bytes)))\n")
        }
        return .success
    }

    /// Whether the base (a model file, package or bundle) is an ML program;
    /// `false` when it cannot be read (training then says why).
    static func baseIsProgram(_ path: String) -> Bool {
        let file: ModelFile
        if FileManager.default.fileExists(atPath: path + "/manifest.json") {
            guard let contents = try? BundleContents.open(path) else { return false }
            file = ModelFile(unpacked: contents.specification, path: path)
        } else {
            guard let opened = try? ModelFile.open(path) else { return false }
            file = opened
        }
        return ModelSummary(file).modelType == "mlProgram"
    }

    /// The size of a written file, or of every file in a written package.
    static func writtenSize(_ path: String) -> Int {
        let size = { (path: String) in (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue,
              let files = try? FileManager.default.subpathsOfDirectory(atPath: path) else { return size(path) }
        return files.reduce(0) { total, file in
            var isDirectory: ObjCBool = false
            let full = path + "/" + file
            return FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) && !isDirectory.boolValue ? total + size(full) : total
        }
    }

    static func failure(_ error: TrainingError) -> ExitCode {
        Output.error("\(Modelc.toolName): error: \(error)\n")
        return ExitCode(error)
    }

    static func jsonText(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Training's progress on standard error: what the base network gives,
/// warnings, a bar while features are computed (terminals only), and a line
/// per iteration (redrawn on a terminal, every tenth otherwise).
final class TrainingProgress: Sendable {
    private let quiet: Bool
    private let terminal: Bool
    private let drawn = Mutex(false)
    private let lastPercent = Mutex(-1)

    init(quiet: Bool) {
        self.quiet = quiet
        terminal = isatty(STDERR_FILENO) == 1
    }

    func show(_ event: TrainingEvent) {
        switch event {
        case .warning(let text):
            clear()
            Output.error("\(Modelc.toolName): warning: \(text)\n")
        case .featureNetwork(let network) where !quiet:
            let found = network.consumer.map { ", found automatically: the input of \($0)" } ?? (network.isAutomatic ? "" : ", as given")
            Output.error("base: \(network.basePath) cut at \"\(network.featureName)\" (\(network.featureCount) values\(found)); "
                         + "\(network.keptLayers) of \(network.baseLayers) \(network.unitName) kept\n")
        case .validationPlan(let text) where !quiet:
            Output.error("validation: \(text)\n")
        case .extracting(let done, let total) where !quiet && terminal:
            let percent = done * 100 / max(total, 1)
            let changed = lastPercent.withLock { last in
                defer { last = percent }
                return last != percent
            }
            guard changed else { return }
            drawn.withLock { $0 = true }
            Output.error("\rfeatures \(progressBar(percent: percent, width: 30)) \(done)/\(total)")
        case .extracted(let summary) where !quiet:
            clear()
            Output.error("features: \(summary.vectors) vectors, \(summary.cacheHits) from the cache, \(summary.computed) computed, "
                         + String(format: "%.2f s", summary.seconds) + "\n")
        case .iteration(let iteration) where !quiet:
            let validation = iteration.validationAccuracy.map { ", validation \(String(format: "%.1f%%", $0 * 100))" } ?? ""
            let line = "iteration \(iteration.number): loss \(String(format: "%.5f", iteration.loss)), "
                + "training \(String(format: "%.1f%%", iteration.trainingAccuracy * 100))\(validation)"
            if terminal {
                drawn.withLock { $0 = true }
                Output.error("\r\u{1B}[K" + line)
            } else if iteration.number == 1 || iteration.number % 10 == 0 {
                Output.error(line + "\n")
            }
        default:
            break
        }
    }

    /// Erases a line drawn in place.
    func clear() {
        let wasDrawn = drawn.withLock { value in
            defer { value = false }
            return value
        }
        if wasDrawn { Output.error("\r\u{1B}[K") }
    }

    /// Ends a line drawn in place (the last iteration stays visible).
    func finish() {
        let wasDrawn = drawn.withLock { value in
            defer { value = false }
            return value
        }
        if wasDrawn { Output.error("\n") }
    }
}
