/// Fusions around a convolution: a `batch_norm` folded into its constant
/// weights and bias, a constant per-channel `add` into its bias, then the
/// activations and residual sums after it as post-operations of one
/// `fused_conv` (see `ConvolutionOperations`), which oneDNN applies while
/// the result is still in cache.
enum ConvolutionFusion {
    static let rules: [FusionRule] = [batchNorm, bias, hardSwish, activation, residual, hardSwish, activation, affineBatchNorm, activation,
                                      inlineWeights]

    /// The operations a fusion may extend: a plain convolution or one fused before.
    static let convolutions: Set<String> = ["conv", "fused_conv", "channel_affine"]

    /// Activation operations with one input that oneDNN applies as post-operations, by MIL name.
    static let activations: Set<String> = ["relu", "relu6", "clip", "sigmoid", "silu", "tanh", "leaky_relu", "elu", "sigmoid_hard", "gelu"]

    /// The post-operations of a `fused_conv` (none for a `conv`).
    struct PostOperations {
        var kinds: [String] = []
        var alphas: [Float] = []
        var betas: [Float] = []
        var residuals: [GraphArgument] = []

        init() {}

        init(_ op: GraphOperation, graph: FusionGraph) {
            kinds = graph.constant(op, "activations")?.strings ?? []
            alphas = graph.constant(op, "alphas")?.floats ?? []
            betas = graph.constant(op, "betas")?.floats ?? []
            residuals = op.arguments["residuals"] ?? []
        }

        var isEmpty: Bool { kinds.isEmpty }

        /// Writes these into `arguments` (a `fused_conv`'s).
        func store(into arguments: inout [String: [GraphArgument]]) {
            arguments["activations"] = [.constant(Tensor(type: .string, shape: [kinds.count], storage: .strings(kinds)))]
            arguments["alphas"] = [.constant(Tensor(floats: alphas, shape: [alphas.count]))]
            arguments["betas"] = [.constant(Tensor(floats: betas, shape: [betas.count]))]
            arguments["residuals"] = residuals
        }
    }

    /// The convolution computing argument `key` of `op`, when `op` is its only reader: its index.
    private static func privateConvolution(_ graph: FusionGraph, _ op: GraphOperation, _ key: String) -> (index: Int, op: GraphOperation)? {
        guard let name = graph.computed(op, key), graph.isPrivate(name), let index = graph.producer(of: name),
              let producer = graph.operation(at: index), convolutions.contains(producer.type), producer.outputs.count == 1
        else { return nil }
        return (index, producer)
    }

    /// The constant weights of a convolution, when they are float constants.
    private static func weights(_ graph: FusionGraph, _ conv: GraphOperation) -> Tensor? {
        if conv.type == "channel_affine" { return graph.constant(conv, "scale") }
        guard let weight = graph.constant(conv, "weight"), weight.type.isFloat, weight.shape.count >= 3 else { return nil }
        return weight
    }

    /// `conv` as a `fused_conv` with `post` and `output` as its only output.
    private static func fused(_ conv: GraphOperation, post: PostOperations, output: (name: String, type: ValueType)) -> GraphOperation {
        var arguments = conv.arguments
        post.store(into: &arguments)
        return GraphOperation(type: conv.type == "channel_affine" ? conv.type : "fused_conv", arguments: arguments, outputs: [output], blocks: [])
            .rewritten(from: conv)
    }

    /// `batch_norm(conv(x))` with constant statistics: the convolution with
    /// weights scaled per output channel and the bias shifted.
    static let batchNorm = FusionRule("conv + batch_norm") { graph, index in
        guard let norm = graph.operation(at: index), norm.type == "batch_norm",
              let (convIndex, conv) = privateConvolution(graph, norm, "x"), conv.type != "channel_affine", PostOperations(conv, graph: graph).isEmpty,
              let weight = weights(graph, conv),
              let mean = graph.constant(norm, "mean")?.floats, let variance = graph.constant(norm, "variance")?.floats
        else { return false }
        let channels = weight.shape[0]
        let gamma = graph.constant(norm, "gamma")?.floats ?? Array(repeating: 1, count: channels)
        let beta = graph.constant(norm, "beta")?.floats ?? Array(repeating: 0, count: channels)
        let epsilon = graph.constant(norm, "epsilon")?.scalar.map(Float.init) ?? 1e-5
        let bias = graph.constant(conv, "bias")?.floats ?? Array(repeating: 0, count: channels)
        guard mean.count == channels, variance.count == channels, gamma.count == channels, beta.count == channels, bias.count == channels,
              graph.constant(conv, "bias") != nil || !conv.arguments.keys.contains("bias")
        else { return false }
        // As the batch_norm kernel computes them, in Float.
        let scale = (0..<channels).map { gamma[$0] / (variance[$0] + epsilon).squareRoot() }
        let shift = (0..<channels).map { beta[$0] - mean[$0] * scale[$0] }
        let perChannel = weight.count / channels
        var scaled = weight.floats
        for o in 0..<channels {
            for k in 0..<perChannel { scaled[o * perChannel + k] *= scale[o] }
        }
        var rewritten = conv
        rewritten.arguments["weight"] = [.constant(Tensor(floats: scaled, shape: weight.shape, type: weight.type))]
        rewritten.arguments["bias"] = [.constant(Tensor(floats: (0..<channels).map { bias[$0] * scale[$0] + shift[$0] }, shape: [channels],
                                                        type: weight.type))]
        rewritten.outputs = norm.outputs
        graph.replace([convIndex, index], with: rewritten)
        return true
    }

