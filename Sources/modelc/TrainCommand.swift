import ArgumentParsing
import BundleFormat
import ExitCodes
import Foundation
import ModelFetch
import ModelPictures
import ModelSpec
import ModelTraining
import Synchronization
import SystemIO

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
            OptionSpec(name: "report", valueName: "OUT.html", help: "Also write the report as one self-contained HTML page with charts."),
            OptionSpec(name: "json", help: "Print NDJSON: progress events, then the report."),
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
        let reportPath = arguments.value("report")
        if let reportPath, let problem = reportProblem(reportPath) {
            return Modelc.usageFailure(.invalidValue(option: "report", value: reportPath, reason: problem), usage: usage)
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
        let progress = TrainingProgress(style: json ? .json : .text)
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
        if let reportPath {
            let page = ReportPage.training(trained.report, modelPath: output, basePath: base, dataDirectory: data)
            let code = writeReport(page, to: reportPath)
            guard code == .success else { return code }
        }
        if json {
            var object = trained.report.jsonObject()
            object["event"] = "done"
            object["output"] = output
            object["bytes"] = bytes
            if let reportPath { object["report"] = reportPath }
            Output.print(jsonText(object) + "\n")
        } else {
            Output.print(trained.report.text + "\(output): written (\(byteCount(bytes)))\n")
        }
        return .success
    }

    /// Why `path` cannot take a report page (only .html), or nil.
    static func reportProblem(_ path: String) -> String? {
        guard !path.lowercased().hasSuffix(".html") else { return nil }
        let error = PictureError.unknownFormat(path: path, expected: [".html"])
        return error.description.split(separator: ": ", maxSplits: 1).last.map(String.init) ?? "expected .html"
    }

    /// Writes a report page atomically; notes and the result go to standard error.
    static func writeReport(_ page: ReportPage.Page, to path: String) -> ExitCode {
        for note in page.notes { Output.error("\(Modelc.toolName): note: \(note)\n") }
        do {
            try AtomicFile.write(Array(page.html.utf8), to: path)
        } catch {
            Output.error("\(Modelc.toolName): error: cannot write the report: \(error)\n")
            return .cannotWrite
        }
        Output.error("\(Modelc.toolName): report written to \(path)\n")
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

/// Training's progress: on standard error, what the base network gives,
/// warnings, a line per phase redrawn in place on a terminal (feature
/// extraction with images/s and ETA, iterations with loss), every tenth
/// iteration otherwise; with `--json`, NDJSON events on standard output.
final class TrainingProgress: Sendable {
    enum Style {
        case text
        case json
        /// Nothing but warnings (`evaluate --json`).
        case quiet
    }

    private let style: Style
    private let terminal: Bool
    private let drawn = Mutex(false)
    private let lastPercent = Mutex(-1)
    private let started = Mutex<ContinuousClock.Instant?>(nil)

    init(style: Style) {
        self.style = style
        terminal = isatty(STDERR_FILENO) == 1
    }

    convenience init(quiet: Bool) {
        self.init(style: quiet ? .quiet : .text)
    }

    func show(_ event: TrainingEvent) {
        if style == .json {
            emit(event)
            return
        }
        let quiet = style == .quiet
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
            guard percentChanged(percent) else { return }
            drawn.withLock { $0 = true }
            let (rate, eta) = speed(done: done, total: total)
            Output.error("\r\u{1B}[Kfeatures \(progressBar(percent: percent, width: 30)) \(done)/\(total) images"
                         + (rate.map { String(format: ", %.0f images/s", $0) } ?? "") + (eta.map { ", ETA \(clockText($0))" } ?? ""))
        case .extracted(let summary) where !quiet:
            clear()
            let rate = summary.seconds > 0 && summary.computed > 0 ? String(format: " (%.0f images/s)", Double(summary.computed) / summary.seconds) : ""
            Output.error("features: \(summary.vectors) vectors, \(summary.cacheHits) from the cache, \(summary.computed) computed, "
                         + String(format: "%.2f s", summary.seconds) + rate + "\n")
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

    /// One NDJSON line per event; extraction progress when the whole percentage changes.
    private func emit(_ event: TrainingEvent) {
        var object: [String: Any]
        switch event {
        case .warning(let text):
            Output.error("\(Modelc.toolName): warning: \(text)\n")
            object = ["event": "warning", "message": text]
        case .featureNetwork(let network):
            object = ["event": "base", "path": network.basePath, "featureOutput": network.featureName, "featureCount": network.featureCount,
                      "automatic": network.isAutomatic, "kept": network.keptLayers, "of": network.baseLayers]
        case .validationPlan(let text):
            object = ["event": "validation", "plan": text]
        case .extracting(let done, let total):
            guard percentChanged(done * 100 / max(total, 1)) else { return }
            let (rate, eta) = speed(done: done, total: total)
            object = ["event": "features", "done": done, "total": total,
                      "imagesPerSecond": rate.map { ($0 * 10).rounded() / 10 as Any } ?? NSNull(),
                      "etaSeconds": eta.map { ($0 * 10).rounded() / 10 as Any } ?? NSNull()]
        case .extracted(let summary):
            object = ["event": "featuresDone", "vectors": summary.vectors, "cacheHits": summary.cacheHits,
                      "computed": summary.computed, "seconds": summary.seconds]
        case .iteration(let iteration):
            object = ["event": "iteration", "number": iteration.number, "loss": iteration.loss,
                      "trainingAccuracy": iteration.trainingAccuracy,
                      "validationAccuracy": iteration.validationAccuracy.map { $0 as Any } ?? NSNull(),
                      "validationLoss": iteration.validationLoss.map { $0 as Any } ?? NSNull()]
        }
        Output.print(TrainCommand.jsonText(object) + "\n")
    }

    private func percentChanged(_ percent: Int) -> Bool {
        lastPercent.withLock { last in
            defer { last = percent }
            return last != percent
        }
    }

    /// Images per second since the first extraction event, and the seconds left at that rate.
    private func speed(done: Int, total: Int) -> (Double?, Double?) {
        let now = ContinuousClock.now
        let start = started.withLock { start in
            if start == nil { start = now }
            return start ?? now
        }
        let seconds = (now - start).inSeconds
        guard seconds > 0.05, done > 0 else { return (nil, nil) }
        let rate = Double(done) / seconds
        return (rate, Double(total - done) / rate)
    }

    private func clockText(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        return whole >= 3600 ? String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
            : String(format: "%d:%02d", whole / 60, whole % 60)
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
