import CoreMLSchema
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
    /// How many of the base's layers the cut keeps.
    public let keptLayers: Int
    public let baseLayers: Int
    /// The image input and its declared type.
    public let imageInput: String
    public let imageType: ImageType
    /// SHA-256 of the base's serialized specification and the feature name: what cached features are keyed by.
    public let digest: String

    private let file: ModelFile
    private let layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>]
    private let runnable: Model

    /// Opens `basePath` (an `.mlmodel` or `.mlpackage` holding a neural network
    /// with one image input) and cuts it at `featureOutput`, or at the input of
    /// its final classification layers when `nil`.
    ///
    /// - Throws: `TrainingError.baseModel` when the base cannot be opened, is
    ///   not a neural network on an image, or the feature output is not found.
    public init(basePath: String, featureOutput: String? = nil) throws(TrainingError) {
        self.basePath = basePath
        let file = try Self.open(basePath)
        self.file = file
        let root = file.specification.root
        let summary = ModelSummary(file)
        guard let network = Self.network(root.pointee), let layerSummaries = summary.layers else {
            throw .baseModel(path: basePath, reason: "a \(summary.modelType ?? "model without a type") is not a neural network (cutting an ML program is not supported yet)")
        }
        guard let image = summary.inputs.first(where: { if case .image = $0.type { true } else { false } }),
              case .image(let imageType) = image.type, imageType.width > 0, imageType.height > 0 else {
            throw .baseModel(path: basePath, reason: "the model has no image input of a fixed size")
        }
        imageInput = image.name
        self.imageType = imageType
        let layers = elements(network.layers, network.n_layers)
        baseLayers = layers.count

        // The feature: given, or the input of the last inner product before the outputs.
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
        featureName = feature
        isAutomatic = featureOutput == nil
        self.consumer = consumer

        // The layers the feature depends on, in order.
        guard let producer = layerSummaries.lastIndex(where: { $0.outputs.contains(feature) }) else {
            throw .baseModel(path: basePath, reason: "\"\(feature)\" is a model input, not a layer output")
        }
        var needed: Set<String> = [feature]
        var keep: [Int] = []
        for index in stride(from: producer, through: 0, by: -1) where layerSummaries[index].outputs.contains(where: needed.contains) {
            keep.append(index)
            needed.formUnion(layerSummaries[index].inputs)
        }
        self.layers = keep.reversed().map { layers[$0] }
        keptLayers = keep.count

        let specification = withExtendedLifetime(file) { SpecificationPacker.pack(file.specification.root) }
        digest = SHA256Digest.of(specification + Array(("\u{0}" + feature).utf8)).description

        // Run the cut once on a blank image to learn the feature's length.
        let probe = try Self.runnable(file: file, layers: self.layers, network: network, feature: feature, count: 0, basePath: basePath)
        let blank = Self.blankImage(imageType)
        let outputs: [String: FeatureValue]
        do {
            outputs = try probe.prediction(from: [image.name: .image(blank)])
        } catch {
            throw .baseModel(path: basePath, reason: "the cut network does not run: \(error)")
        }
        guard case .multiArray(let values)? = outputs[feature], values.count > 0 else {
            throw .baseModel(path: basePath, reason: "the cut network gives no values for \"\(feature)\"")
        }
        featureCount = values.count
        runnable = try Self.runnable(file: file, layers: self.layers, network: network, feature: feature, count: values.count, basePath: basePath)
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
        guard case .multiArray(let values)? = outputs[featureName] else {
            throw .extraction(reason: "no \"\(featureName)\" output")
        }
        return values.floats
    }

    /// The pixel format images are decoded to for this network.
    var pixelFormat: PixelBuffer.PixelFormat { imageType.colorSpace.hasPrefix("GRAYSCALE") ? .gray : .rgb }

    /// Builds the cut network as a `neuralNetwork` model message in `arena`,
    /// its layers pointing into the base's tree (alive while `self` is).
    func modelMessage(in arena: MessageArena, count: Int) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        guard let network = Self.network(file.specification.root.pointee) else {
            preconditionFailure("the base was checked to be a neural network")
        }
        return Self.cutMessage(file: file, layers: layers, network: network, feature: featureName, count: count, arena: arena)
    }

    /// Keeps the base's tree alive around `body`.
    func withBase<Result>(_ body: () throws -> Result) rethrows -> Result {
        try withExtendedLifetime(file) { try body() }
    }

    // MARK: - Building

    /// The parts every kind of neural network shares.
    struct NetworkParts {
        var layers: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>?>?
        var n_layers: Int
        var preprocessing: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__NeuralNetworkPreprocessing>?>?
        var n_preprocessing: Int
        var arrayMapping: CoreML__Specification__NeuralNetworkMultiArrayShapeMapping
        var imageMapping: CoreML__Specification__NeuralNetworkImageShapeMapping
    }

    static func network(_ model: CoreML__Specification__Model) -> NetworkParts? {
        switch model.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            model.neuralnetworkclassifier.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            model.neuralnetworkregressor.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK:
            model.neuralnetwork.map { network in
                let n = network.pointee
                return NetworkParts(layers: n.layers, n_layers: n.n_layers, preprocessing: n.preprocessing, n_preprocessing: n.n_preprocessing,
                                    arrayMapping: n.arrayinputshapemapping, imageMapping: n.imageinputshapemapping)
            }
        default:
            nil
        }
    }

    private static func cutMessage(file: ModelFile, layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>],
                                   network: NetworkParts, feature: String, count: Int,
                                   arena: MessageArena) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        let base = file.specification.root.pointee
        let baseDescription = base.description?.pointee
        let inputs = elements(baseDescription?.input, baseDescription?.n_input ?? 0)
        let output = arena.feature(feature, description: "The feature vector: the base network's \"\(feature)\"",
                                   type: arena.vectorType(count: max(count, 1), dataType: CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32))
        let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
            description.n_input = inputs.count
            description.input = arena.pointers(inputs)
            description.n_output = 1
            description.output = arena.pointers([output])
        }
        let cut: UnsafeMutablePointer<CoreML__Specification__NeuralNetwork> = arena.message(core_ml__specification__neural_network__init) { cut in
            cut.n_layers = layers.count
            cut.layers = arena.pointers(layers)
            cut.n_preprocessing = network.n_preprocessing
            cut.preprocessing = network.preprocessing
            cut.arrayinputshapemapping = network.arrayMapping
            cut.imageinputshapemapping = network.imageMapping
        }
        return arena.message(core_ml__specification__model__init) { model in
            model.specificationversion = max(base.specificationversion, 1)
            model.description = description
            model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK
            model.neuralnetwork = cut
        }
    }

    private static func runnable(file: ModelFile, layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>],
                                 network: NetworkParts, feature: String, count: Int, basePath: String) throws(TrainingError) -> Model {
        let arena = MessageArena()
        let bytes = withExtendedLifetime(file) {
            SpecificationPacker.pack(cutMessage(file: file, layers: layers, network: network, feature: feature, count: count, arena: arena))
        }
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

    /// The base's source model; a compiled bundle is decompiled (to a scratch
    /// directory, removed once read: the unpacked tree holds the weights).
    private static func open(_ path: String) throws(TrainingError) -> ModelFile {
        guard FileManager.default.fileExists(atPath: path + "/manifest.json") else {
            do {
                return try ModelFile.open(path)
            } catch {
                throw .baseModel(path: path, reason: error.description)
            }
        }
        let scratch = NSTemporaryDirectory() + "/modelc-base-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        do {
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        } catch {
            throw .baseModel(path: path, reason: "cannot create \(scratch)")
        }
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        do {
            let report = try BundleDecompiler.decompile(path, to: scratch + "/" + name + ".mlmodel")
            guard report.format == .mlmodel else {
                throw TrainingError.baseModel(path: path, reason: "cutting an ML program is not supported yet")
            }
            return try ModelFile.open(report.output)
        } catch let error as TrainingError {
            throw error
        } catch {
            throw .baseModel(path: path, reason: "\(error)")
        }
    }

    static func blankImage(_ type: ImageType) -> PixelBuffer {
        let format: PixelBuffer.PixelFormat = type.colorSpace.hasPrefix("GRAYSCALE") ? .gray : .rgb
        let width = Int(type.width), height = Int(type.height)
        guard let image = PixelBuffer(width: width, height: height, pixelFormat: format,
                                      bytes: [UInt8](repeating: 128, count: width * height * format.bytesPerPixel)) else {
            preconditionFailure("a fixed, positive image size")
        }
        return image
    }
}
