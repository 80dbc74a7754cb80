import Foundation
import ModelCompiler
import ModelFeatures
import ModelRuntime
import ModelSpec
import SystemIO

/// A base image network cut at its feature output: the layers that compute
/// one intermediate value (by default the input of the final classification
/// layers), run as a feature extractor and exported as the first stage of
/// the trained pipeline.
///
/// Immutable once made; `extract` may be called from any thread.
public final class FeatureNetwork: @unchecked Sendable {
    /// The base model's path as given.
    public let basePath: String
    /// The value the network is cut at.
    public let featureName: String
    /// How many values the feature vector has.
    public let featureCount: Int
    /// Whether `featureName` was found automatically (not given).
    public let isAutomatic: Bool
    /// The layer that reads the feature in the base (automatic choice), e.g. `fc (innerProduct)`.
    public let consumer: String?
    /// How many of the base's layers (an ML program's main-function operations
    /// other than constants) the cut keeps.
    public let keptLayers: Int
    public let baseLayers: Int
    /// Whether the base is an ML program: the trained model is then an `.mlpackage`
    /// (its weights stay in the program's weight file).
    public var isProgram: Bool { cut.program != nil }
    /// What `keptLayers` and `baseLayers` count: `layers` or `operations`.
    public var unitName: String { isProgram ? "operations" : "layers" }
    /// The image input and its declared type.
    public let imageInput: String
    public let imageType: ImageType
    /// SHA-256 of the base's serialized specification, its program weight file
    /// (if any) and the feature name: what cached features are keyed by.
    public let digest: String

    private let file: ModelFile
    /// Where a compiled base was decompiled to, removed with `self` (a program's weights are read from it).
    private let scratch: ScratchDirectory?
    /// What the cut keeps: neural-network layers, or an ML program's operations.
    let cut: ModelCut
    /// The feature's declared shape (`[count]` for a neural network).
    let featureShape: [Int64]
    /// The cut's output: `featureName`, or for a float16 program variable its float32 cast.
    let outputName: String
    private let runnable: Model

