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
        /// A transposed convolution: weights `[in, out / groups, kH, kW]`.
        var isDeconvolution = false
        /// Deconvolution: the output's height and width when the layer fixes them.
        var outputShape: [Int] = []
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
        /// Exact (erf), or the tanh or sigmoid approximation.
        case gelu(GeluMode)
        case silu

        enum GeluMode: Sendable { case exact, tanh, sigmoid }
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

    enum PaddingMode: Sendable { case constant(Float), reflection, replication }
    enum Unary: Sendable {
        case sqrt, rsqrt, inverse, power(Float), exp, log, abs, threshold(Float)
    }
    enum ReduceMode: Sendable { case sum, average, product, logSum, sumSquare, l1, l2, max, min, argmax }
    enum ReduceAxes: Sendable { case chw, hw, c, h, w }
    enum SliceAxis: Sendable { case channel, height, width }

    /// Pads height and width: top, bottom, left, right.
    case pad(top: Int, bottom: Int, left: Int, right: Int, mode: PaddingMode)
    /// Bilinear sampling positions: `out / factor` (Core ML's default), corners aligned, or pixel centres aligned.
    enum UpsampleMode: Sendable { case nearest, bilinearDefault, bilinearAlignCorners, bilinearHalfPixel }
    case upsample(height: Int, width: Int, mode: UpsampleMode)
    /// Crops by amounts (one input) or to the second input's size from an offset.
    case crop(top: Int, bottom: Int, left: Int, right: Int, offset: (Int, Int)?)
    /// y = x × scale + bias, with scale and bias of shape [1], [C] or [C, H, W].
    case scaleBias(scale: [Float]?, scaleShape: [Int], bias: [Float]?, biasShape: [Int])
    case unary(Unary, scale: Float, shift: Float, epsilon: Float)
    case l2Normalize(epsilon: Float)
    case lrn(alpha: Float, beta: Float, size: Int, k: Float)
    case meanVarianceNormalize(acrossChannels: Bool, normalizeVariance: Bool, epsilon: Float)
    case split(parts: Int)
    case slice(axis: SliceAxis, start: Int, end: Int, stride: Int)
    case reduce(ReduceMode, axes: ReduceAxes, epsilon: Float)
    case embedding(inputDim: Int, outputs: Int, weights: [Float], bias: [Float]?)
    /// Rows of an `outputs × vocabulary` matrix picked by the indices of an
    /// input `(…, 1)`, giving `(…, outputs)`.
    case embeddingND(vocabulary: Int, outputs: Int, weights: [Float], bias: [Float]?)
    case loadConstant(shape: [Int], values: [Float])
    case dot(cosine: Bool)
    /// Reorders [S, C, H, W] axes (S is 1 here).
    case permute([Int])
    case reshape(shape: [Int], channelLast: Bool)
    /// Rank-N layers whose output only renames the same elements.
    case squeeze(axes: [Int], all: Bool)
    case expandDims(axes: [Int])
    /// `zerosFromEnd`: a 0 copies the input dimension at the same distance from the end (iOS 17 `reshape`).
    case reshapeStatic([Int], zerosFromEnd: Bool = false)
    case flattenTo2D(axis: Int)
    case transpose([Int])
    /// Repeats the input `reps[i]` times along axis i (`reps` aligned to the
    /// input's last axes).
    case tile(reps: [Int])
    /// Joins the inputs along `axis`; `interleave`: element by element
    /// (inputs of one shape: output index i × n + k along the axis is input k's i).
    case concatND(axis: Int, interleave: Bool)

    // ML program operations, on tensors of any rank.
    /// A binary operation with NumPy broadcasting.
    case binary(StepKind.Elementwise)
    /// `x · Wᵀ + b` on the last dimension.
    case linear(outputs: Int, inputs: Int, weights: [Float], bias: [Float]?)
    /// Normalizes over the last `axes` dimensions, then scales and shifts.
    case layerNorm(axes: Int, gamma: [Float]?, beta: [Float]?, epsilon: Float)
    case reduceAxes(ReduceMode, axes: [Int], keepDimensions: Bool)
    case sliceByIndex(begin: [Int], end: [Int], stride: [Int], beginMask: [Bool], endMask: [Bool], squeezeMask: [Bool])
    case padConstant(pads: [Int], mode: PaddingMode)
    /// `batchDims` leading dimensions shared by the input and the indices (MIL's `batch_dims`).
    case gatherConstant(indices: [Int], indexShape: [Int], axis: Int, batchDims: Int = 0)
    /// Splits along `axis` into `sizes`, or into `parts` equal pieces.
    case splitAxis(sizes: [Int]?, parts: Int, axis: Int)
    case castToInteger
    /// Each channel normalized over its plane, then scaled by γ and shifted by β.
    case instanceNorm(gamma: [Float], beta: [Float], epsilon: Float)
}

