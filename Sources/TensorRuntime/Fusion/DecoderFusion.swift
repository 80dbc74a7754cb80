/// Fusions of the chains a Llama-style decoder converts to, each several
/// small operations per layer that a decoder's one-token step plans and runs
/// at every step:
///
/// - RMSNorm, `x · rsqrt(mean(x², last axis) + ε) · weight`, which `ct.convert`
///   writes as `pow` → `reduce_mean` → `add` → `rsqrt` → `mul` → `mul`
///   (six operations), becomes one `rms_norm`;
/// - the rotary embedding in the half-split convention,
///   `x · cos + concat(−x[…, h:], x[…, :h]) · sin`, written as two
///   `slice_by_index`, a `mul` by −1, a `concat`, two `mul` and an `add`
///   (seven), becomes one `rotary_embedding`;
/// - the SwiGLU gate, `mul(silu(x), y)`, becomes one `silu_mul`;
/// - a grouped-query decoder's key/value heads repeated for its query heads
///   (`repeat_interleave` over the heads of `[1, kv, S, d]`, which `ct.convert`
///   writes as transpose, tile, reshape, transpose, reshape, transpose) become
///   one `repeat_heads`, which attention reads where the heads lie.
///
/// Each fused operation computes the same float operations in the same order
/// as the chain (the engine computes an fp16 program in fp32 between its
/// roundings), so the results are the chain's, bit for bit.
enum DecoderFusion {
    static let rules: [FusionRule] = [rmsNorm, rotary, siluProduct, repeatHeads]

    /// The private producer of `op`'s `x` of `type` whose constant `key` is `value`.
    private static func step(_ graph: FusionGraph, _ op: GraphOperation, _ type: String, _ key: String, _ value: [Int])
        -> (index: Int, op: GraphOperation)? {
        guard let (index, producer) = graph.privateProducer(of: op, "x", type: type), Set(producer.arguments.keys) == ["x", key],
              graph.constant(producer, key)?.ints == value
        else { return nil }
        return (index, producer)
    }

    /// `transpose(reshape(transpose(reshape(tile(transpose(x, [1, 0, 2, 3]), [g, 1, 1, 1]), [g, kv, 1, -1, d]),
    /// [1, 0, 2, 3, 4]), [kv · g, 1, -1, d]), [1, 0, 2, 3])` of an `x` declared `[1, kv, ?, d]` → `repeat_heads(x, g)`
    /// (the reshapes' shapes have no 0, so how a file's 0 would be read does not matter):
    /// head `h` of the result is head `h / g` of `x` (followed through: the tile stacks `g` copies of the kv heads,
    /// the reshape and transpose put copy `a` of head `b` at `b · g + a`). Anchored at the last transpose.
    static let repeatHeads = FusionRule("grouped-query head repeat") { graph, index in
        guard let last = graph.operation(at: index), last.type == "transpose", last.outputs.count == 1,
              Set(last.arguments.keys) == ["x", "perm"], graph.constant(last, "perm")?.ints == [1, 0, 2, 3],
              let (flatIndex, flat) = graph.privateProducer(of: last, "x", type: "reshape"),
              Set(flat.arguments.keys).subtracting([ShapeOperations.zerosFromEnd]) == ["x", "shape"], let flatShape = graph.constant(flat, "shape")?.ints, flatShape.count == 4,
              flatShape[1] == 1, flatShape[2] == -1,
              let (swapIndex, _) = step(graph, flat, "transpose", "perm", [1, 0, 2, 3, 4]),
              let swap = graph.operation(at: swapIndex),
              let (splitIndex, split) = graph.privateProducer(of: swap, "x", type: "reshape"),
              Set(split.arguments.keys).subtracting([ShapeOperations.zerosFromEnd]) == ["x", "shape"], let splitShape = graph.constant(split, "shape")?.ints, splitShape.count == 5,
              splitShape[2] == 1, splitShape[3] == -1
        else { return false }
        let (g, kv, d) = (splitShape[0], splitShape[1], splitShape[4])
        guard g > 1, kv > 0, d > 0, flatShape[0] == kv * g, flatShape[3] == d,
              let (tileIndex, _) = step(graph, split, "tile", "reps", [g, 1, 1, 1]), let tile = graph.operation(at: tileIndex),
              let (firstIndex, _) = step(graph, tile, "transpose", "perm", [1, 0, 2, 3]), let first = graph.operation(at: firstIndex),
              case .value(let x)? = first.arguments["x"]?.first, graph.constant(first.arguments["x"]?.first) == nil,
              let producer = graph.producer(of: x).flatMap({ graph.operation(at: $0) }),
              let declared = producer.outputs.first(where: { $0.name == x })?.type.shape, declared.count == 4,
              declared[0] == 1, declared[1] == kv, declared[3] == d
        else { return false }
        let fused = GraphOperation(type: "repeat_heads", arguments: ["x": [.value(x)], "repeats": [.constant(Tensor(ints: [Int32(g)], shape: []))]],
                                   outputs: last.outputs, blocks: [])
        graph.replace([firstIndex, tileIndex, splitIndex, swapIndex, flatIndex, index], with: fused.rewritten(from: last))
        return true
    }

