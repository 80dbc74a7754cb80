import ArgumentParsing
import Dispatch
import ExitCodes
import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures
import ModelRuntime
import SystemIO

/// `modelc classify MODEL IMAGE... [--crop-and-scale MODE] [--roi X,Y,W,H] [--top K]
/// [--label NAME] [--min-confidence C] [--json] [--threads N] [--regions faces] [--draw DIR]`.
enum ClassifyCommand {
    static let spec = CommandSpec(
        name: "classify",
        abstract: "Run an image model on image files as Vision does, and print its observations.",
        discussion: """
            MODEL is a compiled bundle, or an .mlmodel/.mlpackage compiled on the fly (as predict). Each
            IMAGE is a file, or a directory walked for images (.jpg .jpeg .png .webp .tif .tiff .gif
            .heic .heif). Images are turned upright (EXIF), cut to --roi, cropped and scaled to the
            model's image input (--crop-and-scale, default center-crop) and decoded in parallel.
            Classifiers print their top K labels by confidence; other models print each output.
            --json prints one line per image: {"image", "observations": [{"identifier",
            "confidence"}…]} for classifiers (every label unless --top is given),
            {"image", "observations": [{"featureName", "featureValue"}…]} otherwise,
            {"image", "label", "confidence"} with --label, and {"image", "error"} for an image
            that failed; the other images go on.
            --regions faces finds the faces first (dlib's frontal face detector, as detect --faces;
            --roi then limits the search) and runs the model on each face's box as its region of
            interest, printing per face its box and the model's labels: Vision's face → classifier
            pipeline. --json lines hold "faces": [{"confidence", "boundingBox", "pixels", "roll",
            "yaw", "observations"}]. --draw DIR writes each image with the faces boxed and labelled;
            without --regions, a segmentation output (classes × height × width scores, or a map of
            classes) drawn as a colour mask over the image. --output-dir DIR writes a model's image
            outputs as PNG files, IMAGE-OUTPUT.png.
            """,
        arguments: [PositionalSpec(name: "MODEL", help: "A compiled bundle, .mlmodel or .mlpackage."),
                    PositionalSpec(name: "IMAGE", help: "Image files or directories of them.", isRepeated: true)],
        options: [
            OptionSpec(name: "crop-and-scale", valueName: "MODE", help: "center-crop (default), scale-fit or scale-fill."),
            OptionSpec(name: "roi", valueName: "X,Y,W,H", help: "Region of interest, normalized, origin at the lower left."),
            OptionSpec(name: "top", valueName: "K", help: "Classifiers: how many labels to show (default 5)."),
            OptionSpec(name: "label", valueName: "NAME", help: "Classifiers: print only this label's confidence."),
            OptionSpec(name: "min-confidence", valueName: "C", help: "Classifiers: leave out labels below C (0…1)."),
            OptionSpec(name: "json", help: "One JSON object per image."),
            OptionSpec(name: "threads", valueName: "N", help: "Images worked on at once (default: every core)."),
            OptionSpec(name: "regions", valueName: "KIND", help: "faces: run the model on each face found."),
            OptionSpec(name: "draw", valueName: "DIR", help: "Write each image with its faces (or segmentation mask) drawn into DIR."),
            OptionSpec(name: "output-dir", valueName: "DIR", help: "Write the model's image outputs into DIR as PNG."),
        ])

