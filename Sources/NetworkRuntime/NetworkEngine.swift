import CoreMLSchema
import Foundation
import ModelFeatures
import ModelLoader
import ModelSpec
import Synchronization
import SystemIO

/// Runs a neural network (plain, classifier or regressor): inputs converted
/// to float tensors (images through the model's preprocessing), a plan per
/// distinct set of input shapes made once, and prediction states pooled so
/// steady predictions allocate nothing but their outputs.
public final class NetworkEngine: PredictionEngine {
    private let interface: ModelInterface
    /// The graph, whose layers prepared on oneDNN hold no weights of their
    /// own: those are parked in the latest plan's kernels and put back when
    /// another input shape needs a plan. One copy of the weights, not two.
    let graph: Locked<ParkedGraph>
    /// Whether multi-array inputs keep their rank (the graph's `exactArrayMapping`).
    private let exactArrayMapping: Bool
    private let preprocessing: [String: Preprocessing]
    private let labels: ClassLabels?
    /// The value holding class probabilities, for classifiers.
    private let probabilitiesValue: String?
    private let pool: ThreadPool
    let plans = Locked<[[Int]: PlanEntry]>([:])

    /// A plan and the idle states made for it.
    final class PlanEntry: Sendable {
        let plan: NetworkPlan
        let idle = Locked<[NetworkStateBox]>([])
        /// States made for the plan, idle or running (none is ever freed).
        let statesMade = Atomic<Int>(0)
        init(plan: NetworkPlan) { self.plan = plan }

        func makeState() -> NetworkStateBox {
            statesMade.add(1, ordering: .relaxed)
            return NetworkStateBox(NetworkState(plan: plan))
        }
    }

    /// How an image input becomes numbers.
    struct Preprocessing: Sendable {
        var scale: Float = 1
        var red: Float = 0, green: Float = 0, blue: Float = 0, gray: Float = 0
        var meanImage: [Float]?
    }

