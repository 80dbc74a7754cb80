import CoreMLSchema
import ModelSpec

/// One layer of a neural network, as the rules see it.
struct LayerRef {
    let index: Int
    let pointer: UnsafePointer<CoreML__Specification__NeuralNetworkLayer>
    let view: MessageView

    init(index: Int, view: MessageView) {
        self.index = index
        self.view = view
        pointer = view.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkLayer.self)
    }

    var name: String { text(pointer.pointee.name) }
    var inputs: [String] { strings(pointer.pointee.input, pointer.pointee.n_input) }
    var outputs: [String] { strings(pointer.pointee.output, pointer.pointee.n_output) }
    var layerCase: CoreML__Specification__NeuralNetworkLayer__LayerCase { pointer.pointee.layer_case }

    /// The schema name of the layer's kind (`convolution`, …).
    var kind: String {
        let number = layerCase.rawValue
        return number == 0 ? "unset" : view.fieldName(number: number) ?? "unknown(\(number))"
    }

    /// `layer 12 "conv2" (convolution)`, with a prefix for nested networks.
    func location(prefix: String = "") -> String {
        "\(prefix)layer \(index) \(quoted(name)) (\(kind))"
    }
}

/// The layers of a `NeuralNetwork`, `NeuralNetworkClassifier` or
/// `NeuralNetworkRegressor` message (or a nested network).
func networkLayers(_ network: MessageView) -> [LayerRef] {
    network.message(fieldsNamed: "layers").enumerated().map { LayerRef(index: $0.offset, view: $0.element) }
}

/// The network message of a neural-network model of any of the three kinds.
func networkMessage(_ model: UnsafePointer<CoreML__Specification__Model>) -> MessageView? {
    let view = MessageView(model)
    guard let name = view.fieldName(number: model.pointee.type_case.rawValue) else { return nil }
    return view.message(named: name)
}

/// Rules on the graph of a neural network: layers, the blobs they read and
/// write, and the model outputs they produce.
enum NeuralNetworkRules {
    /// How a blob that is a model input names its producer.
    static let modelInput = "the model input"

    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        guard let network = networkMessage(model) else { return }
        let all = networkLayers(network)
        if all.isEmpty {
            sink.error("nn.layers.empty", "the neural network has no layers")
            return
        }
        var producers: [String: String] = [:]
        for input in model.inputs + model.states where !input.name.isEmpty {
            producers[input.name] = modelInput
        }
        checkGraph(all, producers: &producers, prefix: "", sink: &sink)

        // A classifier's predicted class comes from its label head, not a layer.
        let isClassifier = model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER
        let predicted = isClassifier ? text(model.pointee.description?.pointee.predictedfeaturename) : ""
        for output in model.outputs where !output.name.isEmpty && output.name != predicted {
            if producers[output.name] == nil || producers[output.name] == modelInput {
                sink.at(output.location) { sink in
                    sink.error("nn.output.unproduced", "no layer produces this output")
                }
            }
        }

        if model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER {
            let classifier = network.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkClassifier.self).pointee
            let named = text(classifier.labelprobabilitylayername)
            let probabilities = named.isEmpty ? text(model.pointee.description?.pointee.predictedprobabilitiesname) : named
            if !probabilities.isEmpty, producers[probabilities] == nil || producers[probabilities] == modelInput {
                let source = named.isEmpty ? "predictedProbabilitiesName" : "labelProbabilityLayerName"
                sink.error("nn.classifier.probabilityBlob",
                           "the class probabilities blob \(quoted(probabilities)) (\(source)) is produced by no layer")
            }
        }
    }

    /// Walks `layers` in order: each input must exist already, each output
    /// must be new (except for `copy` layers), weights must fit the layer.
    /// Nested networks of `branch` and `loop` layers see the blobs so far.
    static func checkGraph(_ layers: [LayerRef], producers: inout [String: String], prefix: String, sink: inout DiagnosticSink) {
        for layer in layers {
            sink.at(layer.location(prefix: prefix)) { sink in
                if layer.layerCase.rawValue == 0 {
                    sink.error("nn.layer.kind.unset", "the layer has no kind (its parameters are missing)")
                }
                for input in layer.inputs where producers[input] == nil {
                    sink.error("nn.layer.input.undefined",
                               "input \(quoted(input)) is neither a model input nor an output of an earlier layer")
                }
                WeightRules.check(layer, sink: &sink)
                // A branch's two arms exclude each other: each sees the blobs from before the
                // branch, and both may write the same blob (as a converted `cond` does).
                let exclusive = layer.layerCase == CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH
                var added: [String: String] = [:]
                for (field, label) in nestedNetworks(of: layer) {
                    var inner = producers
                    checkGraph(networkLayers(field), producers: &inner, prefix: label + " ", sink: &sink)
                    for (blob, producer) in inner where producers[blob] == nil && added[blob] == nil {
                        added[blob] = producer
                    }
                    if !exclusive {
                        producers.merge(added) { first, _ in first }
                        added = [:]
                    }
                }
                producers.merge(added) { first, _ in first }
                for output in layer.outputs {
                    if let earlier = producers[output], layer.layerCase != CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COPY {
                        sink.error("nn.blob.duplicate", "output \(quoted(output)) is already produced by \(earlier)")
                    } else if producers[output] == nil || producers[output] == modelInput {
                        // A copy may write over a model input's blob (a converter's identity network
                        // returns its input under the same name): that layer produces the output.
                        producers[output] = "layer \(layer.index) \(quoted(layer.name))"
                    }
                }
            }
        }
    }

    /// The networks inside control-flow layers, with how locations name them.
    private static func nestedNetworks(of layer: LayerRef) -> [(MessageView, String)] {
        guard let parameters = layer.view.message(named: layer.kind) else { return [] }
        let names: [String] = switch layer.layerCase {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH: ["ifBranch", "elseBranch"]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP: ["conditionNetwork", "bodyNetwork"]
        default: []
        }
        return names.compactMap { name in parameters.message(named: name).map { ($0, name) } }
    }
}
