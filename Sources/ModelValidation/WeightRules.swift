import CoreMLSchema
import ModelSpec

/// How one `WeightParams` stores its values.
enum WeightStorage: Equatable {
    case empty
    case float32(count: Int)
    case float16(count: Int)
    /// `rawValue` with quantization parameters (or without, which is invalid).
    case quantized(bytes: Int)
    case int8(count: Int)
    /// More than one form set: the names of the fields.
    case mixed([String])

    init(_ params: CoreML__Specification__WeightParams) {
        var forms: [String] = []
        if params.n_floatvalue > 0 { forms.append("floatValue") }
        if params.float16value.len > 0 { forms.append("float16Value") }
        if params.rawvalue.len > 0 { forms.append("rawValue") }
        if params.int8rawvalue.len > 0 { forms.append("int8RawValue") }
        if forms.count > 1 {
            self = .mixed(forms)
        } else if params.n_floatvalue > 0 {
            self = .float32(count: params.n_floatvalue)
        } else if params.float16value.len > 0 {
            self = .float16(count: params.float16value.len / 2)
        } else if params.rawvalue.len > 0 {
            self = .quantized(bytes: params.rawvalue.len)
        } else if params.int8rawvalue.len > 0 {
            self = .int8(count: params.int8rawvalue.len)
        } else {
            self = .empty
        }
    }
}

/// One weight tensor of a layer, named by its field path (`weights`,
/// `weightParams.inputGateWeightMatrix`).
struct WeightRef {
    let role: String
    let params: UnsafePointer<CoreML__Specification__WeightParams>
    var storage: WeightStorage { WeightStorage(params.pointee) }
}

/// Rules on the weights of neural-network layers: one storage form each,
/// counts that fit the layer's declared shape, valid quantization, one
/// precision per layer.
enum WeightRules {
    static func check(_ layer: LayerRef, sink: inout DiagnosticSink) {
        guard layer.layerCase.rawValue != 0, let parameters = layer.view.message(named: layer.kind) else { return }
        var all: [WeightRef] = []
        collect(in: parameters, prefix: "", into: &all)
        // A bias the layer declares unused (hasBias false) is ignored by Core
        // ML whatever it holds; so it is here.
        let used = all.filter { !($0.role == "bias" && declaresNoBias(parameters)) }
        checkStorage(used, sink: &sink)
        checkShapes(layer, sink: &sink)
    }

    private static let weightParamsName = "CoreML.Specification.WeightParams"

    /// Whether the layer parameters have a `hasBias` field that is false.
    private static func declaresNoBias(_ parameters: MessageView) -> Bool {
        guard let field = parameters.field(named: "hasBias"), field.pointee.type == PROTOBUF_C_TYPE_BOOL else { return false }
        return (parameters.pointer + Int(field.pointee.offset)).load(as: protobuf_c_boolean.self) == 0
    }

