/// Fusions around a matrix product with constant weights (`linear`, or a
/// `matmul` whose `y` is a constant matrix, as PyTorch's `Conv1D` in GPT-2
/// converts): a constant bias added after it, then an activation, then a
/// residual sum, as one `fused_linear` (see `LinearAlgebraOperations`),
/// which oneDNN computes as post-operations while the result is in cache.
enum ProductFusion {
    static let rules: [FusionRule] = [matmulAsLinear, bias, activation, activationThroughReshape, residual]

    /// Activations a `fused_linear` applies, by the name it stores (`gelu_` + mode for GELU).
    static let activations: Set<String> = ["relu", "gelu_EXACT", "gelu_TANH_APPROXIMATION"]

    /// The parts a `fused_linear` adds to a `linear`: an activation, then a residual.
    struct PostOperations {
        var activation: String?
        var residual: GraphArgument?

        init(_ op: GraphOperation, graph: FusionGraph) {
            activation = graph.constant(op, "activation")?.strings.first
            residual = op.arguments["residual"]?.first
        }

        func store(into arguments: inout [String: [GraphArgument]]) {
            if let activation { arguments["activation"] = [.constant(Tensor(type: .string, shape: [1], storage: .strings([activation])))] }
            if let residual { arguments["residual"] = [residual] }
        }
    }

    /// The `linear` or `fused_linear` computing argument `key` of `op`, when `op` is its only reader.
    private static func privateProduct(_ graph: FusionGraph, _ op: GraphOperation, _ key: String) -> (index: Int, op: GraphOperation)? {
        guard let (index, producer) = graph.privateProducer(of: op, key), producer.type == "linear" || producer.type == "fused_linear",
              let weight = graph.constant(producer, "weight"), weight.type.isFloat, weight.shape.count == 2
        else { return nil }
        return (index, producer)
    }

    private static func fused(_ product: GraphOperation, post: PostOperations, outputs: [(name: String, type: ValueType)]) -> GraphOperation {
        var arguments = product.arguments
        post.store(into: &arguments)
        return GraphOperation(type: "fused_linear", arguments: arguments, outputs: outputs, blocks: [])
            .rewritten(from: product)
    }

    /// `matmul(x, W)` with `W` a constant matrix and no transpose of `x`: a
    /// `fused_linear` reading `W` as it is (`weight_layout` "in_out" when it
    /// is `[in, out]`, not `linear`'s `[out, in]`), so no transposed copy is made.
    static let matmulAsLinear = FusionRule("matmul with constant weights as linear") { graph, index in
        guard let matmul = graph.operation(at: index), matmul.type == "matmul", matmul.outputs.count == 1,
              graph.computed(matmul, "x") != nil, let weight = graph.constant(matmul, "y"), weight.type.isFloat, weight.shape.count == 2,
              graph.constant(matmul, "transpose_x")?.scalar ?? 0 == 0,
              Set(matmul.arguments.keys).isSubset(of: ["x", "y", "transpose_x", "transpose_y"]),
              let x = matmul.arguments["x"], let y = matmul.arguments["y"]
        else { return false }
        let transposed = graph.constant(matmul, "transpose_y")?.scalar ?? 0 != 0
        var arguments: [String: [GraphArgument]] = ["x": x, "weight": y]
        if !transposed { arguments["weight_layout"] = [.constant(Tensor(type: .string, shape: [1], storage: .strings(["in_out"])))] }
        graph.update(index, to: GraphOperation(type: "fused_linear", arguments: arguments, outputs: matmul.outputs, blocks: []))
        return true
    }

    /// The number of outputs of a product's constant weights.
    private static func outputs(_ graph: FusionGraph, _ product: GraphOperation) -> Int? {
        guard let weight = graph.constant(product, "weight"), weight.shape.count == 2 else { return nil }
        return graph.constant(product, "weight_layout")?.strings.first == "in_out" ? weight.shape[1] : weight.shape[0]
    }