    /// What the options ask for.
    struct Options {
        var cropAndScale = CropAndScale.centerCrop
        var regionOfInterest = NormalizedRect.full
        var top: Int?
        var label: String?
        var minimumConfidence: Float = 0
        var json = false
        var threads = ProcessInfo.processInfo.activeProcessorCount
        /// `--regions faces`: classify each face instead of the image.
        var faceRegions = false
        var drawDirectory: String?
        var outputDirectory: String?
    }

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "MODEL"] else { return .usage }
        let options: Options
        switch parseOptions(arguments) {
        case .success(let parsed): options = parsed
        case .failure(let error): return Modelc.usageFailure(error, usage: Modelc.usageLine(for: spec))
        }
        let images = ImageFiles.expand(arguments.repeatedPositionals)

        // Predictions run one image per thread; each runs single-threaded.
        let model: Model
        switch PredictCommand.open(path, configuration: ModelConfiguration(threads: 1)) {
        case .opened(let opened): model = opened
        case .failed(let code): return code
        }
        let request: ImageRequest
        do throws(ImageRequestError) {
            let wrapped = try ImageModel(model: model, name: path)
            request = ImageRequest(model: wrapped, cropAndScale: options.cropAndScale,
                                   regionOfInterest: options.regionOfInterest)
            if let label = options.label {
                guard wrapped.labels.contains(label) else {
                    throw .unknownLabel(label: label, model: path, labels: wrapped.labels)
                }
            }
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return ExitCode(error)
        }
        if images.isEmpty {
            Output.error("\(Modelc.toolName): error: no images found in \(arguments.repeatedPositionals.joined(separator: ", "))\n")
            return .cannotRead
        }

        let report = ClassificationReport(options: options, labels: PredictionReport(model: model, top: options.top ?? 5))
        if options.faceRegions {
            return classifyFaces(images: images, request: request, options: options, report: report)
        }
        for directory in [options.drawDirectory, options.outputDirectory].compactMap({ $0 }) {
            if let problem = ImageOptions.prepareDirectory(directory) {
                Output.error("\(Modelc.toolName): error: \(problem)\n")
                return .cannotWrite
            }
        }
        // Images are decoded and run in parallel and printed in order, each as
        // soon as it and those before it are done.
        return ImageBatch.run(images, threads: options.threads, json: options.json, label: "classifying") { path throws(ImageRequestError) in
            let result = try ImageRequestHandler(file: path).perform(request)
            try ImageBatch.writeFiles(result, image: path, draw: options.drawDirectory, outputs: options.outputDirectory)
            return result
        } text: { path, found in
            report.text(image: path, found)
        }
    }

    /// `--regions faces`: the model on each face of each image.
    static func classifyFaces(images: [ImageFiles.Entry], request: ImageRequest, options: Options,
                              report: ClassificationReport) -> ExitCode {
        if let directory = options.drawDirectory, let problem = ImageOptions.prepareDirectory(directory) {
            Output.error("\(Modelc.toolName): error: \(problem)\n")
            return .cannotWrite
        }
        let faces = FaceRectanglesRequest(regionOfInterest: options.regionOfInterest)
        var whole = request
        whole.regionOfInterest = .full
        let classify = whole
        var detectOptions = DetectCommand.Options()
        detectOptions.json = options.json
        detectOptions.threads = options.threads
        return DetectCommand.eachImage(images, options: detectOptions, label: "classifying faces") { path throws(ImageRequestError) in
            let found = try FacesFound.find(in: path, request: faces, minimumConfidence: 0, classify: classify)
            if let directory = options.drawDirectory { try found.drawn(image: path, into: directory) }
            return found.text(image: path, json: options.json, top: options.top, report: report)
        }
    }

    private static func parseOptions(_ arguments: ParsedArguments) -> Result<Options, UsageError> {
        var options = Options()
        options.json = arguments.has("json")
        options.label = arguments.value("label")
        do throws(UsageError) {
            options.cropAndScale = try ImageOptions.cropAndScale(arguments)
            options.regionOfInterest = try ImageOptions.regionOfInterest(arguments)
            options.top = try arguments.positiveInteger("top")
            options.threads = try arguments.positiveInteger("threads") ?? options.threads
            options.minimumConfidence = Float(try ImageOptions.unitInterval(arguments, "min-confidence") ?? 0)
            if let regions = arguments.value("regions") {
                guard regions == "faces" else {
                    throw UsageError.invalidValue(option: "regions", value: regions, reason: "expected faces")
                }
                options.faceRegions = true
            }
            options.drawDirectory = arguments.value("draw")
            options.outputDirectory = arguments.value("output-dir")
        } catch {
            return .failure(error)
        }
        return .success(options)
    }
}

