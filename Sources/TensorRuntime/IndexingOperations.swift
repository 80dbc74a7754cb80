import ModelFeatures

/// Gathers and scatters with indices computed at run time (negative
/// indices count from the end; an index outside the axis is an error at
/// prediction naming the operation), and `one_hot`.
enum IndexingOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "gather": OperationDefinition(["x", "indices", "axis", "batch_dims", "validate_indices"]) { context throws(RuntimeError) in
            try gather(context)
        }.withFacts(gatherFacts),
        "gather_along_axis": OperationDefinition(["x", "indices", "axis", "validate_indices"]) { context throws(RuntimeError) in
            let x = try context.input(), indices = try context.input("indices")
            let axis = try context.axis(try context.int("axis", 0), rank: x.rank)
            guard indices.rank == x.rank, x.shape.indices.allSatisfy({ $0 == axis || x.shape[$0] == indices.shape[$0] }) else {
                throw context.invalid("indices \(indices.shape) do not fit x \(x.shape) along axis \(axis)")
            }
            let out = try context.output(indices.shape)
            let n = x.shape[axis], k = indices.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *)
            let outer = x.shape[..<axis].reduce(1, *)
            let from = x.id, at = indices.id, name = context.op.name
            context.run(reads: [x, indices], writes: [out]) { buffers throws(RuntimeError) in
                let source = buffers.ints(from), index = buffers.ints(at), target = buffers.ints(out)
                for o in 0..<outer {
                    for j in 0..<k {
                        for i in 0..<inner {
                            let position = (o * k + j) * inner + i
                            let resolved = try checked(index[position], size: n, operation: name)
                            target[position] = source[(o * n + resolved) * inner + i]
                        }
                    }
                }
            }
        }.withFacts(gatherAlongAxisFacts),
        "gather_nd": OperationDefinition(["x", "indices", "batch_dims", "validate_indices"]) { context throws(RuntimeError) in
            let x = try context.input(), indices = try context.input("indices")
            let batchDims = try context.int("batch_dims", 0)
            guard let depth = indices.shape.last, indices.rank >= 1, batchDims + depth <= x.rank else {
                throw context.invalid("indices \(indices.shape) do not fit x \(x.shape)")
            }
            let shape = Array(indices.shape.dropLast()) + Array(x.shape[(batchDims + depth)...])
            let out = try context.output(shape)
            let inner = x.shape[(batchDims + depth)...].reduce(1, *)
            let lookups = indices.count / max(depth, 1)
            let batch = x.shape[..<batchDims].reduce(1, *), perBatch = lookups / max(batch, 1)
            let sizes = Array(x.shape[batchDims..<(batchDims + depth)]), strides = Array(Shapes.strides(Array(x.shape[batchDims...])).prefix(depth))
            let batchStride = x.shape[batchDims...].reduce(1, *)
            let from = x.id, at = indices.id, name = context.op.name
            context.run(reads: [x, indices], writes: [out]) { buffers throws(RuntimeError) in
                let source = buffers.ints(from), index = buffers.ints(at), target = buffers.ints(out)
                for lookup in 0..<lookups {
                    var offset = (lookup / max(perBatch, 1)) * batchStride
                    for d in 0..<depth { offset += try checked(index[lookup * depth + d], size: sizes[d], operation: name) * strides[d] }
                    (target + lookup * inner).update(from: source + offset, count: inner)
                }
            }
        }.withFacts(gatherNDFacts),
        "scatter": OperationDefinition(["data", "indices", "updates", "axis", "mode", "validate_indices"]) { context throws(RuntimeError) in
            try scatter(context, alongAxis: false)
        }.withFacts(FactsRules.same("data")),
        "scatter_along_axis": OperationDefinition(["data", "indices", "updates", "axis", "mode", "validate_indices"]) { context throws(RuntimeError) in
            try scatter(context, alongAxis: true)
        }.withFacts(FactsRules.same("data")),
        "scatter_nd": OperationDefinition(["data", "indices", "updates", "mode", "validate_indices"]) { context throws(RuntimeError) in
            try scatterND(context)
        }.withFacts(FactsRules.same("data")),
        "one_hot": OperationDefinition(["indices", "one_hot_vector_size", "axis", "on_value", "off_value"]) { context throws(RuntimeError) in
            let indices = try context.input("indices")
            let size = try context.int("one_hot_vector_size", 0)
            guard size >= 0 else { throw context.invalid("one_hot_vector_size \(size) is negative") }
            let axis = try context.axis(try context.int("axis", -1), rank: indices.rank + 1)
            let on = try context.float("on_value", 1), off = try context.float("off_value", 0)
            var shape = indices.shape
            shape.insert(size, at: axis)
            let out = try context.output(shape)
            let isFloat = context.outputType().isFloat
            let outer = indices.shape[..<axis].reduce(1, *), inner = indices.shape[axis...].reduce(1, *)
            let at = indices.id
            context.run(reads: [indices], writes: [out]) { buffers in
                let index = buffers.ints(at)
                for o in 0..<outer {
                    for j in 0..<size {
                        for i in 0..<inner {
                            var k = Int(index[o * inner + i])
                            if k < 0 { k += size }
                            let value = k == j ? on : off
                            let position = (o * size + j) * inner + i
                            if isFloat { buffers.floats(out)[position] = value } else { buffers.ints(out)[position] = truncatedInt32(value) }
                        }
                    }
                }
            }
        }.withFacts(oneHotFacts),
    ]

    /// An index in `0..<size` from a possibly negative one.
    @inline(__always)
    static func checked(_ index: Int32, size: Int, operation: String) throws(RuntimeError) -> Int {
        let resolved = index < 0 ? Int(index) + size : Int(index)
        guard resolved >= 0, resolved < size else {
            throw .invalidValue(feature: operation, detail: "index \(index) is outside an axis of size \(size)")
        }
        return resolved
    }

    private static func gather(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input(), indices = try context.input("indices")
        let axis = try context.axis(try context.int("axis", 0), rank: x.rank)
        let batchDims = try context.int("batch_dims", 0)
        guard batchDims >= 0, batchDims <= axis, batchDims <= indices.rank, Array(x.shape.prefix(batchDims)) == Array(indices.shape.prefix(batchDims)) else {
            throw context.invalid("batch_dims \(batchDims) does not fit x \(x.shape) and indices \(indices.shape)")
        }
        guard !indices.isFloat else { throw context.invalid("indices must be integers") }
        let shape = Array(x.shape[..<axis]) + Array(indices.shape[batchDims...]) + Array(x.shape[(axis + 1)...])
        let out = try context.output(shape)
        let batch = x.shape[..<batchDims].reduce(1, *), outer = x.shape[batchDims..<axis].reduce(1, *)
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *)
        let perBatch = indices.shape[batchDims...].reduce(1, *)
        let from = x.id, at = indices.id, name = context.op.name
        if axis == 0, x.isFloat, let packed = LinearAlgebraOperations.packedWeights(x) {
            // Rows of weights kept as stored (an embedding table): only the rows asked for are widened.
            context.run(reads: [indices], writes: [out]) { buffers throws(RuntimeError) in
                let index = buffers.ints(at), target = buffers.floats(out)
                for j in 0..<perBatch {
                    packed.decodeRows(try checked(index[j], size: n, operation: name), count: 1, into: target + j * inner)
                }
            }
            return
        }
        context.run(reads: [x, indices], writes: [out]) { buffers throws(RuntimeError) in
            let source = buffers.ints(from), index = buffers.ints(at)
            var target = buffers.ints(out)
            for b in 0..<batch {
                for o in 0..<outer {
                    let base = source + ((b * outer + o) * n) * inner
                    for j in 0..<perBatch {
                        let resolved = try checked(index[b * perBatch + j], size: n, operation: name)
                        if inner == 1 { target[0] = base[resolved] } else { target.update(from: base + resolved * inner, count: inner) }
                        target += inner
                    }
                }
            }
        }
    }

    /// How a scatter treats indices outside `0..<size`. iOS 15/16 (no
    /// `validate_indices`): negative ones count from the end, others are an
    /// error. iOS 17 counts negative indices as out of bounds: with
    /// `validate_indices` an error at prediction; without, the result is
    /// undefined, and modelc skips the update (coremltools' tests check that
    /// a negative index does not count from the end there).
    enum IndexRule: Sendable {
        case wrapping, strict, lenient

        init(_ context: OperationContext) throws(RuntimeError) {
            guard context.has("validate_indices") else { self = .wrapping; return }
            self = try context.bool("validate_indices", false) ? .strict : .lenient
        }

        /// The index in `0..<size`, or `nil` for an update to skip.
        @inline(__always)
        func resolve(_ index: Int32, size: Int, operation: String) throws(RuntimeError) -> Int? {
            switch self {
            case .wrapping: return try checked(index, size: size, operation: operation)
            case .strict:
                guard index >= 0, Int(index) < size else {
                    throw .invalidValue(feature: operation, detail: "index \(index) is outside an axis of size \(size) (validate_indices)")
                }
                return Int(index)
            case .lenient:
                return index >= 0 && Int(index) < size ? Int(index) : nil
            }
        }
    }

    typealias Combine = @Sendable (Float, Float) -> Float

    private static func mode(_ context: OperationContext) throws(RuntimeError) -> Combine {
        let mode = try context.string("mode", "add")
        switch mode {
        case "update": return { _, new in new }
        case "add": return { $0 + $1 }
        case "sub": return { $0 - $1 }
        case "mul": return { $0 * $1 }
        case "div": return { $0 / $1 }
        case "max": return { max($0, $1) }
        case "min": return { min($0, $1) }
        default: throw context.unsupported("scatter mode \(mode) is not one MIL defines")
        }
    }

    private static func scatter(_ context: OperationContext, alongAxis: Bool) throws(RuntimeError) {
        let data = try context.input("data"), indices = try context.input("indices"), updates = try context.input("updates")
        let axis = try context.axis(try context.int("axis", 0), rank: data.rank)
        let combine = try mode(context), rule = try IndexRule(context)
        let out = try context.output(data.shape)
        let n = data.shape[axis], inner = data.shape[(axis + 1)...].reduce(1, *), outer = data.shape[..<axis].reduce(1, *)
        let isFloat = data.isFloat, count = data.count
        let from = data.id, at = indices.id, values = updates.id, name = context.op.name
        let k: Int
        let expected: [Int]
        if alongAxis {
            expected = indices.shape
            k = indices.rank == data.rank ? indices.shape[axis] : 0
            guard indices.rank == data.rank, updates.shape == indices.shape,
                  data.shape.indices.allSatisfy({ $0 == axis || data.shape[$0] == indices.shape[$0] }) else {
                throw context.invalid("indices \(indices.shape) and updates \(updates.shape) do not fit data \(data.shape)")
            }
        } else {
            guard indices.rank == 1 else { throw context.unsupported("scatter indices of rank \(indices.rank) are not supported (rank 1)") }
            k = indices.count
            expected = Array(data.shape[..<axis]) + [k] + Array(data.shape[(axis + 1)...])
            guard updates.shape == expected else { throw context.invalid("updates \(updates.shape), expected \(expected)") }
        }
        context.run(reads: [data, indices, updates], writes: [out]) { buffers throws(RuntimeError) in
            buffers.ints(out).update(from: buffers.ints(from), count: count)
            let index = buffers.ints(at)
            for o in 0..<outer {
                for j in 0..<k {
                    for i in 0..<inner {
                        let u = (o * k + j) * inner + i
                        guard let resolved = try rule.resolve(alongAxis ? index[u] : index[j], size: n, operation: name) else { continue }
                        let d = (o * n + resolved) * inner + i
                        if isFloat {
                            buffers.floats(out)[d] = combine(buffers.floats(out)[d], buffers.floats(values)[u])
                        } else {
                            buffers.ints(out)[d] = truncatedInt32(combine(Float(buffers.ints(out)[d]), Float(buffers.ints(values)[u])))
                        }
                    }
                }
            }
        }
    }

    private static func scatterND(_ context: OperationContext) throws(RuntimeError) {
        let data = try context.input("data"), indices = try context.input("indices"), updates = try context.input("updates")
        guard let depth = indices.shape.last, depth <= data.rank else { throw context.invalid("indices \(indices.shape) do not fit data \(data.shape)") }
        let expected = Array(indices.shape.dropLast()) + Array(data.shape[depth...])
        guard updates.shape == expected else { throw context.invalid("updates \(updates.shape), expected \(expected)") }
        let combine = try mode(context), rule = try IndexRule(context)
        let out = try context.output(data.shape)
        let inner = data.shape[depth...].reduce(1, *), lookups = indices.count / max(depth, 1)
        let sizes = Array(data.shape.prefix(depth)), strides = Array(Shapes.strides(data.shape).prefix(depth))
        let isFloat = data.isFloat, count = data.count
        let from = data.id, at = indices.id, values = updates.id, name = context.op.name
        context.run(reads: [data, indices, updates], writes: [out]) { buffers throws(RuntimeError) in
            buffers.ints(out).update(from: buffers.ints(from), count: count)
            let index = buffers.ints(at)
            lookups: for lookup in 0..<lookups {
                var offset = 0
                for d in 0..<depth {
                    guard let resolved = try rule.resolve(index[lookup * depth + d], size: sizes[d], operation: name) else { continue lookups }
                    offset += resolved * strides[d]
                }
                for i in 0..<inner {
                    let u = lookup * inner + i
                    if isFloat {
                        buffers.floats(out)[offset + i] = combine(buffers.floats(out)[offset + i], buffers.floats(values)[u])
                    } else {
                        buffers.ints(out)[offset + i] = truncatedInt32(combine(Float(buffers.ints(out)[offset + i]), Float(buffers.ints(values)[u])))
                    }
                }
            }
        }
    }
}