    /// `linear(x) + c` with `c` one constant per output (or one value): the bias.
    static let bias = FusionRule("linear + bias") { graph, index in
        guard let add = graph.operation(at: index), add.type == "add", add.outputs.count == 1 else { return false }
        for (productKey, constantKey) in [("x", "y"), ("y", "x")] {
            guard let (productIndex, product) = privateProduct(graph, add, productKey), product.arguments["activation"] == nil,
                  product.arguments["residual"] == nil, let weight = graph.constant(product, "weight"),
                  let outputs = outputs(graph, product), let addend = graph.constant(add, constantKey), addend.type.isFloat
            else { continue }
            // One value, or one per output along the last axis (every other axis of size 1).
            guard addend.count == 1 || (addend.count == outputs && addend.shape.last == outputs) else { continue }
            let values = addend.count == 1 ? Array(repeating: addend.floats[0], count: outputs) : addend.floats
            var bias = graph.constant(product, "bias")?.floats ?? Array(repeating: 0, count: outputs)
            guard bias.count == outputs, graph.constant(product, "bias") != nil || product.arguments["bias"] == nil else { continue }
            for o in 0..<outputs { bias[o] += values[o] }
            // The add may broadcast the product's result to more axes than it has: keep the product's shape then.
            guard addend.shape.count <= 1 || addend.shape.dropLast().allSatisfy({ $0 == 1 }) else { continue }
            var rewritten = product
            rewritten.arguments["bias"] = [.constant(Tensor(floats: bias, shape: [outputs], type: weight.type))]
            rewritten.outputs = add.outputs
            graph.replace([productIndex, index], with: rewritten)
            return true
        }
        return false
    }

    /// `f(linear(x))` for GELU (exact or tanh) or ReLU.
    static let activation = FusionRule("linear + activation") { graph, index in
        guard let function = graph.operation(at: index), function.outputs.count == 1,
              let (productIndex, product) = privateProduct(graph, function, "x")
        else { return false }
        var post = PostOperations(product, graph: graph)
        guard post.activation == nil, post.residual == nil,
              let activation = fusableActivation(function, graph) else { return false }
        post.activation = activation
        graph.replace([productIndex, index], with: fused(product, post: post, outputs: function.outputs))
        return true
    }

    /// The post-operation `function` becomes when it is ReLU or GELU (exact
    /// or tanh) of its `x` alone; `nil` for anything else.
    static func fusableActivation(_ function: GraphOperation, _ graph: FusionGraph) -> String? {
        switch function.type {
        case "relu" where Set(function.arguments.keys) == ["x"]: return "relu"
        case "gelu" where Set(function.arguments.keys).isSubset(of: ["x", "mode"]):
            let name = "gelu_" + (graph.constant(function, "mode")?.strings.first ?? "EXACT")
            return activations.contains(name) ? name : nil
        default: return nil
        }
    }

    /// `linear(x) + r` with `r` computed elsewhere, of the same type: the
    /// residual sum (the kernel checks at plan time that `r` has the product's
    /// shape, and adds it as a separate step otherwise).
    static let residual = FusionRule("linear + residual add") { graph, index in
        guard let add = graph.operation(at: index), add.type == "add", add.outputs.count == 1 else { return false }
        for (productKey, otherKey) in [("x", "y"), ("y", "x")] {
            guard let (productIndex, product) = privateProduct(graph, add, productKey),
                  let other = graph.computed(add, otherKey), other != product.outputs[0].name,
                  add.outputs[0].type.element == product.outputs[0].type.element
            else { continue }
            var post = PostOperations(product, graph: graph)
            guard post.residual == nil, let argument = add.arguments[otherKey]?.first else { continue }
            post.residual = argument
            graph.replace([productIndex, index], with: fused(product, post: post, outputs: add.outputs))
            return true
        }
        return false
    }
}
