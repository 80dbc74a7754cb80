import ArgumentParsing
import ExitCodes
import FaceDetection
import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures
import ModelRuntime
import SystemIO

/// `modelc detect MODEL IMAGE... [--crop-and-scale MODE] [--roi X,Y,W,H] [--min-confidence C]
/// [--iou-threshold T] [--json] [--draw DIR] [--threads N]` and `modelc detect --faces IMAGE...`.
enum DetectCommand {
    static let spec = CommandSpec(
        name: "detect",
        abstract: "Find objects in image files with a detector model, as Vision does, and print their boxes.",
        discussion: """
            MODEL is an object detector: a model ending in a NonMaximumSuppression stage (Create ML,
            Turi Create, YOLO exports with NMS), as a compiled bundle or an .mlmodel/.mlpackage
            compiled on the fly. Each IMAGE is a file or a directory walked for images. Images are
            turned upright (EXIF), cut to --roi, cropped and scaled to the model's input
            (--crop-and-scale, default center-crop) and run in parallel; each box is mapped back to
            the upright image. A model without the NMS stage prints its outputs.
            Each image prints its size, then one line per object: its confidence and label, its box
            in pixels (origin at the top left) and normalized as Vision's boundingBox (origin at the
            lower left). --json prints one line per image: {"image", "width", "height", "objects":
            [{"label", "confidence", "labels": [{"identifier", "confidence"}…], "boundingBox":
            {"x", "y", "width", "height"}, "pixels": {…}}]}, or {"image", "error"}.
            --min-confidence and --iou-threshold go to the model's confidenceThreshold and
            iouThreshold inputs when it has them; otherwise objects below C are left out and
            overlapping ones suppressed again at T. --draw DIR writes each image with its boxes and
            labels drawn, as PNG (JPEG for JPEG inputs), named as the image; for a model without NMS
            whose output is a segmentation (classes × height × width scores, or a map of classes), its
            colour mask over the part of the image the model saw. --output-dir DIR writes a model's
            image outputs as PNG files, IMAGE-OUTPUT.png.
            --faces finds faces instead, with no model (every argument is an image): dlib's frontal face
            detector, opened at the first image. Each face prints its confidence, box and coarse roll
            and yaw; --json lines hold "faces": [{"confidence", "boundingBox", "pixels", "roll",
            "yaw"}]. --roi limits the search; --min-confidence leaves out weaker faces.
            """,
        arguments: [PositionalSpec(name: "MODEL", help: "The detector: a compiled bundle, .mlmodel or .mlpackage (with --faces: an image)."),
                    PositionalSpec(name: "IMAGE", help: "Image files or directories of them.", isOptional: true, isRepeated: true)],
        options: [
            OptionSpec(name: "crop-and-scale", valueName: "MODE", help: "center-crop (default), scale-fit or scale-fill."),
            OptionSpec(name: "roi", valueName: "X,Y,W,H", help: "Region of interest, normalized, origin at the lower left."),
            OptionSpec(name: "min-confidence", valueName: "C", help: "Leave out objects below C (0…1)."),
            OptionSpec(name: "iou-threshold", valueName: "T", help: "Suppress boxes overlapping a kept one by more than T (0…1)."),
            OptionSpec(name: "json", help: "One JSON object per image."),
            OptionSpec(name: "draw", valueName: "DIR", help: "Write each image with its boxes drawn into DIR."),
            OptionSpec(name: "output-dir", valueName: "DIR", help: "Write the model's image outputs into DIR as PNG."),
            OptionSpec(name: "faces", help: "Find faces (no model; every argument is an image)."),
            OptionSpec(name: "threads", valueName: "N", help: "Images worked on at once (default: every core)."),
        ])

    struct Options {
        var cropAndScale = CropAndScale.centerCrop
        var regionOfInterest = NormalizedRect.full
        var minimumConfidence: Double?
        var iouThreshold: Double?
        var json = false
        var drawDirectory: String?
        var outputDirectory: String?
        var threads = ProcessInfo.processInfo.activeProcessorCount
    }