// MARK: Facts

extension IndexingOperations {
    /// `gather`: `x`'s dimensions before `axis`, the indices' after the batch ones, `x`'s after `axis`.
    static let gatherFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input(), indices = try context.input("indices")
        guard let dims = x.shape, let indexDims = indices.shape else { return [.unknownRank(x.element)] }
        let axis = try context.axis(context.int("axis", 0), rank: dims.count)
        let batch = context.int("batch_dims", 0)
        guard batch >= 0, batch <= min(axis, indexDims.count) else { throw context.invalid("batch_dims \(batch) for axis \(axis)") }
        return [ValueType(x.element, shape: Array(dims[..<axis]) + Array(indexDims[batch...]) + Array(dims[(axis + 1)...]))]
    }

    /// `gather_nd`: the indices' leading dimensions, then `x`'s past the
    /// batch ones and the ones each index row names (the rank needs the rows' length).
    static let gatherNDFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input(), indices = try context.input("indices")
        guard let dims = x.shape, let indexDims = indices.shape, let depth = indexDims.last ?? nil else { return [.unknownRank(x.element)] }
        let batch = context.int("batch_dims", 0)
        guard batch + depth <= dims.count else { throw context.invalid("index rows of \(depth) into a rank-\(dims.count) tensor") }
        return [ValueType(x.element, shape: Array(indexDims.dropLast()) + Array(dims[(batch + depth)...]))]
    }

    /// `one_hot`: the indices' dimensions with the vector's inserted at `axis`; the on value's type.
    static let oneHotFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let indices = try context.input("indices")
        let element = try context.optional("on_value")?.element ?? .float32
        guard var dims = indices.shape else { return [.unknownRank(element)] }
        let axis = try context.axis(context.int("axis", -1), rank: dims.count + 1)
        dims.insert(context.constant("one_hot_vector_size")?.scalar.map { Int($0) }, at: axis)
        return [ValueType(element, shape: dims)]
    }

    /// `gather_along_axis`: the indices' shape, `x`'s type.
    static let gatherAlongAxisFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        [try context.input("indices").with(try context.input().element)]
    }
}