extension LayerOperation {
    /// Whether the layer reads its input as `[C, H, W]` items, every dimension
    /// before the last three being batch (NeuralNetwork.proto's rank-4 and
    /// rank-5 rule): such a layer runs once per item of a batch.
    var readsChannelItems: Bool {
        switch self {
        case .convolution, .channelAffine, .pooling, .softmax(axis: .none), .flatten, .split, .pad, .upsample, .crop,
             .scaleBias, .l2Normalize, .lrn, .meanVarianceNormalize, .slice, .reduce, .dot, .instanceNorm:
            true
        case .activation(let activation):
            !activation.parameters.isEmpty
        default:
            false
        }
    }
}

/// One layer of the graph.
struct NetworkNode: Sendable {
    let name: String
    let kind: String
    let inputs: [String]
    let outputs: [String]
    let operation: LayerOperation
}

extension NetworkNode {
    /// The node with its convolution or inner product weights replaced.
    func replacingWeights(_ weights: [Float]) -> NetworkNode {
        switch operation {
        case .convolution(var conv):
            conv.weights = weights
            return NetworkNode(name: name, kind: kind, inputs: inputs, outputs: outputs, operation: .convolution(conv))
        case .innerProduct(let outputCount, let inputCount, _, let bias):
            return NetworkNode(name: name, kind: kind, inputs: inputs, outputs: outputs,
                               operation: .innerProduct(outputs: outputCount, inputs: inputCount, weights: weights, bias: bias))
        default:
            return self
        }
    }
}

/// The layers of a neural network in order, read once.
struct NetworkGraph: Sendable {
    private(set) var nodes: [NetworkNode]
    /// Whether multi-array inputs keep their rank (`EXACT_ARRAY_MAPPING`)
    /// instead of being read as rank-5 [C] / [C, H, W] blobs.
    let exactArrayMapping: Bool

    init(nodes: [NetworkNode], exactArrayMapping: Bool) {
        self.nodes = nodes
        self.exactArrayMapping = exactArrayMapping
    }

    /// Replaces the weights of the named convolution and inner product layers
    /// (emptied while a prepared kernel holds them, or put back), in place.
    mutating func replaceWeights(_ weights: [String: [Float]]) {
        for index in nodes.indices {
            if let replacement = weights[nodes[index].name] { nodes[index] = nodes[index].replacingWeights(replacement) }
        }
    }