    static func parseOptions(_ arguments: ParsedArguments) throws(UsageError) -> Options {
        var options = Options()
        options.cropAndScale = try ImageOptions.cropAndScale(arguments)
        options.regionOfInterest = try ImageOptions.regionOfInterest(arguments)
        options.minimumConfidence = try ImageOptions.unitInterval(arguments, "min-confidence")
        options.iouThreshold = try ImageOptions.unitInterval(arguments, "iou-threshold")
        options.json = arguments.has("json")
        options.drawDirectory = arguments.value("draw")
        options.outputDirectory = arguments.value("output-dir")
        options.threads = try arguments.positiveInteger("threads") ?? options.threads
        return options
    }

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "MODEL"] else { return .usage }
        let options: Options
        do throws(UsageError) {
            options = try parseOptions(arguments)
            if arguments.has("faces") {
                for other in ["crop-and-scale", "iou-threshold", "output-dir"] where arguments.value(other) != nil {
                    throw .conflictingOptions("faces", other)
                }
            } else if arguments.repeatedPositionals.isEmpty {
                throw .missingArgument(name: "IMAGE", command: "detect")
            }
        } catch {
            return Modelc.usageFailure(error, usage: Modelc.usageLine(for: spec))
        }
        if arguments.has("faces") {
            return runFaces(images: ImageFiles.expand([path] + arguments.repeatedPositionals), options: options)
        }
        let images = ImageFiles.expand(arguments.repeatedPositionals)

        let model: Model
        switch PredictCommand.open(path, configuration: ModelConfiguration(threads: 1)) {
        case .opened(let opened): model = opened
        case .failed(let code): return code
        }
        let request: ImageRequest
        var leftOver = (confidence: options.minimumConfidence, iou: options.iouThreshold)
        do throws(ImageRequestError) {
            let probe = try ImageModel(model: model, name: path)
            var thresholds: [String: FeatureValue] = [:]
            let inputs = probe.thresholdInputs
            if let name = inputs.iou, let value = options.iouThreshold {
                thresholds[name] = .double(value)
                leftOver.iou = nil
            }
            if let name = inputs.confidence, let value = options.minimumConfidence {
                thresholds[name] = .double(value)
            }
            let wrapped = thresholds.isEmpty ? probe : try ImageModel(model: model, additionalInputs: thresholds, name: path)
            request = ImageRequest(model: wrapped, cropAndScale: options.cropAndScale, regionOfInterest: options.regionOfInterest)
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return ExitCode(error)
        }
        let refilter = leftOver
        if images.isEmpty {
            Output.error("\(Modelc.toolName): error: no images found in \(arguments.repeatedPositionals.joined(separator: ", "))\n")
            return .cannotRead
        }
        for directory in [options.drawDirectory, options.outputDirectory].compactMap({ $0 }) {
            if let problem = ImageOptions.prepareDirectory(directory) {
                Output.error("\(Modelc.toolName): error: \(problem)\n")
                return .cannotWrite
            }
        }

        let report = DetectionReport(json: options.json, values: PredictionReport(model: model, top: 5))
        return ImageBatch.run(images, threads: options.threads, json: options.json, label: "detecting") { path throws(ImageRequestError) in
            var result = try ImageRequestHandler(file: path).perform(request)
            result = Self.refiltered(result, confidence: refilter.confidence, iou: refilter.iou)
            try ImageBatch.writeFiles(result, image: path, draw: options.drawDirectory, outputs: options.outputDirectory)
            return result
        } text: { path, found in
            report.text(image: path, found)
        }
    }

    /// `detect --faces`: the faces in each image.
    static func runFaces(images: [ImageFiles.Entry], options: Options) -> ExitCode {
        if let directory = options.drawDirectory, let problem = ImageOptions.prepareDirectory(directory) {
            Output.error("\(Modelc.toolName): error: \(problem)\n")
            return .cannotWrite
        }
        let request = FaceRectanglesRequest(regionOfInterest: options.regionOfInterest)
        let minimum = Float(options.minimumConfidence ?? 0)
        return eachImage(images, options: options, label: "finding faces") { path throws(ImageRequestError) in
            let found = try FacesFound.find(in: path, request: request, minimumConfidence: minimum, classify: nil)
            if let directory = options.drawDirectory { try found.drawn(image: path, into: directory) }
            return found.text(image: path, json: options.json, top: nil, report: nil)
        }
    }

    /// Runs `work` on each image in parallel, printing its text in order (see
    /// `ImageBatch`). A detector that cannot be opened stops the run before the
    /// first image.
    static func eachImage(_ images: [ImageFiles.Entry], options: Options, label: String,
                          _ work: @escaping @Sendable (String) throws(ImageRequestError) -> String) -> ExitCode {
        if let unavailable = FaceDetector.availability() {
            Output.error("\(Modelc.toolName): error: \(unavailable)\n")
            return ExitCode(ImageRequestError.faces(unavailable))
        }
        return ImageBatch.run(images, threads: options.threads, json: options.json, label: label, work: work) { _, text in text }
    }

    /// The thresholds the model did not take as inputs, applied to what it found.
    static func refiltered(_ result: ImageRequestResult, confidence: Double?, iou: Double?) -> ImageRequestResult {
        guard case .recognizedObjects(var objects) = result.observations, confidence != nil || iou != nil else { return result }
        if let confidence { objects = objects.filter { Double($0.confidence) >= confidence } }
        if let iou { objects = RecognizedObjectObservation.suppressing(objects, iouThreshold: iou) }
        return ImageRequestResult(observations: .recognizedObjects(objects), model: result.model,
                                  imageWidth: result.imageWidth, imageHeight: result.imageHeight)
    }

    /// Writes the image with the objects' boxes drawn into `directory`.
    static func draw(_ result: ImageRequestResult, image path: String, into directory: String) throws(ImageRequestError) {
        let labels = result.recognizedObjects.compactMap { $0.labels.first?.identifier }
        let order = Array(Set(labels)).sorted()
        let boxes = result.recognizedObjects.map { object in
            let label = object.labels.first?.identifier ?? ""
            return DrawnBox(rect: object.boundingBox, label: "\(label) \(String(format: "%.2f", object.confidence))",
                            color: DrawnBox.color(order.firstIndex(of: label) ?? 0))
        }
        try drawBoxes(boxes, image: path, into: directory)
    }

    /// Decodes the image upright at full size, draws `boxes`, and writes it into `directory`.
    static func drawBoxes(_ boxes: [DrawnBox], image path: String, into directory: String, overlay: PixelBuffer? = nil,
                          suffix: String = "") throws(ImageRequestError) {
        let format = ImageDrawing.EncodedFormat(path: path)
        do throws(ImageError) {
            let upright = try ImageDecoder(pixelFormat: .rgb).decode(file: path)
            let bytes = try ImageDrawing.draw(boxes, on: upright, overlay: overlay, format: format, name: path)
            let output = ImageOptions.outputPath(directory: directory, image: path, format: format, suffix: suffix)
            guard FileManager.default.createFile(atPath: output, contents: Data(bytes)) else {
                throw ImageError.unreadable(file: output, reason: "cannot write the drawn image")
            }
        } catch {
            throw .image(error)
        }
    }
}