    /// Reads the network of `model` (decoding its weights once, from the
    /// bundle when it came from one) and checks every layer can run.
    ///
    /// - Throws: `RuntimeError.unsupportedLayer` naming the first layer
    ///   modelc cannot run, or `.invalidParameters`.
    public convenience init(model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface, bundle: ModelBundle?,
                            threads: Int) throws(RuntimeError) {
        let spec = model.pointee
        let labels: ClassLabels?
        let probabilitiesValue: String?
        let layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>]
        let preprocessors: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkPreprocessing>]
        let mapping: CoreML__Specification__NeuralNetworkMultiArrayShapeMapping
        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            guard let network = spec.neuralnetworkclassifier?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
            let classifier = NetworkClassifier(network)
            labels = classifier.labels
            probabilitiesValue = classifier.probabilities
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            guard let network = spec.neuralnetworkregressor?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
            labels = nil
            probabilitiesValue = nil
        default:
            guard let network = spec.neuralnetwork?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
            labels = nil
            probabilitiesValue = nil
        }
        let graph = try NetworkGraph(layers: layers, exactArrayMapping: mapping == CORE_ML__SPECIFICATION__NEURAL_NETWORK_MULTI_ARRAY_SHAPE_MAPPING__EXACT_ARRAY_MAPPING,
                                     weights: WeightDecoder(bundle: bundle))
        // The weights are decoded: their mapped pages need not count against this process any more.
        bundle?.releaseWeightPages()
        var preprocessing: [String: Preprocessing] = [:]
        for preprocessor in preprocessors {
            let feature = text(preprocessor.pointee.featurename)
            var steps = preprocessing[feature] ?? Preprocessing()
            if let scaler = preprocessor.pointee.scaler?.pointee,
               preprocessor.pointee.preprocessor_case == CORE_ML__SPECIFICATION__NEURAL_NETWORK_PREPROCESSING__PREPROCESSOR_SCALER {
                steps.scale = scaler.channelscale == 0 ? 1 : scaler.channelscale
                steps.red = scaler.redbias
                steps.green = scaler.greenbias
                steps.blue = scaler.bluebias
                steps.gray = scaler.graybias
            } else if let mean = preprocessor.pointee.meanimage?.pointee {
                steps.meanImage = scalars(mean.meanimage, mean.n_meanimage)
            }
            // A preprocessor without a feature name applies to the (single) image input.
            if feature.isEmpty, let image = interface.inputs.first(where: { if case .image = $0.type { true } else { false } }) {
                preprocessing[image.name] = steps
            } else {
                preprocessing[feature] = steps
            }
        }
        try self.init(interface: interface, graph: consume graph, preprocessing: preprocessing, labels: labels,
                      probabilitiesValue: probabilitiesValue, threads: threads)
    }

    /// Prepares the main function of an ML program: constants and weight
    /// decompression evaluated now, weights read from `modelDirectory`'s
    /// weight file (the bundle, or the package's model folder).
    public convenience init(program model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface,
                            modelDirectory: String?, threads: Int) throws(RuntimeError) {
        guard let program = model.pointee.mlprogram else {
            throw .invalidParameters(model: interface.kind, detail: "no program")
        }
        let reader = try ProgramReader(program: program, modelDirectory: modelDirectory)
        var interface = interface
        if let classification = reader.classification {
            // The classifier's outputs are the two values `classify` names.
            interface.predictedFeatureName = interface.predictedFeatureName ?? classification.labelOutput
            interface.predictedProbabilitiesName = interface.predictedProbabilitiesName ?? classification.probabilitiesOutput
        }
        let classification = reader.classification
        // The reader is let go before planning, so that the weights the plan
        // prepares on oneDNN are freed as it goes (see `graph`).
        let graph = NetworkGraph(nodes: (consume reader).nodes, exactArrayMapping: true)
        try self.init(interface: interface, graph: consume graph, preprocessing: [:], labels: classification?.labels,
                      probabilitiesValue: classification?.probabilities, threads: threads)
    }

    private init(interface: ModelInterface, graph: consuming NetworkGraph, preprocessing: [String: Preprocessing], labels: ClassLabels?,
                 probabilitiesValue: String?, threads: Int) throws(RuntimeError) {
        guard XNNPack.isAvailable, BLAS.singleThreaded else {
            throw .unsupportedModel(kind: interface.kind, reason: "XNNPACK does not support this processor")
        }
        self.interface = interface
        exactArrayMapping = graph.exactArrayMapping
        self.graph = Locked(ParkedGraph(graph: consume graph))
        self.preprocessing = preprocessing
        self.labels = labels
        self.probabilitiesValue = probabilitiesValue
        pool = ThreadPool(threads: threads)
        // Refuse now, not at the first prediction: plan the declared input shapes.
        // With flexible inputs those are one allowed choice of many (a range's
        // default may not fit the weights): a shape that does not plan is then
        // not the model's fault, and each prediction plans its own.
        if let shapes = try? declaredShapes() {
            do {
                _ = try entry(for: shapes)
            } catch {
                guard case .invalidParameters = error, interface.inputs.contains(where: \.isFlexible) else { throw error }
            }
        }
    }

    /// Every layer of the network in `model` that modelc cannot run.
    public static func unsupportedLayers(in model: UnsafePointer<CoreML__Specification__Model>, bundle: ModelBundle?) -> [RuntimeError] {
        let spec = model.pointee
        let layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>] = switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            spec.neuralnetworkclassifier.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            spec.neuralnetworkregressor.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        default:
            spec.neuralnetwork.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        }
        return NetworkGraph.unsupportedLayers(layers, weights: WeightDecoder(bundle: bundle))
    }

    public func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        var tensors: [String: (shape: [Int], values: InputValues)] = [:]
        for description in interface.inputs {
            guard let value = inputs[description.name] else { continue }
            tensors[description.name] = try tensor(value, description: description)
        }
        let key = interface.inputs.flatMap { (tensors[$0.name]?.shape ?? []) + [-1] }
        let entry = try entry(for: Dictionary(uniqueKeysWithValues: tensors.map { ($0.key, $0.value.shape) }), key: key)
        let box = entry.idle.withLock { $0.popLast() } ?? entry.makeState()
        defer { entry.idle.withLock { $0.append(box) } }
        let state = box.state
        for (name, tensor) in tensors {
            guard let slot = entry.plan.slots[name] else { continue }
            let buffer = state.slots[slot]
            switch tensor.values {
            case .floats(let values):
                for index in 0..<min(values.count, buffer.count) { buffer[index] = values[index] }
            case .image(let image, let colorSpace, let steps):
                writeImage(image, colorSpace: colorSpace, steps: steps, into: buffer)
            }
        }
        try state.run(pool: pool)
        func values(_ name: String) -> (shape: [Int], values: [Double])? {
            guard let slot = entry.plan.slots[entry.plan.exported[name] ?? name], let shape = entry.plan.shapes[name] else { return nil }
            let count = shape.reduce(1, *)
            return (shape, (0..<count).map { Double(state.slots[slot][$0]) })
        }
        var outputs: [String: FeatureValue] = [:]
        if let labels, let name = probabilitiesValue, let probabilities = values(name) {
            guard probabilities.values.count == labels.count else {
                throw .invalidParameters(model: interface.kind, detail: "\"\(name)\" holds \(probabilities.values.count) probabilities for \(labels.count) class labels")
            }
            outputs = interface.classifierOutputs(labels: labels, probabilities: probabilities.values)
        }
        for description in interface.outputs where outputs[description.name] == nil {
            guard let result = values(description.name) else {
                throw .invalidParameters(model: interface.kind, detail: "no layer produces the output \"\(description.name)\"")
            }
            outputs[description.name] = .multiArray(MultiArray(result.values, shape: result.shape, dataType: .float32))
        }
        return outputs
    }

    // MARK: Inputs

    /// An input's values: floats, or an image whose preprocessed pixels are
    /// written straight into the prediction's input slot (no array per prediction).
    private enum InputValues {
        case floats([Float])
        case image(PixelBuffer, colorSpace: String, steps: Preprocessing)
    }

    /// A feature value as a float tensor in the network's layout.
    private func tensor(_ value: FeatureValue, description: FeatureDescription) throws(RuntimeError) -> (shape: [Int], values: InputValues) {
        switch value {
        case .image(let image):
            let colorSpace: String = if case .image(let type) = description.type { type.colorSpace } else { "RGB" }
            let shape = [colorSpace.hasPrefix("GRAYSCALE") ? 1 : 3, image.height, image.width]
            // ML programs take images as [1, C, H, W].
            return (exactArrayMapping ? [1] + shape : shape,
                    .image(image, colorSpace: colorSpace, steps: preprocessing[description.name] ?? Preprocessing()))
        case .multiArray(let array):
            var shape = array.shape
            if !exactArrayMapping {
                // Rank-5 mapping: [C] or [C, H, W] (or [S, B, C, H, W] with S = B = 1).
                switch shape.count {
                case 1: shape = [shape[0], 1, 1]
                case 3: break
                case 5 where shape[0] == 1 && shape[1] == 1: shape = Array(shape.suffix(3))
                default:
                    throw .wrongShape(feature: description.name, expected: "rank 1, 3, or 5 with sequence and batch 1", got: array.shape)
                }
            }
            return (shape, .floats(array.floats))
        case .double(let number):
            return (exactArrayMapping ? [1] : [1, 1, 1], .floats([Float(number)]))
        case .int64(let number):
            return (exactArrayMapping ? [1] : [1, 1, 1], .floats([Float(number)]))
        default:
            throw .wrongType(feature: description.name, expected: "a multi-array or an image", got: value.kindText)
        }
    }

    /// Writes the pixels into `values` as [C, H, W] floats in the model's
    /// color order, scaled and biased (`values` holds at least C × H × W).
    private func writeImage(_ image: PixelBuffer, colorSpace: String, steps: Preprocessing, into values: UnsafeMutableBufferPointer<Float>) {
        let width = image.width, height = image.height, plane = width * height
        let format = image.pixelFormat
        let gray = colorSpace.hasPrefix("GRAYSCALE")
        let count = (gray ? 1 : 3) * plane
        guard values.count >= count else { return }
        let (r, g, b) = format.rgbOffsets
        let step = format.bytesPerPixel
        let bgr = colorSpace == "BGR"
        image.bytes.withUnsafeBufferPointer { bytes in
            for y in 0..<height {
                let row = y * image.bytesPerRow
                for x in 0..<width {
                    let pixel = row + x * step
                    let p = y * width + x
                    if gray {
                        let luminance = format == .gray ? Float(bytes[pixel])
                            : (0.299 * Float(bytes[pixel + r]) + 0.587 * Float(bytes[pixel + g]) + 0.114 * Float(bytes[pixel + b])).rounded()
                        values[p] = luminance * steps.scale + steps.gray
                    } else {
                        let red = Float(bytes[pixel + r]), green = Float(bytes[pixel + g]), blue = Float(bytes[pixel + b])
                        values[p] = (bgr ? blue : red) * steps.scale + (bgr ? steps.blue : steps.red)
                        values[plane + p] = green * steps.scale + steps.green
                        values[2 * plane + p] = (bgr ? red : blue) * steps.scale + (bgr ? steps.red : steps.blue)
                    }
                }
            }
        }
        if let mean = steps.meanImage, mean.count == count {
            for index in 0..<count { values[index] -= mean[index] }
        }
    }

    /// The input shapes the description declares (for planning at load).
    private func declaredShapes() throws -> [String: [Int]] {
        var shapes: [String: [Int]] = [:]
        for description in interface.inputs {
            switch description.type {
            case .image(let image):
                let shape = [image.colorSpace.hasPrefix("GRAYSCALE") ? 1 : 3, Int(image.height), Int(image.width)]
                shapes[description.name] = exactArrayMapping ? [1] + shape : shape
            case .multiArray(let array):
                var shape = array.shape.map(Int.init)
                if !exactArrayMapping {
                    if shape.count == 1 { shape = [shape[0], 1, 1] } else if shape.count == 5 { shape = Array(shape.suffix(3)) }
                }
                shapes[description.name] = shape
            default:
                shapes[description.name] = exactArrayMapping ? [1] : [1, 1, 1]
            }
        }
        return shapes
    }

    private func entry(for shapes: [String: [Int]], key: [Int]? = nil) throws(RuntimeError) -> PlanEntry {
        let key = key ?? interface.inputs.flatMap { (shapes[$0.name] ?? []) + [-1] }
        if let existing = plans.withLock({ $0[key] }) { return existing }
        let keep = Set(interface.outputs.map(\.name) + [probabilitiesValue].compactMap { $0 })
        let threads = pool.threads
        let planned = graph.withLock { parked in
            Result { () throws(RuntimeError) -> NetworkPlan in try parked.plan(shapes: shapes, keep: keep, threads: threads) }
        }
        let plan = try planned.get()
        return plans.withLock { plans in
            if let existing = plans[key] { return existing }
            let entry = PlanEntry(plan: plan)
            plans[key] = entry
            return entry
        }
    }
}

