import CoreMLSchema
import ModelSpec

/// Rules on updatable neural networks: what is trained, with which loss,
/// optimizer and training inputs.
enum UpdatableRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        guard model.pointee.isupdatable != 0, let network = networkMessage(model) else { return }
        let all = networkLayers(network)
        let updatable = all.filter { $0.pointer.pointee.isupdatable != 0 }
        if updatable.isEmpty {
            sink.error("update.layers.none", "the model is updatable but none of its \(counted(all.count, "layer")) is marked updatable")
        }
        for layer in updatable {
            sink.at(layer.location()) { sink in
                let pointer = layer.pointer.pointee
                let weights: [(String, UnsafeMutablePointer<CoreML__Specification__WeightParams>?)]
                switch layer.layerCase {
                case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION:
                    weights = [("weights", pointer.convolution?.pointee.weights), ("bias", pointer.convolution?.pointee.bias)]
                case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT:
                    weights = [("weights", pointer.innerproduct?.pointee.weights), ("bias", pointer.innerproduct?.pointee.bias)]
                default:
                    sink.error("update.layer.kind", "\(layer.kind) layers cannot be updatable; only convolution and innerProduct can")
                    return
                }
                for (role, params) in weights {
                    guard let params = params?.pointee else { continue }
                    switch WeightStorage(params) {
                    case .float32, .empty: break
                    default:
                        sink.error("update.weights.precision", "updatable \(role) must be stored as float32 (floatValue)")
                    }
                }
            }
        }

        guard let update = network.message(named: "updateParams")?.pointer
            .assumingMemoryBound(to: CoreML__Specification__NetworkUpdateParameters.self).pointee
        else {
            sink.error("update.params.missing", "the model is updatable but has no update parameters (updateParams)")
            return
        }
        let produced = Set(all.flatMap(\.outputs))
        let trainingInputs = model.trainingInputs
        if trainingInputs.isEmpty {
            sink.error("update.trainingInputs.missing", "the model is updatable but declares no training inputs")
        }
        let losses = elements(update.losslayers, update.n_losslayers)
        if losses.count != 1 {
            sink.error("update.loss.count", "the update parameters hold \(counted(losses.count, "loss layer")), expected exactly 1")
        }
        for (index, loss) in losses.enumerated() {
            let name = text(loss.pointee.name)
            sink.at("loss layer \(index) \(quoted(name))") { sink in
                let ends: (input: String, target: String)?
                switch loss.pointee.loss_layer_type_case {
                case CORE_ML__SPECIFICATION__LOSS_LAYER__LOSS_LAYER_TYPE_CATEGORICAL_CROSS_ENTROPY_LOSS_LAYER:
                    ends = loss.pointee.categoricalcrossentropylosslayer.map { (text($0.pointee.input), text($0.pointee.target)) }
                case CORE_ML__SPECIFICATION__LOSS_LAYER__LOSS_LAYER_TYPE_MEAN_SQUARED_ERROR_LOSS_LAYER:
                    ends = loss.pointee.meansquarederrorlosslayer.map { (text($0.pointee.input), text($0.pointee.target)) }
                default:
                    sink.error("update.loss.kind", "the loss layer has no kind; it must be categoricalCrossEntropy or meanSquaredError")
                    return
                }
                guard let ends else { return }
                if !produced.contains(ends.input) {
                    sink.error("update.loss.input", "the loss input \(quoted(ends.input)) is not the output of any layer")
                }
                // A classifier is trained against its class label, which the
                // network maps to the loss target itself.
                let predicted = text(model.pointee.description?.pointee.predictedfeaturename)
                if model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER {
                    if !trainingInputs.contains(where: { $0.name == predicted }) {
                        sink.error("update.loss.target",
                                   "the training inputs lack the predicted class \(quoted(predicted)), which the loss target \(quoted(ends.target)) is built from")
                    }
                } else if !trainingInputs.contains(where: { $0.name == ends.target }) {
                    sink.error("update.loss.target", "the loss target \(quoted(ends.target)) is not among the training inputs")
                }
            }
        }
        checkOptimizer(update.optimizer, sink: &sink)
        if update.epochs == nil {
            sink.error("update.epochs.missing", "the update parameters set no number of epochs")
        }
    }

    private static func checkOptimizer(_ optimizer: UnsafeMutablePointer<CoreML__Specification__Optimizer>?, sink: inout DiagnosticSink) {
        guard let optimizer = optimizer?.pointee else {
            sink.error("update.optimizer.missing", "the update parameters have no optimizer (sgd or adam)")
            return
        }
        var missing: [String] = []
        let name: String
        switch optimizer.optimizer_type_case {
        case CORE_ML__SPECIFICATION__OPTIMIZER__OPTIMIZER_TYPE_SGD_OPTIMIZER:
            name = "sgd"
            let sgd = optimizer.sgdoptimizer?.pointee
            if sgd?.learningrate == nil { missing.append("learningRate") }
            if sgd?.minibatchsize == nil { missing.append("miniBatchSize") }
            if sgd?.momentum == nil { missing.append("momentum") }
        case CORE_ML__SPECIFICATION__OPTIMIZER__OPTIMIZER_TYPE_ADAM_OPTIMIZER:
            name = "adam"
            let adam = optimizer.adamoptimizer?.pointee
            if adam?.learningrate == nil { missing.append("learningRate") }
            if adam?.minibatchsize == nil { missing.append("miniBatchSize") }
            if adam?.beta1 == nil { missing.append("beta1") }
            if adam?.beta2 == nil { missing.append("beta2") }
            if adam?.eps == nil { missing.append("eps") }
        default:
            sink.error("update.optimizer.missing", "the optimizer has no kind; it must be sgd or adam")
            return
        }
        if !missing.isEmpty {
            sink.error("update.optimizer.parameter", "the \(name) optimizer does not set \(missing.joined(separator: ", "))")
        }
    }
}