    /// `conv(x) + c` with `c` constant per output channel (or one value): the convolution's bias.
    static let bias = FusionRule("conv + bias") { graph, index in
        guard let add = graph.operation(at: index), add.type == "add" else { return false }
        for (convKey, constantKey) in [("x", "y"), ("y", "x")] {
            guard let (convIndex, conv) = privateConvolution(graph, add, convKey), conv.type != "channel_affine", PostOperations(conv, graph: graph).isEmpty,
                  let weight = weights(graph, conv), let addend = graph.constant(add, constantKey), addend.type.isFloat
            else { continue }
            let channels = weight.shape[0], rank = weight.shape.count
            // Right-aligned against [N, C, spatial…]: every axis but the channels' has size 1.
            guard addend.shape.count <= rank,
                  addend.count == 1 || (addend.count == channels && addend.shape.count >= rank - 1
                                        && addend.shape[addend.shape.count - (rank - 1)] == channels)
            else { continue }
            let values = addend.count == 1 ? Array(repeating: addend.floats[0], count: channels) : addend.floats
            var bias = graph.constant(conv, "bias")?.floats ?? Array(repeating: 0, count: channels)
            guard bias.count == channels, graph.constant(conv, "bias") != nil || !conv.arguments.keys.contains("bias") else { continue }
            for c in 0..<channels { bias[c] += values[c] }
            var rewritten = conv
            rewritten.arguments["bias"] = [.constant(Tensor(floats: bias, shape: [channels], type: weight.type))]
            rewritten.outputs = add.outputs
            graph.replace([convIndex, index], with: rewritten)
            return true
        }
        return false
    }

    /// `f(conv(x))` for an activation `f` oneDNN has: a post-operation.
    static let activation = FusionRule("conv + activation") { graph, index in
        guard let function = graph.operation(at: index), activations.contains(function.type), function.outputs.count == 1,
              let (convIndex, conv) = privateConvolution(graph, function, "x"), weights(graph, conv) != nil
        else { return false }
        var alpha: Float = 0, beta: Float = 0
        var kind = function.type
        switch function.type {
        case "clip":
            guard let low = graph.constant(function, "alpha")?.scalar, let high = graph.constant(function, "beta")?.scalar else { return false }
            alpha = Float(low)
            beta = Float(high)
        case "leaky_relu": alpha = graph.constant(function, "alpha")?.scalar.map(Float.init) ?? 0.01
        case "elu": alpha = graph.constant(function, "alpha")?.scalar.map(Float.init) ?? 1
        case "sigmoid_hard":
            alpha = graph.constant(function, "alpha")?.scalar.map(Float.init) ?? 0.2
            beta = graph.constant(function, "beta")?.scalar.map(Float.init) ?? 0.5
        case "gelu":
            let mode = graph.constant(function, "mode")?.strings.first ?? "EXACT"
            guard mode == "EXACT" || mode == "TANH_APPROXIMATION" else { return false }
            kind = "gelu_" + mode
        default: break
        }
        // Any other parameter (none of these take more) keeps the operation as it is.
        guard Set(function.arguments.keys).isSubset(of: ["x", "alpha", "beta", "mode"]) else { return false }
        var post = PostOperations(conv, graph: graph)
        post.kinds.append(kind)
        post.alphas.append(alpha)
        post.betas.append(beta)
        graph.replace([convIndex, index], with: fused(conv, post: post, output: function.outputs[0]))
        return true
    }

    /// `conv(x) + r` with `r` computed elsewhere: the residual sum as a
    /// post-operation (the kernel checks at plan time that `r` has the
    /// convolution's shape, and broadcasts it otherwise).
    static let residual = FusionRule("conv + residual add") { graph, index in
        guard let add = graph.operation(at: index), add.type == "add", add.outputs.count == 1 else { return false }
        for (convKey, otherKey) in [("x", "y"), ("y", "x")] {
            guard let (convIndex, conv) = privateConvolution(graph, add, convKey), conv.type != "channel_affine", weights(graph, conv) != nil,
                  let other = graph.computed(add, otherKey), other != conv.outputs[0].name,
                  add.outputs[0].type.element == conv.outputs[0].type.element
            else { continue }
            var post = PostOperations(conv, graph: graph)
            // The residual must be computed before the convolution's new place (the add's): it is.
            post.kinds.append("add")
            post.alphas.append(0)
            post.betas.append(0)
            post.residuals.append(.value(other))
            graph.replace([convIndex, index], with: fused(conv, post: post, output: add.outputs[0]))
            return true
        }
        return false
    }