    /// `mul(silu(x), y)`, the silu's result read by the product only, in either order → `silu_mul(x, y)`.
    static let siluProduct = FusionRule("SwiGLU gate") { graph, index in
        guard let product = graph.operation(at: index), product.type == "mul", product.outputs.count == 1, operands(product) != nil else { return false }
        for (gateKey, otherKey) in [("x", "y"), ("y", "x")] {
            guard let (siluIndex, silu) = graph.privateProducer(of: product, gateKey, type: "silu"), Set(silu.arguments.keys) == ["x"],
                  let x = silu.arguments["x"]?.first, let y = product.arguments[otherKey]?.first
            else { continue }
            graph.replace([siluIndex, index], with: GraphOperation(type: "silu_mul", arguments: ["x": [x], "y": [y]], outputs: product.outputs, blocks: [])
                .rewritten(from: product))
            return true
        }
        return false
    }

    /// A binary operation's `x` and `y`, when it has exactly those arguments.
    private static func operands(_ op: GraphOperation) -> (x: GraphArgument, y: GraphArgument)? {
        guard Set(op.arguments.keys) == ["x", "y"], let x = op.arguments["x"]?.first, let y = op.arguments["y"]?.first else { return nil }
        return (x, y)
    }

    /// The operand of a binary operation's `operands` beside the one reading value `name`; `nil` when neither reads it.
    private static func operand(besides name: String, of operands: (x: GraphArgument, y: GraphArgument)) -> GraphArgument? {
        if case .value(let read) = operands.x, read == name { return operands.y }
        if case .value(let read) = operands.y, read == name { return operands.x }
        return nil
    }

    private static func isScalar(_ tensor: Tensor?, _ value: Double) -> Bool {
        guard let tensor, tensor.type.isFloat, tensor.count == 1 else { return false }
        return tensor.scalar == value
    }

