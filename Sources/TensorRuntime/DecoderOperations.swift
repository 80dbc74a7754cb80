import ModelFeatures

/// The operations `Fusion/DecoderFusion.swift` makes of a decoder's
/// RMSNorm and rotary-embedding chains (internal: a program file cannot name
/// them). Each computes its chain's float operations in the chain's order:
/// RMSNorm squares in float, sums the squares of a row in double and takes
/// their mean as `reduce_mean` does, then `1 / √(mean + ε + e)`, `x · r`, `· weight`;
/// the rotary embedding `x · cos + rotated · sin`, `rotated` being
/// `concat(−x[…, h:], x[…, :h])`; the SwiGLU gate `silu(x) · y` as SiLU
/// (`VectorMath.silu`) then the product; a grouped-query decoder's key/value
/// heads repeated for the query heads (`repeat_heads`, a copy attention reads
/// where the heads lie).
enum DecoderOperations: OperationFamily {
    static let internalDefinitions: [String: OperationDefinition] = [
        "repeat_heads": OperationDefinition(["x", "repeats"]) { context throws(RuntimeError) in try repeatHeads(context) }.withFacts(repeatHeadsFacts),
        "silu_mul": OperationDefinition(["x", "y"]) { context throws(RuntimeError) in try siluProduct(context) }.withFacts(FactsRules.same()),
        "rms_norm": OperationDefinition(["x", "epsilon", "rsqrt_epsilon", "weight"]) { context throws(RuntimeError) in try rmsNorm(context) }.withFacts(FactsRules.same()),
        "rotary_embedding": OperationDefinition(["x", "cos", "sin", "half"], readAtRunTime: ["x", "cos", "sin"]) { context throws(RuntimeError) in
            try rotary(context)
        }.withFacts(FactsRules.same()),
    ]