/// How `modelc classify` shows what it found in one image.
struct ClassificationReport {
    let options: ClassifyCommand.Options
    /// Shows outputs that are not classifications.
    let labels: PredictionReport

    func text(image: String, _ result: ImageRequestResult) -> String {
        if case .recognizedObjects = result.observations {
            return DetectionReport(json: options.json, values: labels).text(image: image, result)
        }
        return options.json ? json(image: image, result) + "\n" : plain(image: image, result)
    }

    /// The classifications shown: above the minimum confidence, the top K.
    private func shown(_ result: ImageRequestResult, defaultTop: Int?) -> [ClassificationObservation] {
        let kept = result.classifications.filter { $0.confidence >= options.minimumConfidence }
        guard let top = options.top ?? defaultTop else { return kept }
        return Array(kept.prefix(top))
    }

    private func json(image: String, _ result: ImageRequestResult) -> String {
        let name = FeatureJSON.quoted(image)
        if let label = options.label {
            let confidence = (try? result.confidence(of: label)) ?? .nan
            return "{\"image\": \(name), \"label\": \(FeatureJSON.quoted(label)), \"confidence\": \(number(confidence))}"
        }
        let observations: [String] = switch result.observations {
        case .classifications, .recognizedObjects:
            shown(result, defaultTop: nil).map {
                "{\"identifier\": \(FeatureJSON.quoted($0.identifier)), \"confidence\": \(number($0.confidence))}"
            }
        case .featureValues(let values):
            values.map {
                "{\"featureName\": \(FeatureJSON.quoted($0.featureName)), \"featureValue\": \(FeatureJSON.text($0.featureValue))}"
            }
        }
        return "{\"image\": \(name), \"observations\": [\(observations.joined(separator: ", "))]}"
    }

    private func plain(image: String, _ result: ImageRequestResult) -> String {
        if let label = options.label {
            let confidence = (try? result.confidence(of: label)) ?? .nan
            return "\(image): \(label) \(String(format: "%.4f", confidence))\n"
        }
        var lines = [image]
        switch result.observations {
        case .classifications, .recognizedObjects:
            for observation in shown(result, defaultTop: 5) {
                lines.append("  " + String(format: "%.4f", observation.confidence) + "  " + observation.identifier)
            }
        case .featureValues(let values):
            for value in values {
                lines.append("  \(value.featureName) (\(labels.describe(value.featureValue))): \(labels.abbreviated(value.featureValue))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A confidence as JSON: its shortest decimal form; `null` when not finite.
    private func number(_ value: Float) -> String {
        value.isFinite ? "\(value)" : "null"
    }
}

/// The image files named on the command line, directories walked.
enum ImageFiles {
    static let extensions: Set<String> = ["jpg", "jpeg", "png", "webp", "tif", "tiff", "gif", "heic", "heif"]

    /// A file to classify, or a path that cannot be one (reported in order with the results).
    struct Entry: Sendable {
        var path: String
        var problem: ImageError?
    }

    /// Files as given; directories replaced by the image files under them, sorted.
    static func expand(_ paths: [String]) -> [Entry] {
        var entries: [Entry] = []
        let manager = FileManager.default
        for path in paths {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
                entries.append(Entry(path: path, problem: .unreadable(file: path, reason: "no such file or directory")))
                continue
            }
            guard isDirectory.boolValue else {
                entries.append(Entry(path: path))
                continue
            }
            let base = path.hasSuffix("/") ? String(path.dropLast()) : path
            let found = (manager.enumerator(atPath: path)?.allObjects as? [String] ?? [])
                .filter { extensions.contains(($0 as NSString).pathExtension.lowercased()) }
                .sorted()
            entries += found.map { Entry(path: base + "/" + $0) }
        }
        return entries
    }
}