    /// Whether the named layer's weights can be emptied while a prepared
    /// kernel holds them: a convolution (not transposed) or an inner product.
    func holdsPreparableWeights(_ layer: String) -> Bool {
        nodes.contains { node in
            guard node.name == layer else { return false }
            switch node.operation {
            case .convolution(let conv): return !conv.isDeconvolution
            case .innerProduct: return true
            default: return false
            }
        }
    }

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

extension NetworkGraph {
    /// Every layer of `layers` that modelc cannot run, with the reason
    /// (reading all of them, where preparing stops at the first).
    static func unsupportedLayers(_ layers: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkLayer>],
                                  weights: WeightDecoder) -> [RuntimeError] {
        layers.compactMap { layer -> RuntimeError? in
            let view = MessageView(layer)
            let kind = layer.pointee.layer_case.rawValue == 0 ? "unset" : view.fieldName(number: layer.pointee.layer_case.rawValue) ?? "unknown"
            do throws(RuntimeError) {
                _ = try LayerReader(layer: layer.pointee, name: text(layer.pointee.name), kind: kind, weights: weights).operation()
                return nil
            } catch {
                if case .unsupportedLayer = error { return error }
                return nil
            }
        }
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
            // Valid from specification 4 (the weights as a second input blob), not run here.
            guard layer.n_input < 2 else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "weights given as a second input (computed at run time) are not supported")
            }
            return try convolution(params)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT:
            guard let params = layer.innerproduct?.pointee else { throw bad("no parameters") }
            let outputs = Int(params.outputchannels), inputs = Int(params.inputchannels)
            let values = try weights.required(params.weights, layer: name, role: "weights", count: outputs * inputs, channels: outputs)
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputs) : nil
            return .innerProduct(outputs: outputs, inputs: inputs, weights: values, bias: bias)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM:
            guard let params = layer.batchnorm?.pointee else { throw bad("no parameters") }
            let channels = Int(params.channels)
            if params.computemeanvar != 0 || params.instancenormalization != 0 {
                // Statistics of this input (batch 1): each channel normalized over its plane, then γ and β.
                let gamma = try weights.required(params.gamma, layer: name, role: "gamma", count: channels)
                let beta = try weights.required(params.beta, layer: name, role: "beta", count: channels)
                return .instanceNorm(gamma: gamma, beta: beta, epsilon: params.epsilon)
            }
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
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COPY:
            // NeuralNetwork.proto: copies its input to its output (ct.convert writes one for
            // DenseNet's concatenated features).
            return .activation(.linear(alpha: 1, beta: 0))
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
            // NeuralNetwork.proto: transposeA and transposeB are ignored when the weights are the second operand.
            return .batchedMatMul(transposeA: matrix == nil && params.transposea != 0, transposeB: matrix == nil && params.transposeb != 0,
                                  weights: matrix, first: first, second: second, bias: bias)
        default:
            return try moreOperation()
        }
    }

    private func moreOperation() throws(RuntimeError) -> LayerOperation {
        switch layer.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CLIP:
            return .activation(.clip(low: layer.clip?.pointee.minval ?? 0, high: layer.clip?.pointee.maxval ?? 0))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_PADDING:
            guard let params = layer.padding?.pointee else { throw bad("no parameters") }
            let mode: LayerOperation.PaddingMode = switch params.padding_type_case {
            case CORE_ML__SPECIFICATION__PADDING_LAYER_PARAMS__PADDING_TYPE_REFLECTION: .reflection
            case CORE_ML__SPECIFICATION__PADDING_LAYER_PARAMS__PADDING_TYPE_REPLICATION: .replication
            default: .constant(params.constant?.pointee.value ?? 0)
            }
            let border = Self.border(params.paddingamounts)
            return .pad(top: border.top, bottom: border.bottom, left: border.left, right: border.right, mode: mode)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UPSAMPLE:
            guard let params = layer.upsample?.pointee else { throw bad("no parameters") }
            guard params.n_fractionalscalingfactor == 0 else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "fractional scaling factors are not supported yet")
            }
            let factors = scalars(params.scalingfactor, params.n_scalingfactor).map(Int.init)
            let mode: LayerOperation.UpsampleMode
            if params.mode != CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__INTERPOLATION_MODE__BILINEAR {
                mode = .nearest
            } else {
                mode = switch params.linearupsamplemode {
                case CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__LINEAR_UPSAMPLE_MODE__ALIGN_CORNERS_TRUE: .bilinearAlignCorners
                case CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__LINEAR_UPSAMPLE_MODE__ALIGN_CORNERS_FALSE: .bilinearHalfPixel
                default: .bilinearDefault
                }
            }
            return .upsample(height: factors.count == 2 ? factors[0] : 1, width: factors.count == 2 ? factors[1] : 1, mode: mode)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CROP:
            guard let params = layer.crop?.pointee else { throw bad("no parameters") }
            let offsets = scalars(params.offset, params.n_offset).map(Int.init)
            if layer.n_input >= 2 {
                return .crop(top: 0, bottom: 0, left: 0, right: 0, offset: (offsets.count == 2 ? offsets[0] : 0, offsets.count == 2 ? offsets[1] : 0))
            }
            let border = Self.border(params.cropamounts)
            return .crop(top: border.top, bottom: border.bottom, left: border.left, right: border.right, offset: nil)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCALE:
            guard let params = layer.scale?.pointee else { throw bad("no parameters") }
            let scaleShape = scalars(params.shapescale, params.n_shapescale).map(Int.init)
            let biasShape = scalars(params.shapebias, params.n_shapebias).map(Int.init)
            let scale = try weights.required(params.scale, layer: name, role: "scale", count: max(1, scaleShape.reduce(1, *)))
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: max(1, biasShape.reduce(1, *))) : nil
            return .scaleBias(scale: scale, scaleShape: scaleShape, bias: bias, biasShape: biasShape)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BIAS:
            guard let params = layer.bias?.pointee else { throw bad("no parameters") }
            let shape = scalars(params.shape, params.n_shape).map(Int.init)
            let bias = try weights.required(params.bias, layer: name, role: "bias", count: max(1, shape.reduce(1, *)))
            return .scaleBias(scale: nil, scaleShape: [], bias: bias, biasShape: shape)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UNARY:
            guard let params = layer.unary?.pointee else { throw bad("no parameters") }
            let operation: LayerOperation.Unary = switch params.type {
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__RSQRT: .rsqrt
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__INVERSE: .inverse
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__POWER: .power(params.alpha)
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__EXP: .exp
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__LOG: .log
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__ABS: .abs
            case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__THRESHOLD: .threshold(params.alpha)
            default: .sqrt
            }
            return .unary(operation, scale: params.scale == 0 ? 1 : params.scale, shift: params.shift,
                          epsilon: params.epsilon == 0 ? 1e-6 : params.epsilon)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_L2NORMALIZE:
            let epsilon = layer.l2normalize?.pointee.epsilon ?? 0
            return .l2Normalize(epsilon: epsilon == 0 ? 1e-6 : epsilon)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LRN:
            guard let params = layer.lrn?.pointee else { throw bad("no parameters") }
            return .lrn(alpha: params.alpha, beta: params.beta, size: Int(params.localsize), k: params.k)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MVN:
            guard let params = layer.mvn?.pointee else { throw bad("no parameters") }
            return .meanVarianceNormalize(acrossChannels: params.acrosschannels != 0, normalizeVariance: params.normalizevariance != 0,
                                          epsilon: params.epsilon == 0 ? 1e-6 : params.epsilon)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SPLIT:
            return .split(parts: Int(layer.n_output))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE:
            guard let params = layer.slice?.pointee else { throw bad("no parameters") }
            let axis: LayerOperation.SliceAxis = switch params.axis {
            case CORE_ML__SPECIFICATION__SLICE_LAYER_PARAMS__SLICE_AXIS__HEIGHT_AXIS: .height
            case CORE_ML__SPECIFICATION__SLICE_LAYER_PARAMS__SLICE_AXIS__WIDTH_AXIS: .width
            default: .channel
            }
            return .slice(axis: axis, start: Int(params.startindex), end: Int(params.endindex), stride: max(1, Int(params.stride)))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE:
            guard let params = layer.reduce?.pointee else { throw bad("no parameters") }
            let mode: LayerOperation.ReduceMode = switch params.mode {
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__AVG: .average
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__PROD: .product
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__LOGSUM: .logSum
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__SUMSQUARE: .sumSquare
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__L1: .l1
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__L2: .l2
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__MAX: .max
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__MIN: .min
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__ARGMAX: .argmax
            default: .sum
            }
            let axes: LayerOperation.ReduceAxes = switch params.axis {
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__HW: .hw
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__C: .c
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__H: .h
            case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__W: .w
            default: .chw
            }
            return .reduce(mode, axes: axes, epsilon: params.epsilon == 0 ? 1e-6 : params.epsilon)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING:
            guard let params = layer.embedding?.pointee else { throw bad("no parameters") }
            let inputDim = Int(params.inputdim), outputs = Int(params.outputchannels)
            let values = try weights.required(params.weights, layer: name, role: "weights", count: inputDim * outputs, channels: outputs)
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputs) : nil
            return .embedding(inputDim: inputDim, outputs: outputs, weights: values, bias: bias)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING_ND:
            guard let params = layer.embeddingnd?.pointee else { throw bad("no parameters") }
            let vocabulary = Int(params.vocabsize), outputs = Int(params.embeddingsize)
            let values = try weights.required(params.weights, layer: name, role: "weights", count: vocabulary * outputs, channels: outputs)
            let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputs) : nil
            return .embeddingND(vocabulary: vocabulary, outputs: outputs, weights: values, bias: bias)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT:
            guard let params = layer.loadconstant?.pointee else { throw bad("no parameters") }
            let shape = scalars(params.shape, params.n_shape).map(Int.init)
            let values = try weights.required(params.data, layer: name, role: "data", count: shape.reduce(1, *))
            return .loadConstant(shape: shape, values: values)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_DOT:
            return .dot(cosine: layer.dot?.pointee.cosinesimilarity ?? 0 != 0)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_PERMUTE:
            let axes = layer.permute.map { scalars($0.pointee.axis, $0.pointee.n_axis).map(Int.init) } ?? []
            guard axes.count == 4, axes[0] == 0, Set(axes) == [0, 1, 2, 3] else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "permutations moving the sequence axis are not supported (axes \(axes))")
            }
            return .permute(axes)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE:
            guard let params = layer.reshape?.pointee else { throw bad("no parameters") }
            var shape = scalars(params.targetshape, params.n_targetshape).map(Int.init)
            if shape.count == 4 {
                guard shape[0] == 1 else {
                    throw .unsupportedLayer(layer: name, kind: kind, reason: "reshaping into a sequence is not supported")
                }
                shape.removeFirst()
            }
            return .reshape(shape: shape, channelLast: params.mode == CORE_ML__SPECIFICATION__RESHAPE_LAYER_PARAMS__RESHAPE_ORDER__CHANNEL_LAST)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SQUEEZE:
            guard let params = layer.squeeze?.pointee else { throw bad("no parameters") }
            return .squeeze(axes: scalars(params.axes, params.n_axes).map(Int.init), all: params.squeezeall != 0)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EXPAND_DIMS:
            return .expandDims(axes: layer.expanddims.map { scalars($0.pointee.axes, $0.pointee.n_axes).map(Int.init) } ?? [])
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE_STATIC:
            return .reshapeStatic(layer.reshapestatic.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? [])
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLATTEN_TO2_D:
            return .flattenTo2D(axis: Int(layer.flattento2d?.pointee.axis ?? 1))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TRANSPOSE:
            return .transpose(layer.transpose.map { scalars($0.pointee.axes, $0.pointee.n_axes).map(Int.init) } ?? [])
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TILE:
            let reps = layer.tile.map { scalars($0.pointee.reps, $0.pointee.n_reps).map(Int.init) } ?? []
            guard !reps.isEmpty else {
                throw .unsupportedLayer(layer: name, kind: kind, reason: "repetitions from a second input are not supported")
            }
            return .tile(reps: reps)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD_BROADCASTABLE: return .binary(.add)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SUBTRACT_BROADCASTABLE: return .binary(.subtract)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY_BROADCASTABLE: return .binary(.multiply)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_DIVIDE_BROADCASTABLE: return .binary(.divide)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX_BROADCASTABLE: return .binary(.maximum)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN_BROADCASTABLE: return .binary(.minimum)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POW_BROADCASTABLE: return .binary(.power)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GELU:
            let mode: LayerOperation.Activation.GeluMode = switch layer.gelu?.pointee.mode {
            case CORE_ML__SPECIFICATION__GELU_LAYER_PARAMS__GELU_MODE__TANH_APPROXIMATION: .tanh
            case CORE_ML__SPECIFICATION__GELU_LAYER_PARAMS__GELU_MODE__SIGMOID_APPROXIMATION: .sigmoid
            default: .exact
            }
            return .activation(.gelu(mode))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM: return Self.reduceND(.sum, layer.reducesum?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MEAN: return Self.reduceND(.average, layer.reducemean?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MAX: return Self.reduceND(.max, layer.reducemax?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MIN: return Self.reduceND(.min, layer.reducemin?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_PROD: return Self.reduceND(.product, layer.reduceprod?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L1: return Self.reduceND(.l1, layer.reducel1?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L2: return Self.reduceND(.l2, layer.reducel2?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM_SQUARE: return Self.reduceND(.sumSquare, layer.reducesumsquare?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM: return Self.reduceND(.logSum, layer.reducelogsum?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE_STATIC:
            guard let params = layer.slicestatic?.pointee else { throw bad("no parameters") }
            return .sliceByIndex(begin: scalars(params.beginids, params.n_beginids).map(Int.init),
                                 end: scalars(params.endids, params.n_endids).map(Int.init),
                                 stride: scalars(params.strides, params.n_strides).map(Int.init),
                                 beginMask: scalars(params.beginmasks, params.n_beginmasks).map { $0 != 0 },
                                 endMask: scalars(params.endmasks, params.n_endmasks).map { $0 != 0 },
                                 squeezeMask: scalars(params.squeezemasks, params.n_squeezemasks).map { $0 != 0 })
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SPLIT_ND:
            guard let params = layer.splitnd?.pointee else { throw bad("no parameters") }
            let sizes = scalars(params.splitsizes, params.n_splitsizes).map(Int.init)
            return .splitAxis(sizes: sizes.isEmpty ? nil : sizes, parts: Int(layer.n_output), axis: Int(params.axis))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT_ND:
            guard let params = layer.loadconstantnd?.pointee else { throw bad("no parameters") }
            let shape = scalars(params.shape, params.n_shape).map(Int.init)
            return .loadConstant(shape: shape, values: try weights.required(params.data, layer: name, role: "data", count: shape.reduce(1, *)))
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANK_PRESERVING_RESHAPE:
            return .reshapeStatic(layer.rankpreservingreshape.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? [])
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT_ND:
            return .concatND(axis: Int(layer.concatnd?.pointee.axis ?? 0), interleave: layer.concatnd?.pointee.interleave ?? 0 != 0)
        default:
            throw .unsupportedLayer(layer: name, kind: kind, reason: "modelc does not run this layer kind yet")
        }
    }

    /// The rank-N reduce layers share one shape of parameters: axes, keepDims, reduceAll.
    private static func reduceND<Params: ReduceNDParameters>(_ mode: LayerOperation.ReduceMode, _ params: Params?) -> LayerOperation {
        guard let params else { return .reduceAxes(mode, axes: [], keepDimensions: false) }
        return .reduceAxes(mode, axes: params.reduceAll ? [] : params.axisList, keepDimensions: params.keepDimensions)
    }

    private func convolution(_ params: CoreML__Specification__ConvolutionLayerParams) throws(RuntimeError) -> LayerOperation {
        let isDeconvolution = params.isdeconvolution != 0
        let sizes = scalars(params.kernelsize, params.n_kernelsize).map(Int.init)
        let strides = scalars(params.stride, params.n_stride).map(Int.init)
        let dilations = scalars(params.dilationfactor, params.n_dilationfactor).map(Int.init)
        let kernel = (sizes.count == 2 ? sizes[0] : 3, sizes.count == 2 ? sizes[1] : 3)
        let stride = (strides.count == 2 ? strides[0] : 1, strides.count == 2 ? strides[1] : 1)
        let dilation = (dilations.count == 2 ? dilations[0] : 1, dilations.count == 2 ? dilations[1] : 1)
        let groups = max(1, Int(params.ngroups))
        let outputChannels = Int(params.outputchannels), kernelChannels = Int(params.kernelchannels)
        guard outputChannels % groups == 0 else { throw bad("\(outputChannels) output channels in \(groups) groups") }
        // Deconvolution weights are [in, out / groups, kH, kW]; quantization channels are the first axis.
        let count = isDeconvolution ? kernelChannels * (outputChannels / groups) * kernel.0 * kernel.1
            : outputChannels * kernelChannels * kernel.0 * kernel.1
        let values = try weights.required(params.weights, layer: name, role: "weights", count: count,
                                          channels: isDeconvolution ? kernelChannels : outputChannels)
        let bias = params.hasbias != 0 ? try weights.required(params.bias, layer: name, role: "bias", count: outputChannels) : nil
        let padding: LayerOperation.Padding
        if params.convolution_padding_type_case == CORE_ML__SPECIFICATION__CONVOLUTION_LAYER_PARAMS__CONVOLUTION_PADDING_TYPE_SAME {
            padding = .same(bottomRightHeavy: params.same?.pointee.asymmetrymode != CORE_ML__SPECIFICATION__SAME_PADDING__SAME_PADDING_MODE__TOP_LEFT_HEAVY)
        } else {
            padding = Self.validPadding(params.valid)
        }
        return .convolution(.init(outputChannels: outputChannels, kernelChannels: kernelChannels, groups: groups,
                                  kernel: kernel, stride: stride, dilation: dilation, padding: padding,
                                  weights: values, bias: bias, isDeconvolution: isDeconvolution,
                                  outputShape: scalars(params.outputshape, params.n_outputshape).map(Int.init)))
    }

    private static func validPadding(_ valid: UnsafeMutablePointer<CoreML__Specification__ValidPadding>?) -> LayerOperation.Padding {
        let border = border(valid?.pointee.paddingamounts)
        return .valid(top: border.top, bottom: border.bottom, left: border.left, right: border.right)
    }

    /// Border amounts as (height start, height end, width start, width end); zeros unless both axes are given.
    private static func border(_ amounts: UnsafeMutablePointer<CoreML__Specification__BorderAmounts>?)
        -> (top: Int, bottom: Int, left: Int, right: Int) {
        let edges = amounts.map { elements($0.pointee.borderamounts, $0.pointee.n_borderamounts) } ?? []
        guard edges.count == 2 else { return (0, 0, 0, 0) }
        return (Int(edges[0].pointee.startedgesize), Int(edges[0].pointee.endedgesize),
                Int(edges[1].pointee.startedgesize), Int(edges[1].pointee.endedgesize))
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

/// The fields every rank-N reduce layer's parameters have.
protocol ReduceNDParameters {
    var axisList: [Int] { get }
    var keepDimensions: Bool { get }
    var reduceAll: Bool { get }
}

extension CoreML__Specification__ReduceSumLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMeanLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMaxLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMinLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceProdLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceL1LayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceL2LayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceSumSquareLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceLogSumLayerParams: ReduceNDParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}