    private static func rmsNorm(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.isFloat, x.rank >= 1, let width = x.shape.last, width > 0 else { throw context.invalid("x needs a float tensor with a last axis") }
        let epsilon = try context.float("epsilon", 0), rsqrtEpsilon = try context.float("rsqrt_epsilon", 1e-12)
        var weight: [Float]?
        if let given = try context.constant("weight") {
            // One value per column, or one for every column (as the product broadcast it).
            guard given.count == width || given.count == 1 else { throw context.invalid("weight has \(given.count) values for rows of \(width)") }
            weight = given.count == width ? given.floats : Array(repeating: given.floats[0], count: width)
        }
        let out = try context.output(x.shape)
        let rows = x.count / width, from = x.id, scale = weight
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
            for row in 0..<rows {
                let line = source + row * width, result = target + row * width
                var sum = 0.0
                for i in 0..<width {
                    let square = line[i] * line[i]
                    sum += Double(square)
                }
                let mean = Float(sum / Double(width))
                let r = 1 / ((mean + epsilon) + rsqrtEpsilon).squareRoot()
                if let scale {
                    for i in 0..<width { result[i] = (line[i] * r) * scale[i] }
                } else {
                    for i in 0..<width { result[i] = line[i] * r }
                }
            }
        }
    }

    /// `[1, kv, S, d]` → `[1, kv · g, S, d]`, head `h` of the result being head `h / g` of `x`.
    private static func repeatHeads(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.storedInput()
        let repeats = try context.int("repeats", 1)
        guard x.isFloat, x.rank == 4, x.shape[0] == 1, repeats >= 1 else {
            throw context.invalid("x \(x.shape) needs [1, heads, positions, width] floats and repeats ≥ 1 (\(repeats))")
        }
        let heads = x.shape[1], matrix = x.shape[2] * x.shape[3]
        let out = try context.output([1, heads * repeats, x.shape[2], x.shape[3]])
        let from = x.id, storage = x.storage, width = storage.byteWidth
        // Attention reads the heads where they lie (the copy is left out when nothing else reads it).
        context.runCopy(of: x, into: out, stack: context.stack(of: x)?.repeatedHeads(from: x.shape, repeats: repeats)) { buffers in
            let source = UnsafeRawPointer(buffers.raw(from)), target = buffers.raw(out)
            for head in 0..<(heads * repeats) {
                ElementConversion.widen(source + (head / repeats) * matrix * width, storage: storage, count: matrix, into: target + head * matrix * 4)
            }
        }
    }

    private static func siluProduct(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input(), y = try context.input("y")
        guard x.isFloat, y.isFloat, let shape = Shapes.broadcast(x.shape, y.shape) else {
            throw context.invalid("x \(x.shape) and y \(y.shape) need float tensors that broadcast")
        }
        let out = try context.output(shape)
        let count = shape.reduce(1, *), from = x.id, other = y.id
        guard x.shape == shape, y.shape == shape else {
            // Broadcast: SiLU of x into a scratch value, then the product element by element.
            let gate = context.scratch(.float32, shape: x.shape)
            let xStrides = Shapes.broadcastStrides(x.shape, to: shape), yStrides = Shapes.broadcastStrides(y.shape, to: shape)
            context.run(reads: [x, y], writes: [out, gate.id]) { buffers in
                let g = buffers.floats(gate.id), b = buffers.floats(other), target = buffers.floats(out)
                g.update(from: buffers.floats(from), count: x.count)
                VectorMath.silu(g, count: x.count)
                var o = 0
                Shapes.forEachIndex(shape) { index in
                    var i = 0, j = 0
                    for axis in index.indices { i += index[axis] * xStrides[axis]; j += index[axis] * yStrides[axis] }
                    target[o] = g[i] * b[j]
                    o += 1
                }
            }
            return
        }
        context.run(reads: [x, y], writes: [out]) { buffers in
            let target = buffers.floats(out), b = buffers.floats(other)
            target.update(from: buffers.floats(from), count: count)
            VectorMath.silu(target, count: count)
            for index in 0..<count { target[index] *= b[index] }
        }
    }

    private static func rotary(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input(), cos = try context.input("cos"), sin = try context.input("sin")
        let half = try context.int("half", 0)
        guard x.isFloat, cos.isFloat, sin.isFloat, x.rank >= 1, let width = x.shape.last, half > 0, half < width else {
            throw context.invalid("x needs a float last axis longer than half (\(half))")
        }
        guard let shape = Shapes.broadcast(Shapes.broadcast(x.shape, cos.shape) ?? [], sin.shape), shape == x.shape else {
            throw context.invalid("cos \(cos.shape) and sin \(sin.shape) do not broadcast to x \(x.shape)")
        }
        let out = try context.output(x.shape)
        // Where each row of x finds its row of cos and sin (computed once: a step has heads × tokens rows).
        let rowShape = Array(x.shape.dropLast())
        func rowOffsets(_ table: PlanValue) -> [Int] {
            let strides = Shapes.broadcastStrides(table.shape, to: x.shape).dropLast()
            var offsets: [Int] = []
            Shapes.forEachIndex(rowShape) { index in offsets.append(zip(index, strides).reduce(0) { $0 + $1.0 * $1.1 }) }
            return offsets.isEmpty ? [0] : offsets
        }
        let cosRows = rowOffsets(cos), sinRows = rowOffsets(sin)
        // A table with one column broadcasts it along the row (stride 0).
        let cosStep = cos.shape.last == width ? 1 : 0, sinStep = sin.shape.last == width ? 1 : 0
        let from = x.id, c = cos.id, s = sin.id, moved = width - half
        context.run(reads: [x, cos, sin], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out), cosines = buffers.floats(c), sines = buffers.floats(s)
            for row in cosRows.indices {
                let line = source + row * width, result = target + row * width
                let cosine = cosines + cosRows[row], sine = sines + sinRows[row]
                // rotated[i] = −x[half + i] for i < width − half, x[i − (width − half)] after.
                for i in 0..<moved { result[i] = line[i] * cosine[i * cosStep] + (line[half + i] * -1) * sine[i * sinStep] }
                for i in moved..<width { result[i] = line[i] * cosine[i * cosStep] + line[i - moved] * sine[i * sinStep] }
            }
        }
    }
}

// MARK: Facts

extension DecoderOperations {
    /// `repeat_heads`: `[1, heads × repeats, positions, width]`.
    static let repeatHeadsFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let shape = x.shape, shape.count == 4 else { return [.unknownRank(x.element)] }
        let repeats = context.int("repeats", 1)
        return [ValueType(x.element, shape: [shape[0], shape[1].map { $0 * repeats }, shape[2], shape[3]])]
    }
}