    /// `mul(t, sigmoid_hard(t))` with `t = thresholded_relu(conv(x), -3)` and
    /// the hard sigmoid `x / 6 + 1 / 2` — how coremltools writes PyTorch's
    /// `hardswish` — as one post-operation.
    static let hardSwish = FusionRule("conv + hardswish") { graph, index in
        guard let mul = graph.operation(at: index), mul.type == "mul", mul.outputs.count == 1 else { return false }
        for (tKey, sKey) in [("x", "y"), ("y", "x")] {
            guard let t = graph.computed(mul, tKey), let s = graph.computed(mul, sKey), let sIndex = graph.producer(of: s),
                  let sigmoid = graph.operation(at: sIndex), sigmoid.type == "sigmoid_hard", graph.isPrivate(s),
                  graph.computed(sigmoid, "x") == t,
                  abs((graph.constant(sigmoid, "alpha")?.scalar ?? 0.2) - 1.0 / 6) < 1e-6, abs((graph.constant(sigmoid, "beta")?.scalar ?? 0.5) - 0.5) < 1e-7,
                  let tIndex = graph.producer(of: t), let threshold = graph.operation(at: tIndex), threshold.type == "thresholded_relu",
                  graph.constant(threshold, "alpha")?.scalar == -3,
                  graph.readers(of: t).sorted() == [sIndex, index].sorted(), !graph.isPrivate(t),
                  let (convIndex, conv) = privateConvolution(graph, threshold, "x"), weights(graph, conv) != nil
            else { continue }
            // t is read exactly by the hard sigmoid and the product, and is no output of the block.
            var onlyThese = FusionGraph.readersAre(graph, t, [sIndex, index])
            onlyThese = onlyThese && graph.readers(of: t).count == 2
            guard onlyThese else { continue }
            var post = PostOperations(conv, graph: graph)
            post.kinds.append("hardswish")
            post.alphas.append(0)
            post.betas.append(0)
            graph.replace([convIndex, tIndex, sIndex, index], with: fused(conv, post: post, output: mul.outputs[0]))
            return true
        }
        return false
    }

    /// A `batch_norm` with constant statistics not after a convolution: one
    /// `channel_affine` (a scale and shift per channel), so that the
    /// activation after it fuses too and it runs channels-last.
    static let affineBatchNorm = FusionRule("batch_norm as channel_affine") { graph, index in
        guard let norm = graph.operation(at: index), norm.type == "batch_norm", norm.outputs.count == 1,
              let mean = graph.constant(norm, "mean")?.floats, let variance = graph.constant(norm, "variance")?.floats,
              norm.outputs[0].type.shape?.count ?? 0 >= 3
        else { return false }
        let channels = mean.count
        let gamma = graph.constant(norm, "gamma")?.floats ?? Array(repeating: 1, count: channels)
        let beta = graph.constant(norm, "beta")?.floats ?? Array(repeating: 0, count: channels)
        let epsilon = graph.constant(norm, "epsilon")?.scalar.map(Float.init) ?? 1e-5
        guard variance.count == channels, gamma.count == channels, beta.count == channels, let x = norm.arguments["x"] else { return false }
        // As the batch_norm kernel computes them, in Float.
        let scale = (0..<channels).map { gamma[$0] / (variance[$0] + epsilon).squareRoot() }
        let shift = (0..<channels).map { beta[$0] - mean[$0] * scale[$0] }
        let affine = GraphOperation(type: "channel_affine", arguments: [
            "x": x, "scale": [.constant(Tensor(floats: scale, shape: [channels]))], "shift": [.constant(Tensor(floats: shift, shape: [channels]))],
        ], outputs: norm.outputs, blocks: [])
        graph.update(index, to: affine)
        return true
    }

    /// A convolution's weights and bias, when nothing else reads them, given
    /// inline: the kernel then reads them without adding them to the plan's
    /// constant memory (oneDNN keeps its packed copy; `ConvolutionOperations`).
    static let inlineWeights = FusionRule("inline convolution weights") { graph, index in
        guard let conv = graph.operation(at: index), conv.type == "conv" || conv.type == "fused_conv" else { return false }
        var rewritten = conv
        var changed = false
        for key in ["weight", "bias"] {
            guard case .value(let name)? = conv.arguments[key]?.first, let tensor = graph.constants[name], tensor.type.isFloat,
                  graph.isPrivate(name) else { continue }
            rewritten.arguments[key] = [.constant(tensor)]
            changed = true
        }
        guard changed else { return false }
        graph.update(index, to: rewritten)
        return true
    }
}
