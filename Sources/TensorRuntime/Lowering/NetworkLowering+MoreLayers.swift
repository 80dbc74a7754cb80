import CoreMLSchema
import ModelFeatures
import ModelSpec

/// Recurrent layers (`[Seq, B, C, 1, 1]` in, `[Seq, B, H, 1, 1]` out),
/// random sampling (run with a seed only), and the 3-D convolution and pooling layers.
extension NetworkLowering {
    static let recurrentLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIMPLE_RECURRENT.rawValue: simpleRecurrent,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GRU.rawValue: gru,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UNI_DIRECTIONAL_LSTM.rawValue: lstm,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BI_DIRECTIONAL_LSTM.rawValue: bidirectionalLSTM,
    ]

    static let randomLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_NORMAL_LIKE.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomnormallike?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_normal", ["mean": .float(p.mean), "stddev": .float(p.stddev)], seed: p.seed, single: p.stddev == 0, shape: .like)
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_NORMAL_STATIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomnormalstatic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_normal", ["mean": .float(p.mean), "stddev": .float(p.stddev)], seed: p.seed, single: p.stddev == 0,
                         shape: .fixed(scalars(p.outputshape, p.n_outputshape).map(Int.init)))
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_NORMAL_DYNAMIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomnormaldynamic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_normal", ["mean": .float(p.mean), "stddev": .float(p.stddev)], seed: p.seed, single: p.stddev == 0, shape: .dynamic)
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_UNIFORM_LIKE.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomuniformlike?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_uniform", ["low": .float(p.minval), "high": .float(p.maxval)], seed: p.seed, single: p.minval == p.maxval, shape: .like)
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_UNIFORM_STATIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomuniformstatic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_uniform", ["low": .float(p.minval), "high": .float(p.maxval)], seed: p.seed, single: p.minval == p.maxval,
                         shape: .fixed(scalars(p.outputshape, p.n_outputshape).map(Int.init)))
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_UNIFORM_DYNAMIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randomuniformdynamic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_uniform", ["low": .float(p.minval), "high": .float(p.maxval)], seed: p.seed, single: p.minval == p.maxval, shape: .dynamic)
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_BERNOULLI_LIKE.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randombernoullilike?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_bernoulli", ["prob": .float(p.prob)], seed: p.seed, single: p.prob <= 0 || p.prob >= 1, shape: .like)
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_BERNOULLI_STATIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randombernoullistatic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_bernoulli", ["prob": .float(p.prob)], seed: p.seed, single: p.prob <= 0 || p.prob >= 1, shape: .fixed(scalars(p.outputshape, p.n_outputshape).map(Int.init)))
        },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANDOM_BERNOULLI_DYNAMIC.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.randombernoullidynamic?.pointee else { throw b.invalid("no parameters") }
            try b.random("random_bernoulli", ["prob": .float(p.prob)], seed: p.seed, single: p.prob <= 0 || p.prob >= 1, shape: .dynamic)
        },
    ]

    static let controlLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH.rawValue: branch,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP.rawValue: loop,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP_BREAK.rawValue: { b, _ throws(RuntimeError) in try b.setLoopFlags(breaking: true) },
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP_CONTINUE.rawValue: { b, _ throws(RuntimeError) in try b.setLoopFlags(breaking: false) },
    ]

    /// `categoricalDistribution`: MIL `random_categorical` (logits divided by the temperature).
    static let categoricalLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CATEGORICAL_DISTRIBUTION.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.categoricaldistribution?.pointee else { throw b.invalid("no parameters") }
            guard p.seed >= 0 else { throw b.unsupported("random sampling without a seed cannot be reproduced; modelc runs it only with a seed") }
            var x = try b.input()
            if p.islogits != 0, p.temperature != 0, p.temperature != 1 {
                x = b.op("real_div", ["x": .value(x), "y": .float(p.temperature)])
            }
            b.op("random_categorical", ["x": .value(x), "mode": .string(p.islogits != 0 ? "logits" : "probs"),
                                        "size": .int(max(1, Int(p.numsamples))), "seed": .int(Int(p.seed))], into: try b.output())
        },
    ]

    /// `NonMaximumSuppression`: MIL's iOS15 `non_maximum_suppression` (the same boxes [B, N, 4] as
    /// center x, center y, width, height, scores [B, N, C], outputs and rule), thresholds and the box
    /// count from the parameters or, with five inputs, from inputs 3–5; the indices and counts as floats.
    static let detectionLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_NON_MAXIMUM_SUPPRESSION.rawValue: { b, l throws(RuntimeError) in
            guard let p = l.nonmaximumsuppression?.pointee else { throw b.invalid("no parameters") }
            guard b.outputs.count == 4 else { throw b.invalid("\(b.outputs.count) outputs; it gives boxes, scores, box indices and counts") }
            var arguments: [String: LoweredArgument] = ["boxes": .value(try b.input()), "scores": .value(try b.input(1)),
                                                        "per_class_suppression": .bool(p.perclasssuppression != 0)]
            if b.inputs.count >= 5 {
                arguments["iou_threshold"] = .value(try b.input(2))
                arguments["score_threshold"] = .value(try b.input(3))
                arguments["max_boxes"] = .value(b.toInt(try b.input(4)))
            } else {
                arguments["iou_threshold"] = .float(p.iouthreshold)
                arguments["score_threshold"] = .float(p.scorethreshold)
                arguments["max_boxes"] = .int(Int(p.maxboxes))
            }
            let indices = b.fresh(), counts = b.fresh()
            b.op("non_maximum_suppression", arguments, outputs: [b.outputs[0], b.outputs[1], indices, counts])
            b.toFloat(indices, into: b.outputs[2])
            b.toFloat(counts, into: b.outputs[3])
        },
    ]

    static let volumeLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION3D.rawValue: convolution3D,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POOLING3D.rawValue: pooling3D,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GLOBAL_POOLING3D.rawValue: { b, l throws(RuntimeError) in
            let x = try b.input()
            let type = l.globalpooling3d?.pointee.type == CORE_ML__SPECIFICATION__GLOBAL_POOLING3_DLAYER_PARAMS__GLOBAL_POOLING_TYPE3_D__AVERAGE
                ? "reduce_mean" : "reduce_max"
            b.op(type, ["x": .value(x), "axes": .ints([-3, -2, -1]), "keep_dims": .bool(true)], into: try b.output())
        },
    ]

    // MARK: Recurrent

    /// The MIL name of a recurrent layer's activation. Parameters left unset
    /// (zero) mean the standard ones, as coremltools' builder writes them:
    /// linear is the identity, scaled tanh is tanh, hard sigmoid is
    /// min(max(0.2 x + 0.5, 0), 1).
    private static func activationName(_ params: UnsafeMutablePointer<CoreML__Specification__ActivationParams>?, _ fallback: String,
                                       _ b: LoweringBuilder) throws(RuntimeError) -> String {
        guard let params = params?.pointee else { return fallback }
        func standard(_ alpha: Float?, _ beta: Float?, _ expected: (Float, Float)) -> Bool {
            let given = (alpha ?? 0, beta ?? 0)
            return given == (0, 0) || given == expected
        }
        switch params.nonlinearity_type_case {
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID: return "sigmoid"
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_TANH: return "tanh"
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_RE_LU: return "relu"
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_LINEAR
            where standard(params.linear?.pointee.alpha, params.linear?.pointee.beta, (1, 0)): return "linear"
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SCALED_TANH
            where standard(params.scaledtanh?.pointee.alpha, params.scaledtanh?.pointee.beta, (1, 1)): return "scaled_tanh"
        case CORE_ML__SPECIFICATION__ACTIVATION_PARAMS__NONLINEARITY_TYPE_SIGMOID_HARD
            where standard(params.sigmoidhard?.pointee.alpha, params.sigmoidhard?.pointee.beta, (0.2, 0.5)): return "hard_sigmoid"
        default:
            throw b.unsupported("a recurrent activation other than sigmoid, tanh, relu or the standard linear, scaled tanh and hard sigmoid")
        }
    }

    /// The layer's input as `[Seq, B, I]` and how results come back: `[Seq, B, H, 1, 1]` (rank 5) or `[H, 1, 1]`.
    private static func sequence(_ b: inout LoweringBuilder, inputs: Int) throws(RuntimeError) -> String {
        let x = try b.input(), r = b.rank(x)
        if r >= 5 { return b.reshape(x, to: b.shape([.vector(b.dims(x, -5, -4)), .literal([-1, inputs])])) }
        return b.reshape(x, [1, -1, inputs])
    }

    /// An initial state given as input `index` (`[1, B, H, 1, 1]`) as `[B, H]`, or zeros.
    private static func initialState(_ b: inout LoweringBuilder, _ index: Int, sequence: String, hidden: Int) throws(RuntimeError) -> String {
        if index < b.inputs.count { return b.reshape(try b.input(index), [-1, hidden]) }
        return b.op("fill", ["shape": .value(b.shape([.vector(b.dims(sequence, 1, 2)), .literal([hidden])])), "value": .float(0)])
    }

    /// A `[S, B, H]` sequence or `[B, H]` state as the layer's blob `output`.
    private static func blob(_ b: inout LoweringBuilder, _ value: String, hidden: Int, into output: String) throws(RuntimeError) {
        if b.rank(try b.input()) >= 5 {
            let lead = b.rank(value) == 3 ? b.dims(value, 0, 2) : b.shape([.literal([1]), .vector(b.dims(value, 0, 1))])
            _ = b.reshape(value, to: b.shape([.vector(lead), .literal([hidden, 1, 1])]), into: output)
        } else {
            _ = b.reshape(value, [hidden, 1, 1], into: output)
        }
    }

    private static func simpleRecurrent(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.simplerecurrent?.pointee else { throw b.invalid("no parameters") }
        let inputs = Int(p.inputvectorsize), hidden = Int(p.outputvectorsize)
        let x = try sequence(&b, inputs: inputs)
        var arguments: [String: LoweredArgument] = [
            "x": .value(x), "initial_h": .value(try initialState(&b, 1, sequence: x, hidden: hidden)),
            "weight_ih": .floats(try b.weights(p.weightmatrix, "weightMatrix", count: hidden * inputs), shape: [hidden, inputs]),
            "weight_hh": .floats(try b.weights(p.recursionmatrix, "recursionMatrix", count: hidden * hidden), shape: [hidden, hidden]),
            "direction": .string(p.reverseinput != 0 ? "reverse" : "forward"), "output_sequence": .bool(p.sequenceoutput != 0),
            "activation": .string(try activationName(p.activation, "tanh", b)),
        ]
        if p.hasbiasvector != 0 { arguments["bias"] = .floats(try b.weights(p.biasvector, "biasVector", count: hidden), shape: [hidden]) }
        let names = [b.fresh(), b.fresh()]
        b.op("rnn", arguments, outputs: names)
        try blob(&b, names[0], hidden: hidden, into: try b.output(0))
        if b.outputs.count > 1 { try blob(&b, names[1], hidden: hidden, into: try b.output(1)) }
    }

    private static func gru(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.gru?.pointee else { throw b.invalid("no parameters") }
        let inputs = Int(p.inputvectorsize), hidden = Int(p.outputvectorsize)
        let x = try sequence(&b, inputs: inputs)
        let activations = elements(p.activations, p.n_activations)
        // MIL's gate order: reset, output, update.
        let ih = try b.weights(p.resetgateweightmatrix, "resetGateWeightMatrix", count: hidden * inputs)
            + b.weights(p.outputgateweightmatrix, "outputGateWeightMatrix", count: hidden * inputs)
            + b.weights(p.updategateweightmatrix, "updateGateWeightMatrix", count: hidden * inputs)
        let hh = try b.weights(p.resetgaterecursionmatrix, "resetGateRecursionMatrix", count: hidden * hidden)
            + b.weights(p.outputgaterecursionmatrix, "outputGateRecursionMatrix", count: hidden * hidden)
            + b.weights(p.updategaterecursionmatrix, "updateGateRecursionMatrix", count: hidden * hidden)
        var arguments: [String: LoweredArgument] = [
            "x": .value(x), "initial_h": .value(try initialState(&b, 1, sequence: x, hidden: hidden)),
            "weight_ih": .floats(ih, shape: [3 * hidden, inputs]), "weight_hh": .floats(hh, shape: [3 * hidden, hidden]),
            "direction": .string(p.reverseinput != 0 ? "reverse" : "forward"), "output_sequence": .bool(p.sequenceoutput != 0),
            "recurrent_activation": .string(try activationName(activations.first, "sigmoid", b)),
            "activation": .string(try activationName(activations.count > 1 ? activations[1] : nil, "tanh", b)),
        ]
        if p.hasbiasvectors != 0 {
            let bias = try b.weights(p.resetgatebiasvector, "resetGateBiasVector", count: hidden)
                + b.weights(p.outputgatebiasvector, "outputGateBiasVector", count: hidden)
                + b.weights(p.updategatebiasvector, "updateGateBiasVector", count: hidden)
            arguments["bias"] = .floats(bias, shape: [3 * hidden])
        }
        let names = [b.fresh(), b.fresh()]
        b.op("gru", arguments, outputs: names)
        try blob(&b, names[0], hidden: hidden, into: try b.output(0))
        if b.outputs.count > 1 { try blob(&b, names[1], hidden: hidden, into: try b.output(1)) }
    }

    /// One direction's LSTM weights in MIL's gate order (input, forget, output, cell).
    /// `path`: where the weights sit below the layer's parameters (`weightParams`, `weightParams[1]`), their role in a compiled bundle.
    private static func lstmWeights(_ b: LoweringBuilder, _ w: CoreML__Specification__LSTMWeightParams, _ p: CoreML__Specification__LSTMParams?,
                                    inputs: Int, hidden: Int, path: String) throws(RuntimeError) -> [String: LoweredArgument] {
        let ih = try b.weights(w.inputgateweightmatrix, path + ".inputGateWeightMatrix", count: hidden * inputs)
            + b.weights(w.forgetgateweightmatrix, path + ".forgetGateWeightMatrix", count: hidden * inputs)
            + b.weights(w.outputgateweightmatrix, path + ".outputGateWeightMatrix", count: hidden * inputs)
            + b.weights(w.blockinputweightmatrix, path + ".blockInputWeightMatrix", count: hidden * inputs)
        let hh = try b.weights(w.inputgaterecursionmatrix, path + ".inputGateRecursionMatrix", count: hidden * hidden)
            + b.weights(w.forgetgaterecursionmatrix, path + ".forgetGateRecursionMatrix", count: hidden * hidden)
            + b.weights(w.outputgaterecursionmatrix, path + ".outputGateRecursionMatrix", count: hidden * hidden)
            + b.weights(w.blockinputrecursionmatrix, path + ".blockInputRecursionMatrix", count: hidden * hidden)
        var result: [String: LoweredArgument] = ["weight_ih": .floats(ih, shape: [4 * hidden, inputs]), "weight_hh": .floats(hh, shape: [4 * hidden, hidden])]
        var bias = [Float](repeating: 0, count: 4 * hidden)
        if p?.hasbiasvectors != 0 {
            bias = try b.weights(w.inputgatebiasvector, path + ".inputGateBiasVector", count: hidden)
                + b.weights(w.forgetgatebiasvector, path + ".forgetGateBiasVector", count: hidden)
                + b.weights(w.outputgatebiasvector, path + ".outputGateBiasVector", count: hidden)
                + b.weights(w.blockinputbiasvector, path + ".blockInputBiasVector", count: hidden)
        }
        // NeuralNetwork.proto's forgetBias: 1 added to the forget gate's bias.
        if p?.forgetbias != 0 { for j in hidden..<(2 * hidden) { bias[j] += 1 } }
        result["bias"] = .floats(bias, shape: [4 * hidden])
        if p?.haspeepholevectors != 0 {
            let peephole = try b.weights(w.inputgatepeepholevector, path + ".inputGatePeepholeVector", count: hidden)
                + b.weights(w.forgetgatepeepholevector, path + ".forgetGatePeepholeVector", count: hidden)
                + b.weights(w.outputgatepeepholevector, path + ".outputGatePeepholeVector", count: hidden)
            result["peephole"] = .floats(peephole, shape: [3 * hidden])
        }
        return result
    }

    private static func lstmActivations(_ list: [UnsafeMutablePointer<CoreML__Specification__ActivationParams>],
                                        _ b: LoweringBuilder) throws(RuntimeError) -> [String: LoweredArgument] {
        ["recurrent_activation": .string(try activationName(list.first, "sigmoid", b)),
         "cell_activation": .string(try activationName(list.count > 1 ? list[1] : nil, "tanh", b)),
         "activation": .string(try activationName(list.count > 2 ? list[2] : nil, "tanh", b))]
    }

    private static func lstm(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.unidirectionallstm?.pointee, let w = p.weightparams?.pointee else { throw b.invalid("no parameters") }
        let params = p.params?.pointee
        guard params?.coupledinputandforgetgate == 0 || params == nil else { throw b.unsupported("a coupled input and forget gate is not supported") }
        let inputs = Int(p.inputvectorsize), hidden = Int(p.outputvectorsize)
        let x = try sequence(&b, inputs: inputs)
        var arguments = try lstmWeights(b, w, params, inputs: inputs, hidden: hidden, path: "weightParams")
        arguments.merge(try lstmActivations(elements(p.activations, p.n_activations), b)) { first, _ in first }
        arguments["x"] = .value(x)
        arguments["initial_h"] = .value(try initialState(&b, 1, sequence: x, hidden: hidden))
        arguments["initial_c"] = .value(try initialState(&b, 2, sequence: x, hidden: hidden))
        arguments["direction"] = .string(p.reverseinput != 0 ? "reverse" : "forward")
        arguments["output_sequence"] = .bool(params?.sequenceoutput != 0 && params != nil)
        arguments["clip"] = .float(params.map { $0.cellclipthreshold == 0 ? 50_000 : $0.cellclipthreshold } ?? 50_000)
        let names = [b.fresh(), b.fresh(), b.fresh()]
        b.op("lstm", arguments, outputs: names)
        for (index, name) in names.enumerated() where index < b.outputs.count {
            try blob(&b, name, hidden: hidden, into: try b.output(index))
        }
    }

    private static func bidirectionalLSTM(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.bidirectionallstm?.pointee else { throw b.invalid("no parameters") }
        let weights = elements(p.weightparams, p.n_weightparams)
        guard weights.count == 2 else { throw b.invalid("\(weights.count) weight sets, expected forward and backward") }
        let params = p.params?.pointee
        guard params?.coupledinputandforgetgate == 0 || params == nil else { throw b.unsupported("a coupled input and forget gate is not supported") }
        let inputs = Int(p.inputvectorsize), hidden = Int(p.outputvectorsize)
        let forward = elements(p.activationsforwardlstm, p.n_activationsforwardlstm)
        let backward = elements(p.activationsbackwardlstm, p.n_activationsbackwardlstm)
        for index in 0..<3 {
            let fallback = index == 0 ? "sigmoid" : "tanh"
            let one = try activationName(index < forward.count ? forward[index] : nil, fallback, b)
            let other = try activationName(index < backward.count ? backward[index] : nil, fallback, b)
            guard one == other else { throw b.unsupported("different activations for the two directions (\(one), \(other))") }
        }
        let x = try sequence(&b, inputs: inputs)
        var arguments = try lstmWeights(b, weights[0].pointee, params, inputs: inputs, hidden: hidden, path: "weightParams[0]")
        for (key, value) in try lstmWeights(b, weights[1].pointee, params, inputs: inputs, hidden: hidden, path: "weightParams[1]") { arguments[key + "_back"] = value }
        arguments.merge(try lstmActivations(forward, b)) { first, _ in first }
        // Initial states: forward [B, H] then backward [B, H], side by side.
        let h = b.op("concat", ["values": .values([try initialState(&b, 1, sequence: x, hidden: hidden), try initialState(&b, 3, sequence: x, hidden: hidden)]),
                                "axis": .int(1)])
        let c = b.op("concat", ["values": .values([try initialState(&b, 2, sequence: x, hidden: hidden), try initialState(&b, 4, sequence: x, hidden: hidden)]),
                                "axis": .int(1)])
        arguments["x"] = .value(x)
        arguments["initial_h"] = .value(h)
        arguments["initial_c"] = .value(c)
        arguments["direction"] = .string("bidirectional")
        arguments["output_sequence"] = .bool(params?.sequenceoutput != 0 && params != nil)
        arguments["clip"] = .float(params.map { $0.cellclipthreshold == 0 ? 50_000 : $0.cellclipthreshold } ?? 50_000)
        let names = [b.fresh(), b.fresh(), b.fresh()]
        b.op("lstm", arguments, outputs: names)
        try blob(&b, names[0], hidden: 2 * hidden, into: try b.output(0))
        // Outputs 1–4: forward h, forward c, backward h, backward c.
        for (index, (state, half)) in [(names[1], 0), (names[2], 0), (names[1], 1), (names[2], 1)].enumerated() where index + 1 < b.outputs.count {
            let part = b.op("slice_by_index", ["x": .value(state), "begin": .ints([0, half * hidden]), "end": .ints([0, (half + 1) * hidden]),
                                               "begin_mask": .bools([true, false]), "end_mask": .bools([true, false])])
            try blob(&b, part, hidden: hidden, into: try b.output(index + 1))
        }
    }

    // MARK: Control flow

    /// `branch`: MIL `cond` on the condition blob (non-zero runs `ifBranch`).
    private static func branch(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.branch?.pointee, let yes = params.ifbranch?.pointee else { throw b.invalid("no ifBranch") }
        b.wrote(try conditional(&b, on: try b.input(), yes: yes, no: params.elsebranch?.pointee))
    }

    /// MIL `cond` on `condition` (non-zero runs `yes`, else `no`). Each
    /// network's layers become a block; the cond gives every blob either
    /// network writes that exists after it (written by both, or by one and
    /// existing before), the other network passing the value it had. Returns
    /// those blobs.
    static func conditional(_ b: inout LoweringBuilder, on condition: String, yes: CoreML__Specification__NeuralNetwork,
                            no: CoreML__Specification__NeuralNetwork?) throws(RuntimeError) -> [String] {
        let before = b.facts
        let (yesOperations, yesWritten, yesFacts) = try b.nested(yes)
        let (noOperations, noWritten, noFacts) = try no.map { network throws(RuntimeError) in try b.nested(network) } ?? ([], [], before)
        var blobs: [String] = []
        for blob in yesWritten + noWritten where !blobs.contains(blob) {
            let inBoth = yesWritten.contains(blob) && noWritten.contains(blob)
            if inBoth || before[blob] != nil { blobs.append(blob) }
        }
        func block(_ operations: [GraphOperation], _ b: inout LoweringBuilder) -> GraphBlock {
            var operations = operations
            var outputs: [String] = []
            for blob in blobs {
                // A blob the network does not write passes through (copied inside the block, so the step reads it).
                let name = b.fresh()
                operations.append(GraphOperation(type: "identity", arguments: ["x": [.value(blob)]],
                                                 outputs: [(name: name, type: ValueType(element: .float32, shape: nil))], blocks: []))
                outputs.append(name)
            }
            return GraphBlock(operations: operations, outputs: outputs, constants: [:])
        }
        let yesBlock = block(yesOperations, &b), noBlock = block(noOperations, &b)
        b.facts = before
        // Either network may have given a blob: its rank, its dimensions only where both agree.
        for blob in blobs {
            let given = [yesFacts[blob] ?? before[blob], noFacts[blob] ?? before[blob]].compactMap { $0 }
            b.facts[blob] = given.count == 2 && given[0] == given[1] ? given[0]
                : ValueType(.float32, rank: (yesFacts[blob] ?? noFacts[blob] ?? before[blob])?.rank ?? 1)
        }
        b.operations.append(GraphOperation(type: "cond", arguments: ["pred": [.value(condition)]],
                                           outputs: blobs.map { (name: $0, type: ValueType(element: .float32, shape: nil)) },
                                           blocks: [yesBlock, noBlock]))
        return blobs
    }

    /// The facts of a blob a loop carries that hold both on entering an iteration and after it: the rank, and
    /// each dimension the iteration leaves as it was.
    private static func invariant(_ entry: ValueType?, _ exit: ValueType?) -> ValueType {
        guard let entry, let exit else { return ValueType(.float32, rank: (exit ?? entry)?.rank ?? 1) }
        guard let inDims = entry.shape, let outDims = exit.shape, inDims.count == outDims.count else {
            return ValueType(entry.element, rank: exit.rank ?? entry.rank ?? 1)
        }
        return ValueType(entry.element, shape: zip(inDims, outDims).map { $0 == $1 ? $0 : nil })
    }

    /// Whether `layer` may end its loop's iteration: a `loopBreak` or
    /// `loopContinue`, or a branch holding one (a nested loop's own do not count).
    static func interruptsLoop(_ layer: UnsafeMutablePointer<Layer>) -> Bool {
        switch layer.pointee.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP_BREAK, CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP_CONTINUE:
            return true
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH:
            let networks = [layer.pointee.branch?.pointee.ifbranch, layer.pointee.branch?.pointee.elsebranch].compactMap { $0 }
            return networks.contains { interrupts($0.pointee) }
        default:
            return false
        }
    }

    /// Whether a layer of `network` may end the iteration of the loop it is the body of.
    static func interrupts(_ network: CoreML__Specification__NeuralNetwork) -> Bool {
        elements(network.layers, network.n_layers).contains(where: interruptsLoop)
    }

    /// `loop`: MIL `while_loop` whose variables are the blobs the condition
    /// or body network writes that exist before the loop, plus an iteration
    /// count when the loop has a bound (its input, or `maxLoopIterations`).
    /// The condition block runs the condition network and tests
    /// `conditionVar` (and the count); the body block runs the condition
    /// network again (its blobs are visible to the body) and the body.
    /// A body holding a `loopBreak` or `loopContinue` gets two flags
    /// (`LoweringBuilder.LoopFlags`): `broken`, carried, also ends the loop in
    /// the condition block; `skip`, 0 at the start of each iteration, guards
    /// the layers after one (`nested`).
    private static func loop(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.loop?.pointee, let body = params.bodynetwork?.pointee else { throw b.invalid("no bodyNetwork") }
        let condition = params.conditionnetwork.map(\.pointee).flatMap { $0.n_layers > 0 ? $0 : nil }
        let conditionVar = text(params.conditionvar)
        let bound: LoweredArgument? = b.inputs.isEmpty
            ? (params.maxloopiterations > 0 ? .float(Float(params.maxloopiterations)) : nil) : .value(try b.input())
        guard condition != nil || bound != nil else { throw b.invalid("neither a condition network nor an iteration count") }
        var flags: LoweringBuilder.LoopFlags?
        if interrupts(body) {
            let made = LoweringBuilder.LoopFlags(broken: b.fresh(), skip: b.fresh())
            for name in [made.broken, made.skip] { b.op("fill", ["shape": .ints([1]), "value": .float(0)], into: name) }
            flags = made
        }
        let before = b.facts
        // Which blobs the networks write (lowered once to find out).
        let conditionPass = try condition.map { network throws(RuntimeError) in try b.nested(network) }
        if let conditionPass { b.facts = conditionPass.facts }
        b.loopFlags.append(flags)
        defer { b.loopFlags.removeLast() }
        let bodyPass = try b.nested(body)
        b.facts = before
        var carried: [String] = []
        for blob in (conditionPass?.written ?? []) + bodyPass.written where before[blob] != nil && !carried.contains(blob) {
            carried.append(blob)
        }
        let count = b.fresh()
        var names = carried
        if bound != nil { names.append(count) }
        let inputs = names.map { (name: $0, type: ValueType(element: .float32, shape: nil)) }
        // What holds of a carried blob at every iteration: its dimensions the networks keep as they are (a shape
        // vector's length), found by running them again on what is left until nothing more is lost.
        // Each pass only loses knowledge; past a few, only the ranks are kept.
        var entry = before, exit = bodyPass.facts
        for pass in 0... {
            var changed = false
            for blob in carried {
                let kept = pass < 8 ? Self.invariant(entry[blob], exit[blob]) : ValueType(.float32, rank: entry[blob]?.rank ?? 1)
                if kept != entry[blob] { (entry[blob], changed) = (kept, true) }
            }
            guard changed, pass < 8 else { break }
            b.facts = entry
            if let condition { b.facts = try b.nested(condition).facts }
            exit = try b.nested(body).facts
        }
        b.facts = entry
        if bound != nil { b.facts[count] = ValueType(.float32, shape: [1]) }

        // The condition block.
        var conditionOperations: [GraphOperation] = []
        var conditionFacts: [String: ValueType]?
        var flag: String?
        let outer = b.operations
        b.operations = []
        let carriedFacts = b.facts
        if let condition {
            let pass = try b.nested(condition)
            conditionOperations = pass.operations
            conditionFacts = pass.facts
            b.facts = pass.facts
            b.operations = conditionOperations
            guard !conditionVar.isEmpty else { throw b.invalid("a condition network without conditionVar") }
            flag = b.op("not_equal", ["x": .value(conditionVar), "y": .float(0)])
        }
        if let bound {
            let within = b.op("less", ["x": .value(count), "y": bound])
            flag = flag.map { b.op("logical_and", ["x": .value($0), "y": .value(within)]) } ?? within
        }
        if let flags {
            let running = b.op("equal", ["x": .value(flags.broken), "y": .float(0)])
            flag = flag.map { b.op("logical_and", ["x": .value($0), "y": .value(running)]) } ?? running
        }
        let conditionBlock = GraphBlock(inputs: inputs, operations: b.operations, outputs: [flag ?? count], constants: [:])

        // The body block.
        // What the condition network computed from the carried blobs (their dimensions unknown), not the first pass's.
        b.facts = conditionFacts ?? carriedFacts
        b.operations = condition == nil ? [] : conditionOperations
        if let flags { b.op("fill", ["shape": .ints([1]), "value": .float(0)], into: flags.skip) }
        let bodyOperations = try b.nested(body).operations
        b.operations += bodyOperations
        var results: [String] = []
        for blob in carried { results.append(b.op("identity", ["x": .value(blob)])) }
        if bound != nil { results.append(b.op("add", ["x": .value(count), "y": .float(1)])) }
        let bodyBlock = GraphBlock(inputs: inputs, operations: b.operations, outputs: results, constants: [:])
        b.operations = outer
        b.facts = before

        var initial: [LoweredArgument] = carried.map { .value($0) }
        if bound != nil { initial.append(.floats([0], shape: [1])) }
        b.operations.append(GraphOperation(type: "while_loop", arguments: ["loop_vars": LoweredArgument.list(initial).graphArguments],
                                           outputs: names.map { (name: $0, type: ValueType(element: .float32, shape: nil)) },
                                           blocks: [conditionBlock, bodyBlock]))
        for blob in carried { b.facts[blob] = carriedFacts[blob] }
        b.wrote(carried)
    }

    // MARK: 3-D

    private static func convolution3D(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.convolution3d?.pointee else { throw b.invalid("no parameters") }
        let transposed = p.isdeconvolution != 0
        let groups = max(1, Int(p.ngroups)), outputs = Int(p.outputchannels), inputs = Int(p.inputchannels)
        let kernel = [Int(p.kerneldepth), Int(p.kernelheight), Int(p.kernelwidth)]
        let shape = transposed ? [inputs, outputs / groups] + kernel : [outputs, inputs / groups] + kernel
        let weights = try b.weights(p.weights, "weights", count: shape.reduce(1, *), channels: shape[0])
        var arguments: [String: LoweredArgument] = [
            "x": .value(try b.input()), "weight": .floats(weights, shape: shape), "groups": .int(groups),
            "strides": .ints([Int(p.stridedepth), Int(p.strideheight), Int(p.stridewidth)].map { max(1, $0) }),
            "dilations": .ints([Int(p.dilationdepth), Int(p.dilationheight), Int(p.dilationwidth)].map { max(1, $0) }),
        ]
        if p.hasbias != 0 { arguments["bias"] = .floats(try b.weights(p.bias, "bias", count: outputs), shape: [outputs]) }
        switch p.paddingtype {
        case CORE_ML__SPECIFICATION__CONVOLUTION3_DLAYER_PARAMS__PADDING_TYPE__SAME: arguments["pad_type"] = .string("same")
        case CORE_ML__SPECIFICATION__CONVOLUTION3_DLAYER_PARAMS__PADDING_TYPE__VALID: arguments["pad_type"] = .string("valid")
        default:
            arguments["pad_type"] = .string("custom")
            arguments["pad"] = .ints([p.custompaddingfront, p.custompaddingback, p.custompaddingtop, p.custompaddingbottom,
                                      p.custompaddingleft, p.custompaddingright].map(Int.init))
        }
        let outputShape = scalars(p.outputshape, p.n_outputshape).map(Int.init)
        let x = try b.input()
        if transposed, outputShape.count == 3 {
            arguments["output_shape"] = .value(b.shape([.vector(b.dims(x, 0, 1)), .literal([outputs] + outputShape)]))
        }
        b.op(transposed ? "conv_transpose" : "conv", arguments, into: try b.output())
    }

    private static func pooling3D(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let p = layer.pooling3d?.pointee else { throw b.invalid("no parameters") }
        let average = p.type == CORE_ML__SPECIFICATION__POOLING3_DLAYER_PARAMS__POOLING_TYPE3_D__AVERAGE
        var arguments: [String: LoweredArgument] = [
            "x": .value(try b.input()), "kernel_sizes": .ints([Int(p.kerneldepth), Int(p.kernelheight), Int(p.kernelwidth)]),
            "strides": .ints([Int(p.stridedepth), Int(p.strideheight), Int(p.stridewidth)].map { max(1, $0) }),
        ]
        switch p.paddingtype {
        case CORE_ML__SPECIFICATION__POOLING3_DLAYER_PARAMS__POOLING3_DPADDING_TYPE__SAME: arguments["pad_type"] = .string("same")
        case CORE_ML__SPECIFICATION__POOLING3_DLAYER_PARAMS__POOLING3_DPADDING_TYPE__VALID: arguments["pad_type"] = .string("valid")
        default:
            arguments["pad_type"] = .string("custom")
            arguments["pad"] = .ints([p.custompaddingfront, p.custompaddingback, p.custompaddingtop, p.custompaddingbottom,
                                      p.custompaddingleft, p.custompaddingright].map(Int.init))
        }
        if average { arguments["exclude_padding_from_average"] = .bool(p.countexcludepadding != 0) }
        b.op(average ? "avg_pool" : "max_pool", arguments, into: try b.output())
    }
}

extension LoweringBuilder {
    enum RandomShape {
        /// The shape of the layer's input.
        case like
        case fixed([Int])
        /// The values of the layer's input.
        case dynamic
    }

    /// A random sampling layer: run with its seed; without one (−1) refused, as
    /// its results could not be reproduced, unless its distribution has a
    /// `single` value (then any seed gives the same numbers).
    mutating func random(_ type: String, _ parameters: [String: LoweredArgument], seed: Int64, single: Bool,
                         shape: RandomShape) throws(RuntimeError) {
        guard seed >= 0 || single else {
            throw unsupported("random sampling without a seed cannot be reproduced; modelc runs it only with a seed")
        }
        var arguments = parameters
        arguments["seed"] = .int(Int(seed))
        let rank: Int
        switch shape {
        case .like:
            let x = try input()
            arguments["shape"] = .value(op("shape", ["x": .value(x)]))
            rank = self.rank(x)
        case .fixed(let dims):
            arguments["shape"] = .ints(dims)
            rank = dims.count
        case .dynamic:
            arguments["shape"] = .value(toInt(try input()))
            rank = try self.rank(given: try input(), of: try output())
        }
        op(type, arguments, into: try output(), rank: rank)
    }
}
