import CoreMLSchema
import ModelFeatures
import ModelSpec

/// The lowering of every layer kind, by its `layer` case: the channel-first
/// layers of NeuralNetwork.proto's rank-5 world here, the rank-N layers in
/// `NetworkLowering+NDLayers.swift`.
extension NetworkLowering {
    static let layers: [UInt32: Lowering] = channelLayers.merging(ndLayers) { first, _ in first }
        .merging(moreNDLayers) { first, _ in first }.merging(recurrentLayers) { first, _ in first }
        .merging(randomLayers) { first, _ in first }.merging(volumeLayers) { first, _ in first }
        .merging(controlLayers) { first, _ in first }.merging(categoricalLayers) { first, _ in first }
        .merging(detectionLayers) { first, _ in first }

    static let channelLayers: [UInt32: Lowering] = [
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION.rawValue: convolution,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT.rawValue: innerProduct,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM.rawValue: batchnorm,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACTIVATION.rawValue: activation,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POOLING.rawValue: pooling,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SOFTMAX.rawValue: softmax,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLATTEN.rawValue: flatten,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD.rawValue: { b, l throws(RuntimeError) in try b.combine("add", alpha: l.add?.pointee.alpha ?? 0) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY.rawValue: { b, l throws(RuntimeError) in try b.combine("mul", alpha: l.multiply?.pointee.alpha ?? 1) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX.rawValue: { b, _ throws(RuntimeError) in try b.combine("maximum", alpha: nil) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN.rawValue: { b, _ throws(RuntimeError) in try b.combine("minimum", alpha: nil) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_AVERAGE.rawValue: average,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT.rawValue: concat,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SPLIT.rawValue: split,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_PADDING.rawValue: padding,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UPSAMPLE.rawValue: upsample,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESIZE_BILINEAR.rawValue: resizeBilinear,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CROP_RESIZE.rawValue: cropResize,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CROP.rawValue: crop,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCALE.rawValue: scale,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BIAS.rawValue: bias,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UNARY.rawValue: unary,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_L2NORMALIZE.rawValue: l2Normalize,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LRN.rawValue: lrn,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MVN.rawValue: mvn,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE.rawValue: slice,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE.rawValue: reduce,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING.rawValue: embedding,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT.rawValue: loadConstant,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_DOT.rawValue: dot,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_PERMUTE.rawValue: permute,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE.rawValue: reshape,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REORGANIZE_DATA.rawValue: reorganizeData,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SEQUENCE_REPEAT.rawValue: sequenceRepeat,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COPY.rawValue: { b, _ throws(RuntimeError) in b.identity(try b.input(), into: try b.output()) },
    ]

    // MARK: Convolution and pooling

    private static func convolution(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.convolution?.pointee else { throw b.invalid("no parameters") }
        let transposed = params.isdeconvolution != 0
        // Specification 4 allows the weights as a second input blob, for convolution only.
        let weightInput = layer.n_input > 1
        if weightInput, transposed { throw b.invalid("a deconvolution cannot take its weights as a second input") }
        let sizes = scalars(params.kernelsize, params.n_kernelsize).map(Int.init)
        let strides = scalars(params.stride, params.n_stride).map(Int.init)
        let dilations = scalars(params.dilationfactor, params.n_dilationfactor).map(Int.init)
        let kernel = sizes.count == 2 ? sizes : [3, 3]
        let groups = max(1, Int(params.ngroups))
        let outputs = Int(params.outputchannels), kernelChannels = Int(params.kernelchannels)
        guard outputs % groups == 0 else { throw b.invalid("\(outputs) output channels in \(groups) groups") }
        let weightShape = transposed ? [kernelChannels, outputs / groups] + kernel : [outputs, kernelChannels] + kernel
        let weight: LoweredArgument
        if weightInput {
            // The blob is [outputChannels, kernelChannels, kernelHeight, kernelWidth], whatever its rank.
            weight = .value(b.reshape(try b.input(1), weightShape))
        } else {
            weight = .floats(try b.weights(params.weights, "weights", count: weightShape.reduce(1, *), channels: transposed ? kernelChannels : outputs),
                             shape: weightShape)
        }
        var arguments: [String: LoweredArgument] = [
            "weight": weight, "strides": .ints(strides.count == 2 ? strides : [1, 1]),
            "dilations": .ints(dilations.count == 2 ? dilations : [1, 1]), "groups": .int(groups),
        ]
        if params.hasbias != 0 { arguments["bias"] = .floats(try b.weights(params.bias, "bias", count: outputs), shape: [outputs]) }
        if params.convolution_padding_type_case == CORE_ML__SPECIFICATION__CONVOLUTION_LAYER_PARAMS__CONVOLUTION_PADDING_TYPE_SAME {
            let topLeft = params.same?.pointee.asymmetrymode == CORE_ML__SPECIFICATION__SAME_PADDING__SAME_PADDING_MODE__TOP_LEFT_HEAVY
            arguments["pad_type"] = .string(topLeft ? "same_lower" : "same")
        } else {
            arguments["pad_type"] = .string("custom")
            arguments["pad"] = .ints(border(params.valid?.pointee.paddingamounts))
        }
        let outputShape = scalars(params.outputshape, params.n_outputshape).map(Int.init)
        try b.channelFirst(try b.input(), into: try b.output()) { b, x throws(RuntimeError) in
            var arguments = arguments
            arguments["x"] = .value(x)
            if transposed, outputShape.count == 2 {
                arguments["output_shape"] = .value(b.shape([.vector(b.dims(x, 0, 1)), .literal([outputs] + outputShape)]))
            }
            return b.op(transposed ? "conv_transpose" : "conv", arguments)
        }
    }

    /// Border amounts as [top, bottom, left, right]; zeros unless both axes are given.
    static func border(_ amounts: UnsafeMutablePointer<CoreML__Specification__BorderAmounts>?) -> [Int] {
        let edges = amounts.map { elements($0.pointee.borderamounts, $0.pointee.n_borderamounts) } ?? []
        guard edges.count == 2 else { return [0, 0, 0, 0] }
        return [Int(edges[0].pointee.startedgesize), Int(edges[0].pointee.endedgesize),
                Int(edges[1].pointee.startedgesize), Int(edges[1].pointee.endedgesize)]
    }

    private static func pooling(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.pooling?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input(), output = try b.output()
        let kind = switch params.type {
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_TYPE__AVERAGE: "avg"
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_TYPE__L2: "l2"
        default: "max"
        }
        if params.globalpooling != 0 {
            let view = b.atLeastRank3(x)
            let reduction = ["avg": "reduce_mean", "l2": "reduce_l2_norm", "max": "reduce_max"][kind] ?? "reduce_max"
            b.op(reduction, ["x": .value(view), "axes": .ints([-2, -1]), "keep_dims": .bool(true)], into: output)
            return
        }
        let sizes = scalars(params.kernelsize, params.n_kernelsize).map(Int.init)
        let strides = scalars(params.stride, params.n_stride).map(Int.init)
        var arguments: [String: LoweredArgument] = [
            "kernel_sizes": .ints(sizes.count == 2 ? sizes : [3, 3]), "strides": .ints(strides.count == 2 ? strides : [1, 1]),
        ]
        switch params.pooling_padding_type_case {
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_PADDING_TYPE_SAME:
            let topLeft = params.same?.pointee.asymmetrymode == CORE_ML__SPECIFICATION__SAME_PADDING__SAME_PADDING_MODE__TOP_LEFT_HEAVY
            arguments["pad_type"] = .string(topLeft ? "same_lower" : "same")
        case CORE_ML__SPECIFICATION__POOLING_LAYER_PARAMS__POOLING_PADDING_TYPE_INCLUDE_LAST_PIXEL:
            // Caffe's rounding up: the last window may start in the input or its padding.
            let amounts = params.includelastpixel.map { scalars($0.pointee.paddingamounts, $0.pointee.n_paddingamounts).map(Int.init) } ?? []
            let (h, w) = amounts.count == 2 ? (amounts[0], amounts[1]) : (0, 0)
            arguments["pad_type"] = .string("custom")
            arguments["pad"] = .ints([h, h, w, w])
            arguments["ceil_mode"] = .bool(true)
        default:
            arguments["pad_type"] = .string("custom")
            arguments["pad"] = .ints(border(params.valid?.pointee.paddingamounts))
        }
        if kind == "avg" { arguments["exclude_padding_from_average"] = .bool(params.avgpoolexcludepadding != 0) }
        try b.channelFirst(x, into: output) { b, x throws(RuntimeError) in
            var arguments = arguments
            arguments["x"] = .value(x)
            return b.op("\(kind)_pool", arguments)
        }
    }

    // MARK: Fully connected

    private static func innerProduct(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.innerproduct?.pointee else { throw b.invalid("no parameters") }
        let outputs = Int(params.outputchannels), inputs = Int(params.inputchannels)
        let weights = try b.weights(params.weights, "weights", count: outputs * inputs, channels: outputs)
        var arguments: [String: LoweredArgument] = ["weight": .floats(weights, shape: [outputs, inputs])]
        if params.hasbias != 0 { arguments["bias"] = .floats(try b.weights(params.bias, "bias", count: outputs), shape: [outputs]) }
        let x = try b.input(), output = try b.output()
        let r = b.rank(x)
        if r >= 4 || (r == 3 && b.rank5) {
            // [..., C, H, W] → [..., C·H·W] → [..., C_out, 1, 1].
            let lead = r == 3 ? b.shape([.literal([1])]) : b.dims(x, 0, -3)
            let rows = b.reshape(x, to: b.shape([.vector(lead), .literal([inputs])]))
            arguments["x"] = .value(rows)
            let product = b.op("linear", arguments)
            let target = r == 3 ? b.shape([.literal([outputs, 1, 1])]) : b.shape([.vector(lead), .literal([outputs, 1, 1])])
            _ = b.reshape(product, to: target, into: output)
            return
        }
        // Rank 1 to 3 of a rank-N network: the last dimension is C_in.
        arguments["x"] = .value(x)
        b.op("linear", arguments, into: output)
    }

    private static func embedding(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.embedding?.pointee else { throw b.invalid("no parameters") }
        let inputDim = Int(params.inputdim), outputs = Int(params.outputchannels)
        let weights = try b.weights(params.weights, "weights", count: inputDim * outputs, channels: outputs)
        // Stored [C_out, inputDim]: the table gathered by index is its transpose.
        var table = [Float](repeating: 0, count: weights.count)
        for o in 0..<outputs { for i in 0..<inputDim { table[i * outputs + o] = weights[o * inputDim + i] } }
        let x = try b.input(), output = try b.output()
        let r = b.rank(x)
        let lead = r >= 4 ? b.dims(x, 0, -3) : b.shape([.literal([-1])])
        let indices = b.toInt(b.reshape(x, [-1]))
        var rows = b.op("gather", ["x": .floats(table, shape: [inputDim, outputs]), "indices": .value(indices), "axis": .int(0)])
        if params.hasbias != 0 {
            rows = b.op("add", ["x": .value(rows), "y": .floats(try b.weights(params.bias, "bias", count: outputs), shape: [outputs])])
        }
        _ = b.reshape(rows, to: b.shape([.vector(lead), .literal([outputs, 1, 1])]), into: output)
    }

    // MARK: Normalization

    private static func batchnorm(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.batchnorm?.pointee else { throw b.invalid("no parameters") }
        let channels = Int(params.channels)
        let gamma = try b.weights(params.gamma, "gamma", count: channels)
        let beta = try b.weights(params.beta, "beta", count: channels)
        let x = try b.input(), output = try b.output()
        if params.computemeanvar != 0 || params.instancenormalization != 0 {
            try b.channelFirst(x, into: output) { b, x throws(RuntimeError) in
                b.op("instance_norm", ["x": .value(x), "gamma": .floats(gamma, shape: [channels]), "beta": .floats(beta, shape: [channels]),
                                       "epsilon": .float(params.epsilon)])
            }
            return
        }
        let mean = try b.weights(params.mean, "mean", count: channels)
        let variance = try b.weights(params.variance, "variance", count: channels)
        if b.rank(x) == 4 {
            // [N, C, H, W] (a blob's view): MIL's batch_norm, which the plan folds into a convolution before it.
            b.op("batch_norm", ["x": .value(x), "mean": .floats(mean, shape: [channels]), "variance": .floats(variance, shape: [channels]),
                                "gamma": .floats(gamma, shape: [channels]), "beta": .floats(beta, shape: [channels]),
                                "epsilon": .float(params.epsilon)], into: output)
            return
        }
        var scale = [Float](repeating: 0, count: channels), shift = scale
        for c in 0..<channels {
            scale[c] = gamma[c] / (variance[c] + params.epsilon).squareRoot()
            shift[c] = beta[c] - mean[c] * scale[c]
        }
        b.channelAffine(x, scale: scale, shift: shift, into: output)
    }

    private static func l2Normalize(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let epsilon = layer.l2normalize?.pointee.epsilon ?? 0
        let x = b.atLeastRank3(try b.input())
        // NeuralNetwork.proto: x / sqrt(Σ x² + ε) over C, H, W.
        let sum = b.op("reduce_sum_square", ["x": .value(x), "axes": .ints([-3, -2, -1]), "keep_dims": .bool(true)])
        let norm = b.op("rsqrt", ["x": .value(b.op("add", ["x": .value(sum), "y": .float(epsilon == 0 ? 1e-6 : epsilon)]))])
        b.op("mul", ["x": .value(x), "y": .value(norm)], into: try b.output())
    }

    private static func lrn(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.lrn?.pointee else { throw b.invalid("no parameters") }
        try b.channelFirst(try b.input(), into: try b.output()) { b, x throws(RuntimeError) in
            b.op("local_response_norm", ["x": .value(x), "size": .int(Int(params.localsize)), "alpha": .float(params.alpha),
                                         "beta": .float(params.beta), "k": .float(params.k)])
        }
    }

    private static func mvn(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.mvn?.pointee else { throw b.invalid("no parameters") }
        let x = b.atLeastRank3(try b.input()), output = try b.output()
        let axes = params.acrosschannels != 0 ? [-3, -2, -1] : [-2, -1]
        let mean = b.op("reduce_mean", ["x": .value(x), "axes": .ints(axes), "keep_dims": .bool(true)])
        let centred = b.op("sub", ["x": .value(x), "y": .value(mean)], into: params.normalizevariance != 0 ? nil : output)
        guard params.normalizevariance != 0 else { return }
        let variance = b.op("reduce_mean", ["x": .value(b.op("mul", ["x": .value(centred), "y": .value(centred)])),
                                            "axes": .ints(axes), "keep_dims": .bool(true)])
        let epsilon = params.epsilon == 0 ? 1e-6 : params.epsilon
        let divisor = b.op("sqrt", ["x": .value(b.op("add", ["x": .value(variance), "y": .float(epsilon)]))])
        b.op("real_div", ["x": .value(centred), "y": .value(divisor)], into: output)
    }

    private static func softmax(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let x = b.atLeastRank3(try b.input())
        b.op("softmax", ["x": .value(x), "axis": .int(-3)], into: try b.output())
    }

    // MARK: Activations

    private static func activation(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.activation?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input(), output = try b.output()
        func simple(_ type: String, _ extra: [String: LoweredArgument] = [:], _ b: inout LoweringBuilder) {
            var arguments = extra
            arguments["x"] = .value(x)
            b.op(type, arguments, into: output)
        }
        switch params.nonlinearity_type_case {
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_LINEAR:
            simple("linear_activation", ["alpha": .float(params.linear?.pointee.alpha ?? 0), "beta": .float(params.linear?.pointee.beta ?? 0)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_RE_LU: simple("relu", [:], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_LEAKY_RE_LU:
            simple("leaky_relu", ["alpha": .float(params.leakyrelu?.pointee.alpha ?? 0)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_THRESHOLDED_RE_LU:
            simple("thresholded_relu", ["alpha": .float(params.thresholdedrelu?.pointee.alpha ?? 0)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_TANH: simple("tanh", [:], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SCALED_TANH:
            simple("scaled_tanh", ["alpha": .float(params.scaledtanh?.pointee.alpha ?? 1), "beta": .float(params.scaledtanh?.pointee.beta ?? 1)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID: simple("sigmoid", [:], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID_HARD:
            simple("sigmoid_hard", ["alpha": .float(params.sigmoidhard?.pointee.alpha ?? 0.2), "beta": .float(params.sigmoidhard?.pointee.beta ?? 0.5)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_ELU: simple("elu", ["alpha": .float(params.elu?.pointee.alpha ?? 1)], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SOFTSIGN: simple("softsign", [:], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SOFTPLUS: simple("softplus", [:], &b)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_PRE_LU:
            // max(x, 0) + α[c] · min(x, 0), channels at axis -3.
            guard let alpha = try b.optionalWeights(params.prelu?.pointee.alpha, "PReLU.alpha") else { throw b.invalid("PReLU without alpha") }
            let view = b.atLeastRank3(x), r3 = b.rank(view)
            let slopes = b.channelConstant(alpha, rank: r3)
            let negative = b.op("mul", ["x": .value(b.op("minimum", ["x": .value(view), "y": .float(0)])), "y": slopes])
            b.op("add", ["x": .value(b.op("relu", ["x": .value(view)])), "y": .value(negative)], into: output)
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_PARAMETRIC_SOFTPLUS:
            // α[c] · log(1 + exp(β[c] · x)).
            let alpha = try b.optionalWeights(params.parametricsoftplus?.pointee.alpha, "parametricSoftplus.alpha") ?? [1]
            let beta = try b.optionalWeights(params.parametricsoftplus?.pointee.beta, "parametricSoftplus.beta") ?? [1]
            let view = b.atLeastRank3(x), r3 = b.rank(view)
            let scaled = b.op("mul", ["x": .value(view), "y": b.channelConstant(beta, rank: r3)])
            let soft = b.op("softplus", ["x": .value(scaled)])
            b.op("mul", ["x": .value(soft), "y": b.channelConstant(alpha, rank: r3)], into: output)
        default:
            throw b.invalid("no activation kind set")
        }
    }

    // MARK: Elementwise

    private static func average(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let output = try b.output()
        guard b.inputs.count > 1 else { b.identity(try b.input(), into: output); return }
        let sum = try b.combine("add", alpha: nil, into: b.fresh())
        b.op("mul", ["x": .value(sum), "y": .float(1 / Float(b.inputs.count))], into: output)
    }

    private static func scale(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.scale?.pointee else { throw b.invalid("no parameters") }
        let scaleShape = scalars(params.shapescale, params.n_shapescale).map(Int.init)
        let biasShape = scalars(params.shapebias, params.n_shapebias).map(Int.init)
        let values = try b.weights(params.scale, "scale", count: max(1, scaleShape.reduce(1, *)))
        let x = b.atLeastRank3(try b.input()), r = b.rank(x), output = try b.output()
        let scaled = b.op("mul", ["x": .value(x), "y": b.blobConstant(values, shape: scaleShape, rank: r)], into: params.hasbias != 0 ? nil : output)
        guard params.hasbias != 0 else { return }
        let bias = try b.weights(params.bias, "bias", count: max(1, biasShape.reduce(1, *)))
        b.op("add", ["x": .value(scaled), "y": b.blobConstant(bias, shape: biasShape, rank: r)], into: output)
    }

    private static func bias(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.bias?.pointee else { throw b.invalid("no parameters") }
        let shape = scalars(params.shape, params.n_shape).map(Int.init)
        let values = try b.weights(params.bias, "bias", count: max(1, shape.reduce(1, *)))
        let x = b.atLeastRank3(try b.input()), r = b.rank(x)
        b.op("add", ["x": .value(x), "y": b.blobConstant(values, shape: shape, rank: r)], into: try b.output())
    }

    private static func unary(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.unary?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input(), output = try b.output()
        let scale = params.scale == 0 ? 1 : params.scale
        let epsilon = params.epsilon == 0 ? 1e-6 : params.epsilon
        var v = x
        if scale != 1 || params.shift != 0 { v = b.op("linear_activation", ["x": .value(x), "alpha": .float(scale), "beta": .float(params.shift)]) }
        switch params.type {
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__RSQRT:
            b.op("rsqrt", ["x": .value(b.op("add", ["x": .value(v), "y": .float(epsilon)]))], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__INVERSE:
            b.op("real_div", ["x": .float(1), "y": .value(b.op("add", ["x": .value(v), "y": .float(epsilon)]))], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__POWER:
            b.op("pow", ["x": .value(v), "y": .float(params.alpha)], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__EXP: b.op("exp", ["x": .value(v)], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__LOG:
            b.op("log", ["x": .value(b.op("add", ["x": .value(v), "y": .float(epsilon)]))], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__ABS: b.op("abs", ["x": .value(v)], into: output)
        case CORE_ML__SPECIFICATION__UNARY_FUNCTION_LAYER_PARAMS__OPERATION__THRESHOLD:
            b.op("maximum", ["x": .value(v), "y": .float(params.alpha)], into: output)
        default: b.op("sqrt", ["x": .value(v)], into: output)
        }
    }

    private static func dot(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let first = b.reshape(try b.input(0), [-1]), second = b.reshape(try b.input(1), [-1])
        var product = b.op("reduce_sum", ["x": .value(b.op("mul", ["x": .value(first), "y": .value(second)])),
                                          "axes": .ints([0]), "keep_dims": .bool(true)])
        if layer.dot?.pointee.cosinesimilarity != 0 {
            let norms = b.op("mul", ["x": .value(b.op("reduce_sum_square", ["x": .value(first), "axes": .ints([0]), "keep_dims": .bool(true)])),
                                     "y": .value(b.op("reduce_sum_square", ["x": .value(second), "axes": .ints([0]), "keep_dims": .bool(true)]))])
            let divisor = b.op("maximum", ["x": .value(b.op("sqrt", ["x": .value(norms)])), "y": .float(1e-12)])
            product = b.op("real_div", ["x": .value(product), "y": .value(divisor)])
        }
        _ = b.reshape(product, [1, 1, 1], into: try b.output())
    }

    // MARK: Reorganizing

    private static func concat(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let sequence = layer.concat?.pointee.sequenceconcat != 0
        var values: [String] = []
        for input in b.inputs { values.append(b.atLeastRank3(input)) }
        let r = values.map { b.rank($0) }.max() ?? 3
        if sequence, r < 5 { throw b.unsupported("concatenation along the sequence axis of a rank-\(r) blob") }
        b.op("concat", ["values": .values(values), "axis": .int(sequence ? -5 : -3)], into: try b.output())
    }

    private static func split(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let x = b.atLeastRank3(try b.input())
        b.op("split", ["x": .value(x), "num_splits": .int(b.outputs.count), "axis": .int(-3)], outputs: b.outputs)
    }

    private static func flatten(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        var x = b.atLeastRank3(try b.input())
        let r = b.rank(x)
        if layer.flatten?.pointee.mode == CORE_ML__SPECIFICATION__FLATTEN_LAYER_PARAMS__FLATTEN_ORDER__CHANNEL_LAST {
            x = b.op("transpose", ["x": .value(x), "perm": .ints(Array(0..<(r - 3)) + [r - 2, r - 1, r - 3])])
        }
        let lead = b.dims(x, 0, -3)
        _ = b.reshape(x, to: b.shape([.vector(lead), .literal([-1, 1, 1])]), into: try b.output())
    }

    private static func reshape(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.reshape?.pointee else { throw b.invalid("no parameters") }
        var target = scalars(params.targetshape, params.n_targetshape).map(Int.init)
        if target.count == 4 { target.removeFirst() }
        if target.count == 1 { target += [1, 1] }
        guard target.count == 3 else { throw b.invalid("target shape \(target) is not [C, H, W] or [S, C, H, W]") }
        var x = b.atLeastRank3(try b.input())
        let r = b.rank(x), output = try b.output()
        let lead = b.dims(x, 0, -3)
        let channelLast = params.mode == CORE_ML__SPECIFICATION__RESHAPE_LAYER_PARAMS__RESHAPE_ORDER__CHANNEL_LAST
        let hwc = Array(0..<(r - 3)) + [r - 2, r - 1, r - 3]
        if channelLast {
            x = b.op("transpose", ["x": .value(x), "perm": .ints(hwc)])
            let reshaped = b.reshape(x, to: b.shape([.vector(lead), .literal([target[1], target[2], target[0]])]))
            b.op("transpose", ["x": .value(reshaped), "perm": .ints(Array(0..<(r - 3)) + [r - 1, r - 3, r - 2])], into: output)
            return
        }
        _ = b.reshape(x, to: b.shape([.vector(lead), .literal(target)]), into: output)
    }

    private static func permute(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let axes = layer.permute.map { scalars($0.pointee.axis, $0.pointee.n_axis).map(Int.init) } ?? []
        guard axes.count == 4, Set(axes) == Set(0..<4) else { throw b.invalid("axes \(axes) do not permute (Seq, C, H, W)") }
        let x = try b.input(), output = try b.output(), r = b.rank(x)
        if r >= 5 {
            // [S, B, C, H, W]: the batch stays at axis 1.
            let position = [0, 2, 3, 4]
            let lead = Array(0..<(r - 5))
            let perm = lead + [position[axes[0]] + lead.count, lead.count + 1] + axes.dropFirst().map { position[$0] + lead.count }
            b.op("transpose", ["x": .value(x), "perm": .ints(perm)], into: output)
            return
        }
        let view = b.op("expand_dims", ["x": .value(b.atLeastRank3(x)), "axes": .ints([0])])
        if axes[0] == 0 {
            let moved = b.op("transpose", ["x": .value(view), "perm": .ints(axes)])
            b.op("squeeze", ["x": .value(moved), "axes": .ints([0])], into: output)
        } else {
            b.op("transpose", ["x": .value(view), "perm": .ints(axes)], into: output)
        }
    }

    private static func padding(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.padding?.pointee else { throw b.invalid("no parameters") }
        var arguments: [String: LoweredArgument] = ["pad": .ints(border(params.paddingamounts))]
        switch params.padding_type_case {
        case CORE_ML__SPECIFICATION__PADDING_LAYER_PARAMS__PADDING_TYPE_REFLECTION: arguments["mode"] = .string("reflect")
        case CORE_ML__SPECIFICATION__PADDING_LAYER_PARAMS__PADDING_TYPE_REPLICATION: arguments["mode"] = .string("replicate")
        default:
            arguments["mode"] = .string("constant")
            arguments["constant_val"] = .float(params.constant?.pointee.value ?? 0)
        }
        let x = try b.input()
        arguments["x"] = .value(x)
        b.op("pad", arguments, into: try b.output())
    }

    private static func crop(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.crop?.pointee else { throw b.invalid("no parameters") }
        let x = b.atLeastRank3(try b.input()), r = b.rank(x), output = try b.output()
        if b.inputs.count >= 2 {
            // To the second input's height and width, from an offset.
            let offsets = scalars(params.offset, params.n_offset).map(Int.init)
            let offset = offsets.count == 2 ? offsets : [0, 0]
            let size = b.shape([.literal(Array(repeating: -1, count: r - 2)), .vector(b.dims(try b.input(1), -2))])
            b.op("slice_by_size", ["x": .value(x), "begin": .ints(Array(repeating: 0, count: r - 2) + offset), "size": .value(size)],
                 into: output)
            return
        }
        let amounts = border(params.cropamounts)
        let begin = Array(repeating: 0, count: r - 2) + [amounts[0], amounts[2]]
        let end = Array(repeating: 0, count: r - 2) + [-amounts[1], -amounts[3]]
        let endMask = Array(repeating: true, count: r - 2) + [amounts[1] == 0, amounts[3] == 0]
        b.op("slice_by_index", ["x": .value(x), "begin": .ints(begin), "end": .ints(end), "end_mask": .bools(endMask)], into: output)
    }

    private static func slice(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.slice?.pointee else { throw b.invalid("no parameters") }
        let given = try b.input()
        let x = b.atLeastRank3(given), r = b.rank(x)
        let axis = switch params.axis {
        case CORE_ML__SPECIFICATION__SLICE_LAYER_PARAMS__SLICE_AXIS__HEIGHT_AXIS: r - 2
        case CORE_ML__SPECIFICATION__SLICE_LAYER_PARAMS__SLICE_AXIS__WIDTH_AXIS: r - 1
        default: r - 3
        }
        var begin = Array(repeating: 0, count: r), end = begin, stride = Array(repeating: 1, count: r)
        var endMask = Array(repeating: true, count: r)
        begin[axis] = Int(params.startindex)
        // An end of 0 or less counts from the end (0: through the last).
        end[axis] = Int(params.endindex)
        endMask[axis] = params.endindex == 0
        stride[axis] = max(1, Int(params.stride))
        let arguments: [String: LoweredArgument] = ["x": .value(x), "begin": .ints(begin), "end": .ints(end), "stride": .ints(stride),
                                                    "end_mask": .bools(endMask)]
        let added = r - b.rank(given)
        guard added > 0 else {
            b.op("slice_by_index", arguments, into: try b.output())
            return
        }
        // A blob of rank 1 or 2 (a converter's rank-N network) keeps its rank: (10,) sliced on the
        // width axis gives (4,), not (1, 1, 4).
        let sliced = b.op("slice_by_index", arguments)
        b.op("squeeze", ["x": .value(sliced), "axes": .ints(Array(0..<added))], into: try b.output())
    }

    private static func reduce(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.reduce?.pointee else { throw b.invalid("no parameters") }
        let x = b.atLeastRank3(try b.input()), output = try b.output()
        let axes: [Int] = switch params.axis {
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__HW: [-2, -1]
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__C: [-3]
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__H: [-2]
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_AXIS__W: [-1]
        default: [-3, -2, -1]
        }
        let keep: [String: LoweredArgument] = ["x": .value(x), "axes": .ints(axes), "keep_dims": .bool(true)]
        switch params.mode {
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__AVG: b.op("reduce_mean", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__PROD: b.op("reduce_prod", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__SUMSQUARE: b.op("reduce_sum_square", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__L1: b.op("reduce_l1_norm", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__L2: b.op("reduce_l2_norm", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__MAX: b.op("reduce_max", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__MIN: b.op("reduce_min", keep, into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__LOGSUM:
            let sum = b.op("reduce_sum", keep)
            b.op("log", ["x": .value(b.op("add", ["x": .value(sum), "y": .float(params.epsilon == 0 ? 1e-6 : params.epsilon)]))],
                 into: output)
        case CORE_ML__SPECIFICATION__REDUCE_LAYER_PARAMS__REDUCE_OPERATION__ARGMAX:
            guard axes.count == 1 else { throw b.unsupported("argmax over more than one axis") }
            let index = b.op("reduce_argmax", ["x": .value(x), "axis": .int(axes[0]), "keep_dims": .bool(true)])
            b.toFloat(index, into: output)
        default: b.op("reduce_sum", keep, into: output)
        }
    }

    private static func loadConstant(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.loadconstant?.pointee else { throw b.invalid("no parameters") }
        let shape = scalars(params.shape, params.n_shape).map(Int.init)
        let values = try b.weights(params.data, "data", count: shape.reduce(1, *))
        b.op("identity", ["x": .floats(values, shape: shape)], into: try b.output())
    }

    private static func reorganizeData(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.reorganizedata?.pointee else { throw b.invalid("no parameters") }
        let block = Int(params.blocksize)
        try b.channelFirst(try b.input(), into: try b.output()) { b, x throws(RuntimeError) in
            switch params.mode {
            case CORE_ML__SPECIFICATION__REORGANIZE_DATA_LAYER_PARAMS__REORGANIZATION_TYPE__DEPTH_TO_SPACE:
                b.op("depth_to_space", ["x": .value(x), "block_size": .int(block)])
            case CORE_ML__SPECIFICATION__REORGANIZE_DATA_LAYER_PARAMS__REORGANIZATION_TYPE__PIXEL_SHUFFLE:
                b.op("pixel_shuffle", ["x": .value(x), "upscale_factor": .int(block)])
            default:
                b.op("space_to_depth", ["x": .value(x), "block_size": .int(block)])
            }
        }
    }

    private static func sequenceRepeat(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let count = max(1, Int(layer.sequencerepeat?.pointee.nrepetitions ?? 1))
        let x = try b.input(), r = b.rank(x)
        guard r >= 5 else { throw b.unsupported("repeating the sequence of a rank-\(r) blob (the sequence axis is the fifth from the end)") }
        var reps = Array(repeating: 1, count: r)
        reps[r - 5] = count
        b.op("tile", ["x": .value(x), "reps": .ints(reps)], into: try b.output())
    }

    // MARK: Resampling

    private static func upsample(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.upsample?.pointee else { throw b.invalid("no parameters") }
        let integral = scalars(params.scalingfactor, params.n_scalingfactor).map(Float.init)
        let fractional: [Float] = scalars(params.fractionalscalingfactor, params.n_fractionalscalingfactor)
        let factors = fractional.count == 2 ? fractional : (integral.count == 2 ? integral : [1, 1])
        var arguments: [String: LoweredArgument] = ["scale_factor_height": .float(factors[0]), "scale_factor_width": .float(factors[1])]
        let type: String
        if params.mode == CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__INTERPOLATION_MODE__BILINEAR {
            type = "upsample_bilinear"
            switch params.linearupsamplemode {
            case CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__LINEAR_UPSAMPLE_MODE__ALIGN_CORNERS_TRUE:
                arguments["align_corners"] = .bool(true)
            case CORE_ML__SPECIFICATION__UPSAMPLE_LAYER_PARAMS__LINEAR_UPSAMPLE_MODE__ALIGN_CORNERS_FALSE:
                arguments["align_corners"] = .bool(false)
                arguments["half_pixel_centers"] = .bool(true)
            default:
                arguments["align_corners"] = .bool(false)
                arguments["half_pixel_centers"] = .bool(false)
            }
        } else {
            type = "upsample_nearest_neighbor"
        }
        try b.channelFirst(try b.input(), into: try b.output()) { b, x throws(RuntimeError) in
            var arguments = arguments
            arguments["x"] = .value(x)
            return b.op(type, arguments)
        }
    }

    static func samplingMode(_ params: CoreML__Specification__SamplingMode?) -> String {
        switch params?.samplingmethod {
        case CORE_ML__SPECIFICATION__SAMPLING_MODE__METHOD__STRICT_ALIGN_ENDPOINTS_MODE?: "STRICT_ALIGN_CORNERS"
        case CORE_ML__SPECIFICATION__SAMPLING_MODE__METHOD__ALIGN_ENDPOINTS_MODE?: "ALIGN_CORNERS"
        case CORE_ML__SPECIFICATION__SAMPLING_MODE__METHOD__ROI_ALIGN_MODE?: "OFFSET_CORNERS"
        default: "DEFAULT"
        }
    }

    private static func resizeBilinear(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.resizebilinear?.pointee else { throw b.invalid("no parameters") }
        let size = scalars(params.targetsize, params.n_targetsize).map(Int.init)
        guard size.count == 2 else { throw b.invalid("target size \(size) is not [height, width]") }
        let mode = samplingMode(params.mode?.pointee)
        try b.channelFirst(try b.input(), into: try b.output()) { b, x throws(RuntimeError) in
            b.op("resize_bilinear", ["x": .value(x), "target_size_height": .int(size[0]), "target_size_width": .int(size[1]),
                                     "sampling_mode": .string(mode)])
        }
    }

    private static func cropResize(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.cropresize?.pointee else { throw b.invalid("no parameters") }
        let size = scalars(params.targetsize, params.n_targetsize).map(Int.init)
        guard size.count == 2 else { throw b.invalid("target size \(size) is not [height, width]") }
        let x = try b.input()
        let (view, _) = b.batched(x)
        let coordinates: String = switch params.boxindicesmode?.pointee.boxmode {
        case CORE_ML__SPECIFICATION__BOX_COORDINATES_MODE__COORDINATES__CORNERS_WIDTH_FIRST?: "CORNERS_WIDTH_FIRST"
        case CORE_ML__SPECIFICATION__BOX_COORDINATES_MODE__COORDINATES__CENTER_SIZE_HEIGHT_FIRST?: "CENTER_SIZE_HEIGHT_FIRST"
        case CORE_ML__SPECIFICATION__BOX_COORDINATES_MODE__COORDINATES__CENTER_SIZE_WIDTH_FIRST?: "CENTER_SIZE_WIDTH_FIRST"
        default: "CORNERS_HEIGHT_FIRST"
        }
        // The ROIs are [N, 1, 4 or 5, 1, 1]; the output [N, B, C, h, w].
        b.op("crop_resize", ["x": .value(view), "roi": .value(try b.input(1)), "target_height": .int(size[0]), "target_width": .int(size[1]),
                             "normalized_coordinates": .bool(params.normalizedcoordinates != 0), "spatial_scale": .float(params.spatialscale == 0 ? 1 : params.spatialscale),
                             "box_coordinate_mode": .string(coordinates), "sampling_mode": .string(samplingMode(params.mode?.pointee))],
             into: try b.output())
    }
}

extension LoweringBuilder {
    /// A per-channel constant broadcast over `[..., C, H, W]` (one value for every channel when it holds one).
    mutating func channelConstant(_ values: [Float], rank: Int) -> LoweredArgument {
        values.count == 1 ? .float(values[0]) : .floats(values, shape: Array(repeating: 1, count: max(0, rank - 3)) + [values.count, 1, 1])
    }

    /// A scale or bias of shape `[1]`, `[C]` or `[C, H, W]` broadcast over a rank-`rank` blob.
    func blobConstant(_ values: [Float], shape: [Int], rank: Int) -> LoweredArgument {
        if values.count == 1 { return .float(values[0]) }
        let chw = shape.count == 1 ? [shape[0], 1, 1] : shape
        return .floats(values, shape: Array(repeating: 1, count: max(0, rank - chw.count)) + chw)
    }

    /// `x · scale[c] + shift[c]`, channels at axis -3.
    mutating func channelAffine(_ x: String, scale: [Float], shift: [Float], into output: String) {
        let view = atLeastRank3(x), r = rank(view)
        let scaled = op("mul", ["x": .value(view), "y": channelConstant(scale, rank: r)])
        op("add", ["x": .value(scaled), "y": channelConstant(shift, rank: r)], into: output)
    }

    /// The layer's inputs combined pairwise by `type` (broadcasting); with one
    /// input, combined with `alpha`.
    @discardableResult
    mutating func combine(_ type: String, alpha: Float?, into given: String? = nil) throws(RuntimeError) -> String {
        let output: String
        if let given { output = given } else { output = try self.output() }
        let first = try input()
        guard inputs.count > 1 else {
            if let alpha { op(type, ["x": .value(first), "y": .float(alpha)], into: output) } else { identity(first, into: output) }
            return output
        }
        var result = first
        for (index, next) in inputs.dropFirst().enumerated() {
            result = op(type, ["x": .value(result), "y": .value(next)], into: index == inputs.count - 2 ? output : nil)
        }
        return result
    }
}