    /// Every `WeightParams` inside a layer's parameters, outside nested networks.
    static func collect(in message: MessageView, prefix: String, into weights: inout [WeightRef]) {
        for field in message.fields where field.type == PROTOBUF_C_TYPE_MESSAGE {
            let name = String(cString: field.name)
            let repeated = field.label == PROTOBUF_C_LABEL_REPEATED
            for (index, child) in message.messages(in: field).enumerated() {
                let role = prefix + name + (repeated ? "[\(index)]" : "")
                if child.typeName == weightParamsName {
                    weights.append(WeightRef(role: role, params: child.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self)))
                } else if child.typeName != "CoreML.Specification.NeuralNetwork" {
                    collect(in: child, prefix: role + ".", into: &weights)
                }
            }
        }
    }

    /// Checks that hold for every tensor whatever the layer: one storage
    /// form, whole float16 values, sound quantization parameters, and no
    /// float16 next to float32 in one layer.
    static func checkStorage(_ weights: [WeightRef], sink: inout DiagnosticSink) {
        var float32: [String] = []
        var float16: [String] = []
        for weight in weights {
            let params = weight.params.pointee
            switch weight.storage {
            case .mixed(let forms):
                sink.error("nn.weights.storage",
                           "\(weight.role) stores values in \(forms.count) forms at once (\(forms.joined(separator: ", "))); exactly one must be set")
            case .float32:
                float32.append(weight.role)
            case .float16:
                float16.append(weight.role)
                if params.float16value.len % 2 != 0 {
                    sink.error("nn.weights.storage",
                               "\(weight.role) float16Value holds \(params.float16value.len) bytes, not a whole number of 2-byte values")
                }
            case .quantized, .int8:
                checkQuantization(weight, sink: &sink)
            case .empty:
                break
            }
        }
        if let full = float32.first, let half = float16.first {
            sink.error("nn.weights.precision",
                       "the layer mixes float32 (\(full)) and float16 (\(half)) weights; use one precision per layer")
        }
    }

    private static func checkQuantization(_ weight: WeightRef, sink: inout DiagnosticSink) {
        guard let quantization = weight.params.pointee.quantization?.pointee else {
            sink.error("nn.quantization.missing", "\(weight.role) holds quantized bytes but no quantization parameters")
            return
        }
        let bits = quantization.numberofbits
        if case .int8 = weight.storage, bits != 8 {
            sink.error("nn.quantization.bits", "\(weight.role) is int8RawValue but numberOfBits is \(bits), expected 8")
        } else if bits < 1 || bits > 8 {
            sink.error("nn.quantization.bits", "\(weight.role) numberOfBits is \(bits), expected 1...8")
        }
        switch quantization.quantization_type_case {
        case CORE_ML__SPECIFICATION__QUANTIZATION_PARAMS__QUANTIZATION_TYPE_LOOKUP_TABLE_QUANTIZATION:
            if case .int8 = weight.storage {
                sink.error("nn.quantization.lookupTable", "\(weight.role) is int8RawValue, which takes linear quantization, not a lookup table")
            }
            let entries = quantization.lookuptablequantization?.pointee.n_floatvalue ?? 0
            if bits >= 1 && bits <= 8 && entries != 1 << bits {
                sink.error("nn.quantization.lookupTable",
                           "\(weight.role) lookup table has \(counted(entries, "entry")), expected \(1 << bits) = 2^\(bits)"
                            .replacingOccurrences(of: "entrys", with: "entries"))
            }
        case CORE_ML__SPECIFICATION__QUANTIZATION_PARAMS__QUANTIZATION_TYPE_LINEAR_QUANTIZATION:
            break
        default:
            sink.error("nn.quantization.missing", "\(weight.role) quantization has neither linear nor lookup-table parameters")
        }
    }

    /// Checks one tensor against the count the layer's parameters declare.
    ///
    /// - Parameters:
    ///   - expected: the number of values, `nil` when it overflows.
    ///   - explanation: how `expected` was computed, e.g. `8 output channels × 3 × 3 × 3`.
    ///   - channels: the output channels a linear quantization's scale and bias may match.
    ///   - required: whether an empty tensor is an error.
    static func expect(
        _ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>?, role: String,
        count expected: UInt64?, explanation: String, channels: UInt64, required: Bool, sink: inout DiagnosticSink
    ) {
        let rule = role.lowercased().contains("bias") ? "nn.bias.count" : "nn.weights.count"
        let holds = role.lowercased().hasSuffix("weights") ? "hold" : "holds"
        let want = expected.map { explanation.isEmpty || explanation == String($0) ? "\($0)" : "\($0) = \(explanation)" }
            ?? "\(explanation), which overflows"
        guard let params = params?.pointee else {
            if required { sink.error(rule, "\(role) is missing, expected \(want) values") }
            return
        }
        let found: Int
        switch WeightStorage(params) {
        case .empty:
            if required { sink.error(rule, "\(role) \(holds) no values, expected \(want)") }
            return
        case .mixed:
            return
        case .float32(let count), .float16(let count):
            found = count
        case .int8(let count):
            found = count
            checkLinear(params, role: role, channels: channels, sink: &sink)
        case .quantized(let bytes):
            guard let quantization = params.quantization?.pointee,
                  quantization.numberofbits >= 1, quantization.numberofbits <= 8, let expected
            else { return }
            let bits = quantization.numberofbits
            let (bitCount, overflow) = expected.multipliedReportingOverflow(by: bits)
            let needed = overflow ? UInt64.max : bitCount / 8 + (bitCount % 8 == 0 ? 0 : 1)
            if UInt64(bytes) < needed {
                sink.error("nn.quantization.bytes",
                           "\(role) rawValue holds \(counted(bytes, "byte")), expected \(needed) = ⌈\(expected) values × \(bits) bits / 8⌉")
            }
            checkLinear(params, role: role, channels: channels, sink: &sink)
            return
        }
        if let expected, UInt64(found) != expected {
            sink.error(rule, "\(role) \(holds) \(counted(found, "value")), expected \(want)")
        } else if expected == nil {
            sink.error(rule, "\(role) \(holds) \(counted(found, "value")), but the declared shape \(explanation) overflows")
        }
    }

    /// Core ML's rule: one scale, or one per output channel; no bias, or one
    /// per scale.
    private static func checkLinear(
        _ params: CoreML__Specification__WeightParams, role: String, channels: UInt64, sink: inout DiagnosticSink
    ) {
        guard let quantization = params.quantization?.pointee,
              quantization.quantization_type_case == CORE_ML__SPECIFICATION__QUANTIZATION_PARAMS__QUANTIZATION_TYPE_LINEAR_QUANTIZATION,
              let linear = quantization.linearquantization?.pointee
        else { return }
        let allowed = channels == 1 ? "1" : "1 or \(channels) (one per output channel)"
        if linear.n_scale != 1 && UInt64(linear.n_scale) != channels {
            sink.error("nn.quantization.linear", "\(role) linear quantization has \(counted(linear.n_scale, "scale")), expected \(allowed)")
        }
        if linear.n_bias != 0 && linear.n_bias != linear.n_scale {
            sink.error("nn.quantization.linear", "\(role) linear quantization has \(counted(linear.n_bias, "bias value")), "
                + "expected none or \(linear.n_scale) (one per scale)")
        }
    }

    /// The layer-specific counts.
    static func checkShapes(_ layer: LayerRef, sink: inout DiagnosticSink) {
        let pointer = layer.pointer.pointee
        switch layer.layerCase {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION:
            guard let conv = pointer.convolution?.pointee, pointer.n_input <= 1 else { return }
            let sizes = scalars(conv.kernelsize, conv.n_kernelsize)
            let height = sizes.count > 0 ? sizes[0] : 3
            let width = sizes.count > 1 ? sizes[1] : 3
            let groups = conv.ngroups == 0 ? 1 : conv.ngroups
            let out = conv.outputchannels
            let kernel = conv.kernelchannels
            if conv.isdeconvolution != 0 {
                let perGroup = out / groups
                expect(conv.weights, role: "weights", count: product([kernel, perGroup, height, width]),
                       explanation: "\(kernel) kernel channels × \(perGroup) output channels per group × \(height) × \(width)",
                       channels: out, required: true, sink: &sink)
            } else {
                expect(conv.weights, role: "weights", count: product([out, kernel, height, width]),
                       explanation: "\(out) output channels × \(kernel) kernel channels × \(height) × \(width)",
                       channels: out, required: true, sink: &sink)
            }
            if conv.hasbias != 0 {
                expect(conv.bias, role: "bias", count: out, explanation: "\(out) output channels", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT:
            guard let params = pointer.innerproduct?.pointee else { return }
            let (input, output) = (params.inputchannels, params.outputchannels)
            expect(params.weights, role: "weights", count: product([input, output]),
                   explanation: "\(input) input channels × \(output) output channels", channels: output, required: true, sink: &sink)
            if params.hasbias != 0 {
                expect(params.bias, role: "bias", count: output, explanation: "\(output) output channels", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHED_MATMUL:
            guard let params = pointer.batchedmatmul?.pointee, pointer.n_input == 1 else { return }
            let (rows, columns) = (params.weightmatrixfirstdimension, params.weightmatrixseconddimension)
            expect(params.weights, role: "weights", count: product([rows, columns]),
                   explanation: "\(rows) × \(columns) weight matrix", channels: columns, required: true, sink: &sink)
            if params.hasbias != 0 {
                expect(params.bias, role: "bias", count: columns, explanation: "\(columns) columns", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM:
            guard let params = pointer.batchnorm?.pointee else { return }
            let channels = params.channels
            let explanation = "\(channels) channels"
            expect(params.gamma, role: "gamma", count: channels, explanation: explanation, channels: 1, required: true, sink: &sink)
            expect(params.beta, role: "beta", count: channels, explanation: explanation, channels: 1, required: true, sink: &sink)
            let needsStatistics = params.computemeanvar == 0
            expect(params.mean, role: "mean", count: channels, explanation: explanation, channels: 1, required: needsStatistics, sink: &sink)
            expect(params.variance, role: "variance", count: channels, explanation: explanation, channels: 1, required: needsStatistics, sink: &sink)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING:
            guard let params = pointer.embedding?.pointee else { return }
            let (input, output) = (params.inputdim, params.outputchannels)
            expect(params.weights, role: "weights", count: product([input, output]),
                   explanation: "\(input) input dimensions × \(output) output channels", channels: output, required: true, sink: &sink)
            if params.hasbias != 0 {
                expect(params.bias, role: "bias", count: output, explanation: "\(output) output channels", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING_ND:
            guard let params = pointer.embeddingnd?.pointee else { return }
            let (vocabulary, size) = (params.vocabsize, params.embeddingsize)
            expect(params.weights, role: "weights", count: product([vocabulary, size]),
                   explanation: "\(vocabulary) vocabulary entries × \(size) embedding size", channels: size, required: true, sink: &sink)
            if params.hasbias != 0 {
                expect(params.bias, role: "bias", count: size, explanation: "\(size) embedding size", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCALE:
            guard let params = pointer.scale?.pointee else { return }
            let scaleShape = scalars(params.shapescale, params.n_shapescale)
            expect(params.scale, role: "scale", count: product(scaleShape),
                   explanation: "shapeScale " + shapeText(scaleShape), channels: 1, required: true, sink: &sink)
            if params.hasbias != 0 {
                let biasShape = scalars(params.shapebias, params.n_shapebias)
                expect(params.bias, role: "bias", count: product(biasShape),
                       explanation: "shapeBias " + shapeText(biasShape), channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BIAS:
            guard let params = pointer.bias?.pointee else { return }
            let shape = scalars(params.shape, params.n_shape)
            expect(params.bias, role: "bias", count: product(shape),
                   explanation: "shape " + shapeText(shape), channels: 1, required: true, sink: &sink)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT:
            guard let params = pointer.loadconstant?.pointee else { return }
            let shape = scalars(params.shape, params.n_shape)
            expect(params.data, role: "data", count: product(shape),
                   explanation: "shape " + shapeText(shape), channels: 1, required: true, sink: &sink)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIMPLE_RECURRENT:
            guard let params = pointer.simplerecurrent?.pointee else { return }
            let (input, output) = (params.inputvectorsize, params.outputvectorsize)
            expect(params.weightmatrix, role: "weightMatrix", count: product([output, input]),
                   explanation: "\(output) outputs × \(input) inputs", channels: output, required: true, sink: &sink)
            expect(params.recursionmatrix, role: "recursionMatrix", count: product([output, output]),
                   explanation: "\(output) outputs × \(output) outputs", channels: output, required: true, sink: &sink)
            if params.hasbiasvector != 0 {
                expect(params.biasvector, role: "biasVector", count: output, explanation: "\(output) outputs", channels: 1, required: true, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GRU:
            guard let params = pointer.gru?.pointee else { return }
            let (input, output) = (params.inputvectorsize, params.outputvectorsize)
            for (role, matrix) in [("updateGateWeightMatrix", params.updategateweightmatrix),
                                   ("resetGateWeightMatrix", params.resetgateweightmatrix),
                                   ("outputGateWeightMatrix", params.outputgateweightmatrix)] {
                expect(matrix, role: role, count: product([output, input]),
                       explanation: "\(output) outputs × \(input) inputs", channels: output, required: true, sink: &sink)
            }
            for (role, matrix) in [("updateGateRecursionMatrix", params.updategaterecursionmatrix),
                                   ("resetGateRecursionMatrix", params.resetgaterecursionmatrix),
                                   ("outputGateRecursionMatrix", params.outputgaterecursionmatrix)] {
                expect(matrix, role: role, count: product([output, output]),
                       explanation: "\(output) outputs × \(output) outputs", channels: output, required: true, sink: &sink)
            }
            if params.hasbiasvectors != 0 {
                for (role, vector) in [("updateGateBiasVector", params.updategatebiasvector),
                                       ("resetGateBiasVector", params.resetgatebiasvector),
                                       ("outputGateBiasVector", params.outputgatebiasvector)] {
                    expect(vector, role: role, count: output, explanation: "\(output) outputs", channels: 1, required: true, sink: &sink)
                }
            }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UNI_DIRECTIONAL_LSTM:
            guard let params = pointer.unidirectionallstm?.pointee else { return }
            checkLSTM(params.weightparams, prefix: "weightParams.", input: params.inputvectorsize,
                      output: params.outputvectorsize, lstm: params.params, sink: &sink)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BI_DIRECTIONAL_LSTM:
            guard let params = pointer.bidirectionallstm?.pointee else { return }
            let directions = elements(params.weightparams, params.n_weightparams)
            if directions.count != 2 {
                sink.error("nn.weights.count", "weightParams has \(counted(directions.count, "direction")), expected 2 (forward and backward)")
            }
            for (index, direction) in directions.prefix(2).enumerated() {
                checkLSTM(direction, prefix: "weightParams[\(index)].", input: params.inputvectorsize,
                          output: params.outputvectorsize, lstm: params.params, sink: &sink)
            }
        default:
            break
        }
    }

    private static func checkLSTM(
        _ weights: UnsafeMutablePointer<CoreML__Specification__LSTMWeightParams>?, prefix: String,
        input: UInt64, output: UInt64, lstm: UnsafeMutablePointer<CoreML__Specification__LSTMParams>?, sink: inout DiagnosticSink
    ) {
        guard let w = weights?.pointee else {
            sink.error("nn.weights.count", "\(prefix.dropLast()) is missing")
            return
        }
        let matrices = [("inputGateWeightMatrix", w.inputgateweightmatrix), ("forgetGateWeightMatrix", w.forgetgateweightmatrix),
                        ("blockInputWeightMatrix", w.blockinputweightmatrix), ("outputGateWeightMatrix", w.outputgateweightmatrix)]
        for (role, matrix) in matrices {
            expect(matrix, role: prefix + role, count: product([output, input]),
                   explanation: "\(output) outputs × \(input) inputs", channels: output, required: true, sink: &sink)
        }
        let recursions = [("inputGateRecursionMatrix", w.inputgaterecursionmatrix), ("forgetGateRecursionMatrix", w.forgetgaterecursionmatrix),
                          ("blockInputRecursionMatrix", w.blockinputrecursionmatrix), ("outputGateRecursionMatrix", w.outputgaterecursionmatrix)]
        for (role, matrix) in recursions {
            expect(matrix, role: prefix + role, count: product([output, output]),
                   explanation: "\(output) outputs × \(output) outputs", channels: output, required: true, sink: &sink)
        }
        if lstm?.pointee.hasbiasvectors ?? 0 != 0 {
            let biases = [("inputGateBiasVector", w.inputgatebiasvector), ("forgetGateBiasVector", w.forgetgatebiasvector),
                          ("blockInputBiasVector", w.blockinputbiasvector), ("outputGateBiasVector", w.outputgatebiasvector)]
            for (role, vector) in biases {
                expect(vector, role: prefix + role, count: output, explanation: "\(output) outputs", channels: 1, required: true, sink: &sink)
            }
        }
        if lstm?.pointee.haspeepholevectors ?? 0 != 0 {
            let peepholes = [("inputGatePeepholeVector", w.inputgatepeepholevector), ("forgetGatePeepholeVector", w.forgetgatepeepholevector),
                             ("outputGatePeepholeVector", w.outputgatepeepholevector)]
            for (role, vector) in peepholes {
                expect(vector, role: prefix + role, count: output, explanation: "\(output) outputs", channels: 1, required: true, sink: &sink)
            }
        }
    }
}