    /// Opens `basePath` (an `.mlmodel`, `.mlpackage` or bundle holding a
    /// neural network or an ML program with an image input) and cuts it at
    /// `featureOutput`, or at the input of its final classification layers
    /// when `nil`.
    ///
    /// - Throws: `TrainingError.baseModel` when the base cannot be opened, is
    ///   not a neural network or ML program on an image, or the feature output is not found.
    public init(basePath: String, featureOutput: String? = nil) throws(TrainingError) {
        self.basePath = basePath
        let (file, scratch) = try Self.open(basePath)
        self.file = file
        self.scratch = scratch
        let summary = ModelSummary(file)
        let isProgram = summary.modelType == "mlProgram"
        guard isProgram || summary.layers != nil else {
            throw .baseModel(path: basePath, reason: "a \(summary.modelType ?? "model without a type") is neither a neural network nor an ML program")
        }
        guard let image = summary.inputs.first(where: { if case .image = $0.type { true } else { false } }),
              case .image(let imageType) = image.type, imageType.width > 0, imageType.height > 0 else {
            throw .baseModel(path: basePath, reason: "the model has no image input of a fixed size")
        }
        imageInput = image.name
        self.imageType = imageType

        let cut: ModelCut
        if isProgram {
            let programCut: ModelCut?
            do {
                programCut = try ModelCut(program: file, featureOutput: featureOutput)
            } catch {
                throw .baseModel(path: basePath, reason: error.reason)
            }
            guard let programCut, let program = programCut.program else { preconditionFailure("checked above") }
            cut = programCut
            consumer = program.consumer
            keptLayers = program.keptOperations
            baseLayers = program.baseOperations
        } else if let layerSummaries = summary.layers {
            baseLayers = layerSummaries.count
            let found = try Self.cutLayers(layerSummaries, featureOutput: featureOutput, basePath: basePath)
            guard let networkCut = ModelCut(network: file, keeping: found.keep, feature: found.feature) else {
                preconditionFailure("checked above")
            }
            cut = networkCut
            consumer = found.consumer
            keptLayers = found.keep.count
        } else {
            preconditionFailure("checked above")
        }
        let feature = cut.feature
        featureName = feature
        isAutomatic = featureOutput == nil
        self.cut = cut
        let outputName = cut.output
        self.outputName = outputName

        let specification = SpecificationPacker.pack(file.specification)
        var hasher = SHA256Hasher()
        specification.withUnsafeBytes { hasher.update($0) }
        if isProgram {
            let weights = try Self.programWeightFile(file, basePath: basePath)
            do {
                let mapped = try MappedFile(path: weights)
                withExtendedLifetime(mapped) { hasher.update(mapped.bytes) }
            } catch {
                throw .baseModel(path: basePath, reason: "\(weights): \(error)")
            }
        }
        Array(("\u{0}" + feature).utf8).withUnsafeBytes { hasher.update($0) }
        digest = hasher.finalize().description

        // Run the cut once on a blank image to learn the feature's length.
        let probe = try Self.runnable(file: file, cut: cut, shape: cut.program?.shape ?? [1], basePath: basePath)
        let blank = Self.blankImage(imageType)
        let outputs: [String: FeatureValue]
        do {
            outputs = try probe.prediction(from: [image.name: .image(blank)])
        } catch {
            throw .baseModel(path: basePath, reason: "the cut network does not run: \(error)")
        }
        guard case .multiArray(let values)? = outputs[outputName], values.count > 0 else {
            throw .baseModel(path: basePath, reason: "the cut network gives no values for \"\(feature)\"")
        }
        featureCount = values.count
        if let program = cut.program {
            guard program.count == values.count else {
                throw .baseModel(path: basePath, reason: "\"\(feature)\" is declared with \(program.count) values but the cut program gives \(values.count)")
            }
            featureShape = program.shape
        } else {
            featureShape = [Int64(values.count)]
        }
        runnable = try Self.runnable(file: file, cut: cut, shape: featureShape, basePath: basePath)
    }

    /// The feature (given, or the input of the last inner product before the
    /// outputs) and the indices of the layers it depends on, in order.
    private static func cutLayers(_ layerSummaries: [Layer], featureOutput: String?,
                                  basePath: String) throws(TrainingError) -> (feature: String, consumer: String?, keep: [Int]) {
        var consumer: String?
        let feature: String
        if let featureOutput {
            guard layerSummaries.contains(where: { $0.outputs.contains(featureOutput) }) else {
                let candidates = layerSummaries.suffix(4).flatMap(\.outputs).map { "\"\($0)\"" }.joined(separator: ", ")
                throw .baseModel(path: basePath, reason: "no layer produces \"\(featureOutput)\" (the last layers produce \(candidates))")
            }
            feature = featureOutput
        } else {
            var found: String?
            for layer in layerSummaries.reversed() {
                if ["softmax", "softmaxND", "activation", "flatten", "reshape", "squeeze", "flattenTo2D", "reshapeStatic"].contains(layer.kind) { continue }
                if ["innerProduct", "batchedMatMul"].contains(layer.kind), let input = layer.inputs.first {
                    found = input
                    consumer = "\"\(layer.name)\" (\(layer.kind))"
                }
                break
            }
            guard let found else {
                throw .baseModel(path: basePath, reason: "its final layers are not an inner-product classifier; name the feature vector with --feature-output")
            }
            feature = found
        }
        guard let producer = layerSummaries.lastIndex(where: { $0.outputs.contains(feature) }) else {
            throw .baseModel(path: basePath, reason: "\"\(feature)\" is a model input, not a layer output")
        }
        var needed: Set<String> = [feature]
        var keep: [Int] = []
        for index in stride(from: producer, through: 0, by: -1) where layerSummaries[index].outputs.contains(where: needed.contains) {
            keep.append(index)
            needed.formUnion(layerSummaries[index].inputs)
        }
        return (feature, consumer, keep.reversed())
    }

