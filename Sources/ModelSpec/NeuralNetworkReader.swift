import CoreMLSchema


/// Reads the layers and weight tensors of a neural network (plain,
/// classifier or regressor).
///
/// Weight tensors are found through the schema's descriptors: every
/// `WeightParams` message anywhere inside a layer's parameters, whichever of
/// the 158 layer kinds it is, so no layer kind is missed or hand-listed.
struct NeuralNetworkReader {
    let layers: [Layer]
    let weights: [WeightTensor]

    private static let weightParamsName = "CoreML.Specification.WeightParams"

    init(network: MessageView) {
        var layers: [Layer] = []
        var weights: [WeightTensor] = []
        for layerView in network.message(fieldsNamed: "layers") {
            let layer = layerView.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkLayer.self).pointee
            let name = text(layer.name)
            let kind = layer.layer_case.rawValue == 0
                ? "unset" : layerView.fieldName(number: layer.layer_case.rawValue) ?? "unknown(\(layer.layer_case.rawValue))"
            layers.append(Layer(name: name, kind: kind,
                                inputs: strings(layer.input, layer.n_input),
                                outputs: strings(layer.output, layer.n_output),
                                isUpdatable: layer.isupdatable != 0))
            if let parameters = layerView.message(named: kind) {
                Self.collectWeights(in: parameters, layer: name, prefix: "", into: &weights)
            }
        }
        self.layers = layers
        self.weights = weights
    }

    private static func collectWeights(in message: MessageView, layer: String, prefix: String, into weights: inout [WeightTensor]) {
        for field in message.fields where field.type == PROTOBUF_C_TYPE_MESSAGE {
            let children = message.messages(in: field)
            let repeated = field.label == PROTOBUF_C_LABEL_REPEATED
            for (index, child) in children.enumerated() {
                let role = prefix + String(cString: field.name) + (repeated ? "[\(index)]" : "")
                if child.typeName == weightParamsName {
                    let params = child.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self).pointee
                    if let tensor = WeightTensor(params, layer: layer, role: role) { weights.append(tensor) }
                } else {
                    collectWeights(in: child, layer: layer, prefix: role + ".", into: &weights)
                }
            }
        }
    }
}

extension MessageView {
    /// The messages of the repeated field `name`.
    package func message(fieldsNamed name: String) -> [MessageView] {
        guard let field = field(named: name) else { return [] }
        return messages(in: field.pointee)
    }
}

extension WeightTensor {
    /// Describes one `WeightParams`; `nil` when it holds no values at all.
    init?(_ params: CoreML__Specification__WeightParams, layer: String, role: String) {
        let float32 = params.n_floatvalue
        let float16 = params.float16value.len
        let raw = params.rawvalue.len
        let int8 = params.int8rawvalue.len
        let forms = [float32, float16, raw, int8].filter { $0 > 0 }.count
        guard forms > 0 else { return nil }
        self.layer = layer
        self.role = role
        let bits = params.quantization.map { Int(clamping: $0.pointee.numberofbits) }
        quantizationBits = nil
        if forms > 1 {
            storage = .mixed
            count = max(float32, float16 / 2, int8)
            bytes = float32 * 4 + float16 + raw + int8
        } else if float32 > 0 {
            storage = .float32
            count = float32
            bytes = float32 * 4
        } else if float16 > 0 {
            storage = .float16
            count = float16 / 2
            bytes = float16
        } else if raw > 0 {
            storage = .quantized
            quantizationBits = bits
            count = bits.map { $0 > 0 ? raw * 8 / $0 : 0 } ?? 0
            bytes = raw
        } else {
            storage = .int8
            quantizationBits = bits
            count = int8
            bytes = int8
        }
    }
}
