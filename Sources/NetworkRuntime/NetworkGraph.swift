import CoreMLSchema
import ModelFeatures
import ModelSpec

/// What one layer computes, read from the specification with its weights
/// decoded: the graph half of the runtime. Shapes are worked out by the plan.
enum LayerOperation: Sendable {
    struct Convolution: Sendable {
        var outputChannels: Int
        var kernelChannels: Int
        var groups: Int
        var kernel: (height: Int, width: Int)
        var stride: (height: Int, width: Int)
        var dilation: (height: Int, width: Int)
        var padding: Padding
        /// `[out, kernelChannels, kH, kW]`, as Core ML stores them.
        var weights: [Float]
        var bias: [Float]?
    }

    enum Padding: Sendable {
        /// Explicit amounts: top, bottom, left, right.
        case valid(top: Int, bottom: Int, left: Int, right: Int)
        /// Output = ceil(input / stride); the odd pixel goes to the bottom/right, or top/left.
        case same(bottomRightHeavy: Bool)
        /// Pooling only: Caffe's rounding up, so the last pixel is covered.
        case includeLastPixel(height: Int, width: Int)
    }

    struct Pooling: Sendable {
        enum Kind: Sendable { case max, average, l2 }
        var kind: Kind
        var kernel: (height: Int, width: Int)
        var stride: (height: Int, width: Int)
        var padding: Padding
        var global: Bool
        var excludePadding: Bool
    }

    enum Activation: Sendable {
        case linear(alpha: Float, beta: Float)
        case relu
        case leakyRelu(alpha: Float)
        case thresholdedRelu(alpha: Float)
        case prelu(alpha: [Float])
        case tanh
        case scaledTanh(alpha: Float, beta: Float)
        case sigmoid
        case sigmoidHard(alpha: Float, beta: Float)
        case elu(alpha: Float)
        case softsign
        case softplus
        case parametricSoftplus(alpha: [Float], beta: [Float])
        /// min(max(x, low), high): relu6 and friends after fusion.
        case clip(low: Float, high: Float)
    }

    case convolution(Convolution)
    case innerProduct(outputs: Int, inputs: Int, weights: [Float], bias: [Float]?)
    /// y = x × scale[c] + shift[c] (batch norm folded at read).
    case channelAffine(scale: [Float], shift: [Float])
    case activation(Activation)
    case pooling(Pooling)
    /// Softmax over the channel axis (rank-5 layers) or `axis` (ND).
    case softmax(axis: Int?)
    case flatten(channelLast: Bool)
    case add(alpha: Float)
    case multiply(alpha: Float)
    case average, maximum, minimum
    case concat
    case batchedMatMul(transposeA: Bool, transposeB: Bool, weights: [Float]?, first: Int, second: Int, bias: [Float]?)
}

/// One layer of the graph.
struct NetworkNode: Sendable {
    let name: String
    let kind: String
    let inputs: [String]
    let outputs: [String]
    let operation: LayerOperation
}

/// The layers of a neural network in order, read once.
struct NetworkGraph: Sendable {
    let nodes: [NetworkNode]
    /// Whether multi-array inputs keep their rank (`EXACT_ARRAY_MAPPING`)
    /// instead of being read as rank-5 [C] / [C, H, W] blobs.
    let exactArrayMapping: Bool

    /// Reads every layer; a layer kind modelc does not run is refused, naming it.
    init(layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>], exactArrayMapping: Bool,
         weights: WeightDecoder) throws(RuntimeError) {
        self.exactArrayMapping = exactArrayMapping
        var nodes: [NetworkNode] = []
        for layer in layers {
            let view = MessageView(layer)
            let kind = layer.pointee.layer_case.rawValue == 0 ? "unset" : view.fieldName(number: layer.pointee.layer_case.rawValue) ?? "unknown"
            let name = text(layer.pointee.name)
            let operation = try LayerReader(layer: layer.pointee, name: name, kind: kind, weights: weights).operation()
            nodes.append(NetworkNode(name: name, kind: kind, inputs: strings(layer.pointee.input, layer.pointee.n_input),
                                     outputs: strings(layer.pointee.output, layer.pointee.n_output), operation: operation))
        }
        self.nodes = nodes
    }
}

/// Reads one layer's parameters into a `LayerOperation`.
private struct LayerReader {
    let layer: CoreML__Specification__NeuralNetworkLayer
    let name: String
    let kind: String
    let weights: WeightDecoder

    private func bad(_ detail: String) -> RuntimeError { .invalidParameters(model: "layer \"\(name)\" (\(kind))", detail: detail) }