    /// The weight file a program's blobs are read from (`@model_path/weights/weight.bin`);
    /// every blob reference must name it.
    static func programWeightFile(_ file: ModelFile, basePath: String) throws(TrainingError) -> String {
        let reference = "@model_path/weights/weight.bin"
        for (weight, name) in file.specification.weightFileReferences where name != reference {
            throw .baseModel(path: basePath, reason: "\(weight) refers to \(name); only \(reference) can be carried into the trained package")
        }
        guard let path = file.resolveProgramFile(reference), FileManager.default.fileExists(atPath: path) else {
            throw .baseModel(path: basePath, reason: "the ML program has no weights/weight.bin")
        }
        return path
    }

    /// The weight file of a program base (to copy into the trained package).
    var weightFile: String? {
        guard isProgram else { return nil }
        return try? Self.programWeightFile(file, basePath: basePath)
    }

    /// The feature vector of one image, already fitted to the input's size.
    ///
    /// - Throws: `TrainingError.extraction` when the network fails on it.
    public func features(of image: PixelBuffer) throws(TrainingError) -> [Float] {
        let outputs: [String: FeatureValue]
        do {
            outputs = try runnable.prediction(from: [imageInput: .image(image)])
        } catch {
            throw .extraction(reason: error.description)
        }
        guard case .multiArray(let values)? = outputs[outputName] else {
            throw .extraction(reason: "no \"\(outputName)\" output")
        }
        return values.floats
    }

    /// The pixel format images are decoded to for this network.
    var pixelFormat: PixelBuffer.PixelFormat { imageType.space.isGrayscale ? .gray : .rgb }

    // MARK: - Building

    private static func runnable(file: ModelFile, cut: ModelCut, shape: [Int64], basePath: String) throws(TrainingError) -> Model {
        let bytes = cut.specificationBytes(shape: shape)
        do {
            let specification = try bytes.withUnsafeBytes { buffer throws(ModelSpecError) in
                try Specification.unpack(buffer, path: basePath)
            }
            return try Model(specification: specification, modelDirectory: file.modelDirectory, path: basePath,
                             configuration: ModelConfiguration(threads: 1))
        } catch {
            throw .baseModel(path: basePath, reason: "the cut network cannot run: \(error)")
        }
    }

    /// The base's source model; a compiled bundle is decompiled to a scratch
    /// directory, kept while the network lives (an ML program's weight file
    /// is read from it when the trained package is written).
    private static func open(_ path: String) throws(TrainingError) -> (ModelFile, ScratchDirectory?) {
        guard FileManager.default.fileExists(atPath: path + "/manifest.json") else {
            do {
                return (try ModelFile.open(path), nil)
            } catch {
                throw .baseModel(path: path, reason: error.description)
            }
        }
        let scratch = try ScratchDirectory(for: path)
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        do {
            let report: BundleDecompiler.Report
            do {
                report = try BundleDecompiler.decompile(path, to: scratch.path + "/" + name + ".mlmodel")
            } catch .needsPackage {
                report = try BundleDecompiler.decompile(path, to: scratch.path + "/" + name + ".mlpackage")
            }
            return (try ModelFile.open(report.output), scratch)
        } catch {
            throw .baseModel(path: path, reason: "\(error)")
        }
    }

    static func blankImage(_ type: ImageType) -> PixelBuffer {
        let format: PixelBuffer.PixelFormat = type.space.isGrayscale ? .gray : .rgb
        let width = Int(type.width), height = Int(type.height)
        guard let image = PixelBuffer(width: width, height: height, pixelFormat: format,
                                      bytes: [UInt8](repeating: 128, count: width * height * format.bytesPerPixel)) else {
            preconditionFailure("a fixed, positive image size")
        }
        return image
    }
}

/// A directory under the system's temporary directory, removed with its
/// last reference.
final class ScratchDirectory: Sendable {
    let path: String

    init(for base: String) throws(TrainingError) {
        path = NSTemporaryDirectory() + "/modelc-base-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw .baseModel(path: base, reason: "cannot create \(path)")
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