    /// `mul(mul(x, rsqrt(add(reduce_mean(pow(x, 2), axes: [-1], keep_dims), ε), epsilon: e)), weight)`
    /// → `rms_norm(x, epsilon: ε, rsqrt_epsilon: e, weight)`; anchored at the `rsqrt`.
    static let rmsNorm = FusionRule("RMSNorm") { graph, index in
        guard let rsqrt = graph.operation(at: index), rsqrt.type == "rsqrt", rsqrt.outputs.count == 1,
              Set(rsqrt.arguments.keys).isSubset(of: ["x", "epsilon"]),
              let (addIndex, add) = graph.privateProducer(of: rsqrt, "x", type: "add"), let addOperands = operands(add)
        else { return false }
        // add(mean, ε) in either order.
        let epsilon: Tensor, meanKey: String
        if let constant = graph.constant(addOperands.y), constant.count == 1, constant.type.isFloat { (epsilon, meanKey) = (constant, "x") }
        else if let constant = graph.constant(addOperands.x), constant.count == 1, constant.type.isFloat { (epsilon, meanKey) = (constant, "y") }
        else { return false }
        guard let (meanIndex, mean) = graph.privateProducer(of: add, meanKey, type: "reduce_mean"),
              Set(mean.arguments.keys) == ["x", "axes", "keep_dims"], graph.constant(mean, "axes")?.ints == [-1],
              graph.constant(mean, "keep_dims")?.scalar == 1,
              let (powIndex, power) = graph.privateProducer(of: mean, "x", type: "pow"), let powerOperands = operands(power),
              isScalar(graph.constant(powerOperands.y), 2), case .value(let x) = powerOperands.x, graph.constant(powerOperands.x) == nil,
              let rName = rsqrt.outputs.first?.name, graph.isPrivate(rName), let scaleIndex = graph.readers(of: rName).first,
              let scale = graph.operation(at: scaleIndex), scale.type == "mul", let scaleOperands = operands(scale),
              scale.outputs.count == 1
        else { return false }
        // mul(x, r) in either order, reading the same x the square read.
        guard case .value(let scaled)? = operand(besides: rName, of: scaleOperands), scaled == x else { return false }
        var arguments: [String: [GraphArgument]] = ["x": [.value(x)], "epsilon": [.constant(epsilon)]]
        if let e = graph.constant(rsqrt, "epsilon") { arguments["rsqrt_epsilon"] = [.constant(e)] }
        var removed = [powIndex, meanIndex, addIndex, index, scaleIndex]
        var outputs = scale.outputs
        // Then mul(·, weight) by a constant vector along the last axis, in either order.
        let scaledName = scale.outputs[0].name
        if graph.isPrivate(scaledName), let weightIndex = graph.readers(of: scaledName).first, let weighting = graph.operation(at: weightIndex),
           weighting.type == "mul", weighting.outputs.count == 1, let weightOperands = operands(weighting),
           let weightArgument = operand(besides: scaledName, of: weightOperands) {
            if let weight = graph.constant(weightArgument), weight.type.isFloat, weight.shape.dropLast().allSatisfy({ $0 == 1 }) {
                arguments["weight"] = [.constant(weight)]
                removed.append(weightIndex)
                outputs = weighting.outputs
            }
        }
        graph.replace(removed, with: GraphOperation(type: "rms_norm", arguments: arguments, outputs: outputs, blocks: []).rewritten(from: scale))
        return true
    }

    /// The last-axis bounds a `slice_by_index` of `x` takes when it keeps every
    /// other axis whole with unit strides and squeezes nothing: (begin, end or `nil` for the axis' end).
    private static func lastAxisSlice(_ graph: FusionGraph, _ slice: GraphOperation) -> (begin: Int, end: Int?)? {
        guard Set(slice.arguments.keys).isSubset(of: ["x", "begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"]),
              let begin = graph.constant(slice, "begin")?.ints, let end = graph.constant(slice, "end")?.ints,
              begin.count == end.count, let rank = Optional(begin.count), rank >= 1
        else { return nil }
        let stride = graph.constant(slice, "stride")?.ints ?? Array(repeating: 1, count: rank)
        let beginMask = graph.constant(slice, "begin_mask")?.ints.map { $0 != 0 } ?? Array(repeating: false, count: rank)
        let endMask = graph.constant(slice, "end_mask")?.ints.map { $0 != 0 } ?? Array(repeating: false, count: rank)
        let squeeze = graph.constant(slice, "squeeze_mask")?.ints.map { $0 != 0 } ?? Array(repeating: false, count: rank)
        guard stride.count == rank, beginMask.count == rank, endMask.count == rank, squeeze.count == rank,
              stride.allSatisfy({ $0 == 1 }), !squeeze.contains(true) else { return nil }
        for axis in 0..<(rank - 1) where !((begin[axis] == 0 || beginMask[axis]) && endMask[axis]) { return nil }
        let first = beginMask[rank - 1] ? 0 : begin[rank - 1]
        guard first >= 0 else { return nil }
        return (first, endMask[rank - 1] ? nil : end[rank - 1])
    }