/// How `modelc detect` shows what it found in one image.
struct DetectionReport {
    let json: Bool
    /// Shows the outputs of a model without an NMS stage.
    let values: PredictionReport

    func text(image: String, _ result: ImageRequestResult) -> String {
        json ? jsonLine(image: image, result) + "\n" : plain(image: image, result)
    }

    private func pixels(_ rect: NormalizedRect, _ result: ImageRequestResult) -> (x: Double, y: Double, width: Double, height: Double) {
        rect.topLeftPixels(width: result.imageWidth, height: result.imageHeight)
    }

    private func jsonLine(image: String, _ result: ImageRequestResult) -> String {
        let name = FeatureJSON.quoted(image)
        switch result.observations {
        case .recognizedObjects(let objects):
            let items = objects.map { object in
                let labels = object.labels.map {
                    "{\"identifier\": \(FeatureJSON.quoted($0.identifier)), \"confidence\": \(ImageOptions.number($0.confidence))}"
                }
                return "{\"label\": \(FeatureJSON.quoted(object.labels.first?.identifier ?? "")), "
                    + "\"confidence\": \(ImageOptions.number(object.confidence)), "
                    + "\"labels\": [\(labels.joined(separator: ", "))], "
                    + "\"boundingBox\": \(ImageOptions.json(object.boundingBox)), "
                    + "\"pixels\": \(ImageOptions.json(pixels(object.boundingBox, result)))}"
            }
            return "{\"image\": \(name), \"width\": \(result.imageWidth), \"height\": \(result.imageHeight), "
                + "\"objects\": [\(items.joined(separator: ", "))]}"
        case .classifications(let found):
            let items = found.map {
                "{\"identifier\": \(FeatureJSON.quoted($0.identifier)), \"confidence\": \(ImageOptions.number($0.confidence))}"
            }
            return "{\"image\": \(name), \"observations\": [\(items.joined(separator: ", "))]}"
        case .featureValues(let found):
            let items = found.map {
                "{\"featureName\": \(FeatureJSON.quoted($0.featureName)), \"featureValue\": \(FeatureJSON.text($0.featureValue))}"
            }
            return "{\"image\": \(name), \"observations\": [\(items.joined(separator: ", "))]}"
        }
    }

    private func plain(image: String, _ result: ImageRequestResult) -> String {
        var lines: [String] = []
        switch result.observations {
        case .recognizedObjects(let objects):
            let count = objects.count == 1 ? "1 object" : "\(objects.count) objects"
            lines.append("\(image) (\(result.imageWidth)×\(result.imageHeight)): \(count)")
            for object in objects {
                let label = object.labels.first?.identifier ?? ""
                lines.append("  " + String(format: "%.4f", object.confidence) + "  \(label)  "
                             + ImageOptions.text(pixels(object.boundingBox, result), digits: 1) + " px  (normalized "
                             + ImageOptions.text((object.boundingBox.x, object.boundingBox.y, object.boundingBox.width,
                                                  object.boundingBox.height), digits: 4) + ")")
            }
        case .classifications(let found):
            lines.append(image)
            for observation in found.prefix(5) {
                lines.append("  " + String(format: "%.4f", observation.confidence) + "  " + observation.identifier)
            }
        case .featureValues(let found):
            lines.append(image)
            for value in found {
                lines.append("  \(value.featureName) (\(values.describe(value.featureValue))): \(values.abbreviated(value.featureValue))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
