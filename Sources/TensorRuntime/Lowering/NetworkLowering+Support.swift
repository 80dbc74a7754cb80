import CoreMLSchema
import ModelFeatures
import ModelSpec

extension NetworkLowering {
    /// Why a layer whose kind has no entry in `layers` is refused.
    static let noRuleReason = "the tensor engine's lowering has no rule for this layer kind yet"

    /// Every layer of the network in `model` (a NeuralNetwork, classifier or
    /// regressor), the networks of its loops and branches included, whose kind
    /// the lowering has no rule for, in order: what a support check lists
    /// without preparing the network.
    static func layersWithoutRule(in model: UnsafePointer<CoreML__Specification__Model>) -> [RuntimeError] {
        let spec = model.pointee
        let layers: [UnsafeMutablePointer<Layer>] = switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            spec.neuralnetworkclassifier.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            spec.neuralnetworkregressor.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        default:
            spec.neuralnetwork.map { elements($0.pointee.layers, $0.pointee.n_layers) } ?? []
        }
        var problems: [RuntimeError] = []
        collectLayersWithoutRule(layers, into: &problems)
        return problems
    }

    /// Every blob a layer of `layers` reads (a loop its `conditionVar`), the layers of their loops and branches included.
    static func blobsRead(by layers: [UnsafeMutablePointer<Layer>]) -> Set<String> {
        var read: Set<String> = []
        for layer in layers {
            read.formUnion(strings(layer.pointee.input, layer.pointee.n_input))
            // The layer's parameters are a union: `loop` is read only for a loop layer.
            if layer.pointee.layer_case == CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP, let loop = layer.pointee.loop?.pointee {
                read.insert(text(loop.conditionvar))
            }
            for case let network? in nestedNetworks(of: layer) {
                read.formUnion(blobsRead(by: elements(network.pointee.layers, network.pointee.n_layers)))
            }
        }
        return read
    }

    /// The networks of a loop (condition, body) or a branch (if, else); none for other layers.
    private static func nestedNetworks(of layer: UnsafeMutablePointer<Layer>) -> [UnsafeMutablePointer<CoreML__Specification__NeuralNetwork>?] {
        switch layer.pointee.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP:
            [layer.pointee.loop?.pointee.conditionnetwork, layer.pointee.loop?.pointee.bodynetwork]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH:
            [layer.pointee.branch?.pointee.ifbranch, layer.pointee.branch?.pointee.elsebranch]
        default:
            []
        }
    }

    private static func collectLayersWithoutRule(_ list: [UnsafeMutablePointer<Layer>], into problems: inout [RuntimeError]) {
        for layer in list {
            if Self.layers[layer.pointee.layer_case.rawValue] == nil {
                problems.append(.unsupportedLayer(layer: text(layer.pointee.name), kind: kind(of: layer), reason: noRuleReason))
            }
            for case let network? in nestedNetworks(of: layer) {
                collectLayersWithoutRule(elements(network.pointee.layers, network.pointee.n_layers), into: &problems)
            }
        }
    }
}

extension TensorEngine {
    /// Every layer of the network in `model` whose kind the lowering has no
    /// rule for (`RuntimeError.unsupportedLayer`, the lowering's message), in
    /// order; nested networks of loops and branches included. Parameters a
    /// rule cannot honour show only when the network is prepared.
    package static func layersWithoutLowering(in model: UnsafePointer<CoreML__Specification__Model>) -> [RuntimeError] {
        NetworkLowering.layersWithoutRule(in: model)
    }
}