    /// `add(mul(x, cos), mul(concat(mul(x[…, h:], −1), x[…, :h], axis: −1), sin))`
    /// → `rotary_embedding(x, cos, sin, half: h)`; anchored at the `add`.
    static let rotary = FusionRule("rotary embedding") { graph, index in
        guard let add = graph.operation(at: index), add.type == "add", add.outputs.count == 1, operands(add) != nil else { return false }
        // One operand is mul(x, cos), the other mul(concat(…), sin); try both orders.
        for (plainKey, rotatedKey) in [("x", "y"), ("y", "x")] {
            guard let (plainIndex, plain) = graph.privateProducer(of: add, plainKey, type: "mul"),
                  let (rotatedIndex, rotated) = graph.privateProducer(of: add, rotatedKey, type: "mul"),
                  let plainOperands = operands(plain), let rotatedOperands = operands(rotated)
            else { continue }
            // mul(concat, sin): the concat is private, sin the other operand.
            for (concatKey, sinKey) in [("x", "y"), ("y", "x")] {
                guard let (concatIndex, concat) = graph.privateProducer(of: rotated, concatKey, type: "concat"),
                      let sin = rotated.arguments[sinKey]?.first, case .value = sin,
                      graph.constant(concat, "axis")?.ints == [-1], (graph.constant(concat, "interleave")?.scalar ?? 0) == 0,
                      Set(concat.arguments.keys).isSubset(of: ["values", "axis", "interleave"]),
                      let parts = concat.arguments["values"], parts.count == 2,
                      case .value(let negatedName) = parts[0], case .value(let lowName) = parts[1],
                      graph.isPrivate(negatedName), graph.isPrivate(lowName),
                      let negateIndex = graph.producer(of: negatedName), let negate = graph.operation(at: negateIndex),
                      negate.type == "mul", negate.outputs.count == 1, let negateOperands = operands(negate),
                      let lowIndex = graph.producer(of: lowName), let low = graph.operation(at: lowIndex), low.type == "slice_by_index",
                      let lowBounds = lastAxisSlice(graph, low), lowBounds.begin == 0, let half = lowBounds.end, half > 0,
                      case .value(let x)? = low.arguments["x"]?.first
                else { continue }
                // mul(x[…, h:], −1) in either order.
                let highArgument: GraphArgument
                if isScalar(graph.constant(negateOperands.y), -1) { highArgument = negateOperands.x }
                else if isScalar(graph.constant(negateOperands.x), -1) { highArgument = negateOperands.y }
                else { continue }
                guard case .value(let highName) = highArgument, graph.isPrivate(highName),
                      let highIndex = graph.producer(of: highName), let high = graph.operation(at: highIndex), high.type == "slice_by_index",
                      case .value(let highSource)? = high.arguments["x"]?.first, highSource == x,
                      let highBounds = lastAxisSlice(graph, high), highBounds.begin == half, highBounds.end == nil
                else { continue }
                // mul(x, cos) in either order, with the same x.
                guard let cos = operand(besides: x, of: plainOperands) else { continue }
                let arguments: [String: [GraphArgument]] = [
                    "x": [.value(x)], "cos": [cos], "sin": [sin], "half": [.constant(Tensor(ints: [Int32(half)], shape: []))],
                ]
                graph.replace([plainIndex, highIndex, negateIndex, lowIndex, concatIndex, rotatedIndex, index],
                              with: GraphOperation(type: "rotary_embedding", arguments: arguments, outputs: add.outputs, blocks: []).rewritten(from: add))
                return true
            }
        }
        return false
    }
}