extension FeatureDescription {
    /// Whether the input allows more than one shape or image size.
    var isFlexible: Bool {
        switch type {
        case .multiArray(let array): array.shapeFlexibility != nil
        case .image(let image): image.sizeFlexibility != nil
        default: false
        }
    }
}

/// A prediction state handed between threads through the pool's lock: only
/// one prediction uses it at a time.
final class NetworkStateBox: @unchecked Sendable {
    let state: NetworkState
    init(_ state: NetworkState) { self.state = state }
}

/// A network graph whose prepared layers' weights may be parked in the
/// kernels of a plan (see `NetworkEngine.graph`).
struct ParkedGraph {
    /// The graph; a layer named in `parked` holds empty weights.
    private(set) var graph: NetworkGraph
    /// The kernel holding each weightless layer's weights.
    private var parked: [String: DNNLKernel] = [:]

    init(graph: NetworkGraph) { self.graph = graph }

    /// Plans `shapes` on the whole graph (its weights put back first); the
    /// plan parks the weights of the layers it prepares on oneDNN.
    mutating func plan(shapes: [String: [Int]], keep: Set<String>, threads: Int) throws(RuntimeError) -> NetworkPlan {
        if !parked.isEmpty {
            var restored: [String: [Float]] = [:]
            for (layer, kernel) in parked {
                guard let weights = kernel.weightsInGraphLayout() else {
                    throw .invalidParameters(model: "layer \"\(layer)\"", detail: "its weights could not be read back from oneDNN")
                }
                restored[layer] = weights
            }
            graph.replaceWeights(restored)
            parked = [:]
        }
        let plan = try NetworkPlan(graph: &graph, inputShapes: shapes, keep: keep, threads: threads)
        parked = plan.parked
        return plan
    }
}
