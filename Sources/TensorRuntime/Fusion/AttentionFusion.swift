/// Attention as `ct.convert` writes it for BERT, GPT-2 and ViT — a batched
/// `matmul` of two computed operands (queries by keys), optionally a scale
/// (`mul` or `real_div` by a constant scalar) and a mask `add`, a `softmax`
/// over the last axis, and a `matmul` by the values — as one
/// `fused_attention` (see `AttentionOperations`, whose kernel also runs
/// iOS18's `scaled_dot_product_attention`): the scores stay in a cache-sized
/// block instead of going through the arena four times.
///
/// Every intermediate value must be read by the next step only (not an
/// output, not read elsewhere); anything else is left as it is.
enum AttentionFusion {
    static let rules: [FusionRule] = [attention]

    /// Whether `op` is a `matmul` of two computed float operands, `x` not transposed.
    private static func isScoresProduct(_ graph: FusionGraph, _ op: GraphOperation) -> Bool {
        op.type == "matmul" && Set(op.arguments.keys).isSubset(of: ["x", "y", "transpose_x", "transpose_y"])
            && graph.computed(op, "x") != nil && graph.computed(op, "y") != nil
            && graph.constant(op, "transpose_x")?.scalar ?? 0 == 0
            && op.outputs[0].type.element.isFloat
    }

    /// The constant scalar a `mul` or `real_div` applies to the value `key` names (the other argument).
    private static func scaleFactor(_ graph: FusionGraph, _ op: GraphOperation, of key: String) -> Float? {
        let other = key == "x" ? "y" : "x"
        guard Set(op.arguments.keys) == ["x", "y"], let constant = graph.constant(op, other), constant.type.isFloat,
              constant.count == 1, let value = constant.scalar
        else { return nil }
        switch op.type {
        case "mul": return Float(value)
        case "real_div" where key == "x" && value != 0: return Float(1 / value)
        default: return nil
        }
    }

    /// `matmul(softmax(scale · matmul(q, k) + mask), v)` → `fused_attention`.
    static let attention = FusionRule("attention (matmul, scale, mask, softmax, matmul)") { graph, index in
        guard let output = graph.operation(at: index), output.type == "matmul", output.outputs.count == 1,
              Set(output.arguments.keys).isSubset(of: ["x", "y", "transpose_x", "transpose_y"]),
              graph.constant(output, "transpose_x")?.scalar ?? 0 == 0, graph.constant(output, "transpose_y")?.scalar ?? 0 == 0,
              let value = output.arguments["y"]?.first, graph.computed(output, "y") != nil,
              let (softmaxIndex, softmax) = graph.privateProducer(of: output, "x"), softmax.type == "softmax",
              Set(softmax.arguments.keys).isSubset(of: ["x", "axis"]),
              let rank = softmax.outputs[0].type.shape?.count, rank >= 2
        else { return false }
        let axis = graph.constant(softmax, "axis")?.scalar.map { Int($0) } ?? -1
        guard axis == -1 || axis == rank - 1 else { return false }
        var removed = [softmaxIndex, index]
        var mask: GraphArgument?
        var scale: Float = 1
        guard var (current, currentOp) = graph.privateProducer(of: softmax, "x") else { return false }
        if currentOp.type == "add", Set(currentOp.arguments.keys) == ["x", "y"], currentOp.outputs[0].type.element.isFloat {
            // The scores are the side a product (maybe scaled) computes; the other side is the mask.
            var found = false
            for (scoresKey, maskKey) in [("x", "y"), ("y", "x")] {
                guard let (next, nextOp) = graph.privateProducer(of: currentOp, scoresKey),
                      isScoresProduct(graph, nextOp) || (nextOp.type == "mul" || nextOp.type == "real_div"),
                      let maskArgument = currentOp.arguments[maskKey]?.first
                else { continue }
                removed.append(current)
                mask = maskArgument
                (current, currentOp) = (next, nextOp)
                found = true
                break
            }
            guard found else { return false }
        }
        if currentOp.type == "mul" || currentOp.type == "real_div" {
            var found = false
            for key in currentOp.type == "mul" ? ["x", "y"] : ["x"] {
                guard let factor = scaleFactor(graph, currentOp, of: key), let (next, nextOp) = graph.privateProducer(of: currentOp, key),
                      isScoresProduct(graph, nextOp)
                else { continue }
                removed.append(current)
                scale = factor
                (current, currentOp) = (next, nextOp)
                found = true
                break
            }
            guard found else { return false }
        }
        guard isScoresProduct(graph, currentOp), let query = currentOp.arguments["x"]?.first, let key = currentOp.arguments["y"]?.first
        else { return false }
        removed.append(current)
        let transposeKey = graph.constant(currentOp, "transpose_y")?.scalar ?? 0 != 0
        var arguments: [String: [GraphArgument]] = [
            "query": [query], "key": [key], "value": [value],
            "transpose_key": [.constant(Tensor(ints: [transposeKey ? 1 : 0], shape: [], type: .bool))],
        ]
        if scale != 1 { arguments["scale"] = [.constant(Tensor(floats: [scale], shape: []))] }
        if let mask { arguments["mask"] = [mask] }
        graph.replace(removed, with: GraphOperation(type: "fused_attention", arguments: arguments, outputs: output.outputs, blocks: [])
            .rewritten(from: softmax))
        return true
    }
}