    func operation() throws(RuntimeError) -> LayerOperation {
        switch layer.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION:
            guard let params = layer.convolution?.pointee else { throw bad("no parameters") }
            return try convolution(params)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT:
            guard let params = layer.innerproduct?.pointee else { throw bad("no parameters") }
            let outputs = Int(params.outputchannels), inputs = Int(params.inputchannels)
            let values = try weights.required(params.weights, layer: name, role: "weights", count: outputs * inputs, channels: outputs)
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputs) : nil
            return .innerProduct(outputs: outputs, inputs: inputs, weights: values, bias: bias)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM:
            guard let params = layer.batchnorm?.pointee else { throw bad("no parameters") }
            guard params.computemeanvar == 0, params.instancenormalization == 0 else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "batch norm computing its mean and variance at run time is not supported yet")
            }
            let channels = Int(params.channels)
            let gamma = try weights.required(params.gamma, layer: name, role: "gamma", count: channels)
            let beta = try weights.required(params.beta, layer: name, role: "beta", count: channels)
            let mean = try weights.required(params.mean, layer: name, role: "mean", count: channels)
            let variance = try weights.required(params.variance, layer: name, role: "variance", count: channels)
            var scale = [Float](repeating: 0, count: channels), shift = scale
            for c in 0..<channels {
                scale[c] = gamma[c] / (variance[c] + params.epsilon).squareRoot()
                shift[c] = beta[c] - mean[c] * scale[c]
            }
            return .channelAffine(scale: scale, shift: shift)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACTIVATION:
            guard let params = layer.activation?.pointee else { throw bad("no parameters") }
            return .activation(try activation(params))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POOLING:
            guard let params = layer.pooling?.pointee else { throw bad("no parameters") }
            return .pooling(try pooling(params))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SOFTMAX:
            return .softmax(axis: nil)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SOFTMAX_ND:
            return .softmax(axis: Int(layer.softmaxnd?.pointee.axis ?? -1))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLATTEN:
            return .flatten(channelLast: layer.flatten?.pointee.mode == CORE_ML__SPECIFICATION__FLATTEN_LAYER_PARAMS__FLATTEN_ORDER__CHANNEL_LAST)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD:
            return .add(alpha: layer.add?.pointee.alpha ?? 0)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY:
            return .multiply(alpha: layer.multiply?.pointee.alpha ?? 1)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_AVERAGE: return .average
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX: return .maximum
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN: return .minimum
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT:
            guard layer.concat?.pointee.sequenceconcat == 0 else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "concatenation along the sequence axis is not supported")
            }
            return .concat
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHED_MATMUL:
            guard let params = layer.batchedmatmul?.pointee else { throw bad("no parameters") }
            let first = Int(params.weightmatrixfirstdimension), second = Int(params.weightmatrixseconddimension)
            let matrix = try weights.floats(params.weights, layer: name, role: "weights", channels: 1)
            if let matrix, matrix.count != first * second {
                throw bad("weights hold \(matrix.count) values, expected \(first) × \(second)")
            }
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: second) : nil
            return .batchedMatMul(transposeA: params.transposea != 0, transposeB: params.transposeb != 0,
                                  weights: matrix, first: first, second: second, bias: bias)
        default:
            throw .unsupportedLayer(layer: name, kind: kind, reason: "modelc does not run this layer kind yet")
        }
    }

    private func convolution(_ params: CoreML__Specification__ConvolutionLayerParams) throws(RuntimeError) -> LayerOperation {
        guard params.isdeconvolution == 0 else {
            throw .unsupportedLayer(layer: name, kind: "deconvolution", reason: "modelc does not run deconvolution yet")
        }
        let sizes = scalars(params.kernelsize, params.n_kernelsize).map(Int.init)
        let strides = scalars(params.stride, params.n_stride).map(Int.init)
        let dilations = scalars(params.dilationfactor, params.n_dilationfactor).map(Int.init)
        let kernel = (sizes.count == 2 ? sizes[0] : 3, sizes.count == 2 ? sizes[1] : 3)
        let stride = (strides.count == 2 ? strides[0] : 1, strides.count == 2 ? strides[1] : 1)
        let dilation = (dilations.count == 2 ? dilations[0] : 1, dilations.count == 2 ? dilations[1] : 1)
        let groups = max(1, Int(params.ngroups))
        let outputChannels = Int(params.outputchannels), kernelChannels = Int(params.kernelchannels)
        guard outputChannels % groups == 0 else { throw bad("\(outputChannels) output channels in \(groups) groups") }
        let values = try weights.required(params.weights, layer: name, role: "weights",
                                          count: outputChannels * kernelChannels * kernel.0 * kernel.1, channels: outputChannels)
        let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputChannels) : nil
        let padding: LayerOperation.Padding
        if params.convolution_padding_type_case == CORE_ML__SPECIFICATION__CONVOLUTION_LAYER_PARAMS__CONVOLUTION_PADDING_TYPE_SAME {
            padding = .same(bottomRightHeavy: params.same?.pointee.asymmetrymode != CORE_ML__SPECIFICATION__SAME_PADDING__SAME_PADDING_MODE__TOP_LEFT_HEAVY)
        } else {
            padding = Self.validPadding(params.valid)
        }
        return .convolution(.init(outputChannels: outputChannels, kernelChannels: kernelChannels, groups: groups,
                                  kernel: kernel, stride: stride, dilation: dilation, padding: padding,
                                  weights: values, bias: bias))
    }

    private static func validPadding(_ valid: UnsafeMutablePointer<CoreML__Specification__ValidPadding>?) -> LayerOperation.Padding {
        let amounts = valid?.pointee.paddingamounts.map { elements($0.pointee.borderamounts, $0.pointee.n_borderamounts) } ?? []
        guard amounts.count == 2 else { return .valid(top: 0, bottom: 0, left: 0, right: 0) }
        return .valid(top: Int(amounts[0].pointee.startedgesize), bottom: Int(amounts[0].pointee.endedgesize),
                      left: Int(amounts[1].pointee.startedgesize), right: Int(amounts[1].pointee.endedgesize))
    }

    private func pooling(_ params: CoreML__Specification__PoolingLayerParams) throws(RuntimeError) -> LayerOperation.Pooling {
        let sizes = scalars(params.kernelsize, params.n_kernelsize).map(Int.init)
        let strides = scalars(params.stride, params.n_stride).map(Int.init)
        let kind: LayerOperation.Pooling.Kind = switch params.type {
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_TYPE__AVERAGE: .average
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_TYPE__L2: .l2
        default: .max
        }
        let padding: LayerOperation.Padding
        switch params.pooling_padding_type_case {
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_PADDING_TYPE_SAME:
            padding = .same(bottomRightHeavy: params.same?.pointee.asymmetrymode != CORE_ML__SPECIFICATION__SAME_PADDING__SAME_PADDING_MODE__TOP_LEFT_HEAVY)
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_PADDING_TYPE_INCLUDE_LAST_PIXEL:
            let amounts = params.includelastpixel.map { scalars($0.pointee.paddingamounts, $0.pointee.n_paddingamounts).map(Int.init) } ?? []
            padding = .includeLastPixel(height: amounts.count == 2 ? amounts[0] : 0, width: amounts.count == 2 ? amounts[1] : 0)
        default:
            padding = Self.validPadding(params.valid)
        }
        return .init(kind: kind, kernel: (sizes.count == 2 ? sizes[0] : 3, sizes.count == 2 ? sizes[1] : 3),
                     stride: (strides.count == 2 ? strides[0] : 1, strides.count == 2 ? strides[1] : 1),
                     padding: padding, global: params.globalpooling != 0, excludePadding: params.avgpoolexcludepadding != 0)
    }

    private func activation(_ params: CoreML__Specification__ActivationParams) throws(RuntimeError) -> LayerOperation.Activation {
        switch params.nonlinearity_type_case {
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_LINEAR:
            return .linear(alpha: params.linear?.pointee.alpha ?? 0, beta: params.linear?.pointee.beta ?? 0)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_RE_LU: return .relu
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_LEAKY_RE_LU: return .leakyRelu(alpha: params.leakyrelu?.pointee.alpha ?? 0)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_THRESHOLDED_RE_LU: return .thresholdedRelu(alpha: params.thresholdedrelu?.pointee.alpha ?? 0)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_PRE_LU:
            guard let alpha = try weights.floats(params.prelu?.pointee.alpha, layer: name, role: "PReLU.alpha") else { throw bad("PReLU without alpha") }
            return .prelu(alpha: alpha)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_TANH: return .tanh
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SCALED_TANH:
            return .scaledTanh(alpha: params.scaledtanh?.pointee.alpha ?? 1, beta: params.scaledtanh?.pointee.beta ?? 1)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID: return .sigmoid
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID_HARD:
            return .sigmoidHard(alpha: params.sigmoidhard?.pointee.alpha ?? 0.2, beta: params.sigmoidhard?.pointee.beta ?? 0.5)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_ELU: return .elu(alpha: params.elu?.pointee.alpha ?? 1)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SOFTSIGN: return .softsign
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SOFTPLUS: return .softplus
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_PARAMETRIC_SOFTPLUS:
            let alpha = try weights.floats(params.parametricsoftplus?.pointee.alpha, layer: name, role: "parametricSoftplus.alpha") ?? []
            let beta = try weights.floats(params.parametricsoftplus?.pointee.beta, layer: name, role: "parametricSoftplus.beta") ?? []
            return .parametricSoftplus(alpha: alpha, beta: beta)
        default:
            throw bad("no activation kind set")
        }
    }
}
