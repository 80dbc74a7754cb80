extension ProductFusion {
    /// `f(reshape(linear(x)))` → `reshape(f(linear(x)))` with `f` fused into
    /// the product, for GELU (exact or tanh) or ReLU: GPT-2 as converted puts
    /// a `reshape` between its `Conv1D` product and GELU. An element-wise
    /// function commutes with any reshape, and a reshape is a view.
    static let activationThroughReshape = FusionRule("linear + reshape + activation") { graph, index in
        guard let function = graph.operation(at: index), function.outputs.count == 1,
              let reshapeName = graph.computed(function, "x"), graph.isPrivate(reshapeName),
              let reshapeIndex = graph.producer(of: reshapeName), let reshape = graph.operation(at: reshapeIndex),
              reshape.type == "reshape", reshape.outputs.count == 1, Set(reshape.arguments.keys).subtracting([ShapeOperations.zerosFromEnd]) == ["x", "shape"],
              let productName = graph.computed(reshape, "x"), graph.isPrivate(productName),
              let productIndex = graph.producer(of: productName), let product = graph.operation(at: productIndex),
              product.type == "linear" || product.type == "fused_linear", product.outputs.count == 1,
              let weight = graph.constant(product, "weight"), weight.type.isFloat, weight.shape.count == 2,
              function.outputs[0].type.element == product.outputs[0].type.element
        else { return false }
        var post = PostOperations(product, graph: graph)
        guard post.activation == nil, post.residual == nil,
              let activation = fusableActivation(function, graph) else { return false }
        post.activation = activation
        var arguments = product.arguments
        post.store(into: &arguments)
        graph.update(productIndex, to: GraphOperation(type: "fused_linear", arguments: arguments, outputs: product.outputs, blocks: [])
            .rewritten(from: product))
        var moved = reshape
        moved.outputs = function.outputs
        graph.replace([reshapeIndex, index], with: moved)
        return true
    }
}
