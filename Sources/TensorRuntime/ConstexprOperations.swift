import Foundation
import ModelFeatures
import ModelSpec

/// The weight-compression operations (`constexpr_*`): evaluated when the
/// program is read (their arguments are constants), once per model.
enum ConstexprOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "constexpr_cast": OperationDefinition(["source_val", "output_dtype"]) { context throws(RuntimeError) in
            context.output(constant: try required(context, "source_val"))
        }.withFacts(castFacts),
        "constexpr_affine_dequantize": OperationDefinition(["quantized_data", "zero_point", "scale", "axis"]) { context throws(RuntimeError) in
            try affine(context)
        }.withFacts(FactsRules.same("quantized_data", typeFrom: "scale")),
        "constexpr_lut_to_dense": OperationDefinition(["indices", "lut", "shape", "vector_axis"]) { context throws(RuntimeError) in
            try lookupTable(context)
        }.withFacts(lutFacts),
        "constexpr_sparse_to_dense": OperationDefinition(["nonzero_data", "mask", "shape"]) { context throws(RuntimeError) in
            try sparse(context)
        }.withFacts(sparseFacts),
        "constexpr_blockwise_shift_scale": OperationDefinition(["data", "scale", "offset"]) { context throws(RuntimeError) in
            try blockwise(context)
        }.withFacts(FactsRules.same("data", typeFrom: "scale")),
        "constexpr_lut_to_sparse": OperationDefinition(["indices_mask", "indices_nonzero_data", "lut", "vector_axis"]) { context throws(RuntimeError) in
            try sparseOutputs(context, lookup: true)
        }.withFacts(sparsePairFacts(mask: "indices_mask", typeFrom: "lut")),
        "constexpr_sparse_blockwise_shift_scale": OperationDefinition(["data_mask", "nonzero_data", "scale", "offset"]) { context throws(RuntimeError) in
            try sparseOutputs(context, lookup: false)
        }.withFacts(sparsePairFacts(mask: "data_mask", typeFrom: "scale")),
    ]

    private static func required(_ context: OperationContext, _ key: String) throws(RuntimeError) -> Tensor {
        guard let value = try context.constant(key) else { throw context.invalid("no \(key)") }
        return value
    }

    /// (q − zero point) × scale, the point and scale per slice along `axis` or one for all.
    private static func affine(_ context: OperationContext) throws(RuntimeError) {
        let data = try required(context, "quantized_data"), scale = try required(context, "scale")
        let zero = try context.constant("zero_point")
        let rank = data.shape.count
        let axis = try context.axis(try context.int("axis", 0), rank: rank)
        let along = rank > 0 ? data.shape[axis] : 1
        let inner = rank > 0 ? data.shape[(axis + 1)...].reduce(1, *) : 1
        let scales = scale.floats, points = zero?.floats ?? [0]
        for (name, values) in [("scale", scales), ("zero_point", points)] where values.count != 1 && values.count != along {
            throw context.invalid("\(name) has \(values.count) values for \(along) slices")
        }
        if let packed = packedCodes(data) {
            // A matrix's codes stay packed: one scale and zero point per row (axis 0), column (axis 1) or for all.
            // (Rank-1 data is one row: its axis 0 runs along the columns.)
            let (rows, columns) = (packed.rows, packed.columns)
            let single = scales.count == 1 && points.count == 1, perRow = rank == 2 && axis == 0
            let blocks = single ? 1 : (perRow ? rows : columns)
            func spread(_ values: [Float]) -> [Float] { values.count == blocks ? values : Array(repeating: values[0], count: blocks) }
            let (blockRows, blockColumns) = single ? (rows, columns) : (perRow ? (1, columns) : (rows, 1))
            if let decoded = packed.decoded(by: .shiftScale(scale: .floats(spread(scales)), offset: spread(points)), blockRows: blockRows,
                                            blockColumns: blockColumns, roundsToHalf: false) {
                context.output(constant: Tensor(type: .float32, shape: data.shape, storage: .packed(decoded)))
                return
            }
        }
        let q = data.floats
        let floats = q.indices.map { index in
            let slice = (index / inner) % along
            return (q[index] - points[points.count == 1 ? 0 : slice]) * scales[scales.count == 1 ? 0 : slice]
        }
        context.output(constant: Tensor(floats: floats, shape: data.shape))
    }

    private static func lookupTable(_ context: OperationContext) throws(RuntimeError) {
        let indices = try required(context, "indices"), table = try required(context, "lut")
        if let shape = try context.constant("shape") {
            // iOS 16: the codes packed into bytes, lowest bits first; one table.
            let count = shape.ints.reduce(1, *)
            let bits = table.count > 1 ? Int(log2(Double(table.count)).rounded()) : 0
            guard bits >= 1, bits <= 8, 1 << bits == table.count else { throw context.invalid("a table of \(table.count) values is not 2^bits") }
            if let packed = packedCodes(indices)?.reinterpreted(bits: bits, shape: shape.ints),
               let decoded = packed.decoded(by: .lookup(table: table.floats, entries: table.count), blockRows: packed.rows,
                                            blockColumns: packed.columns, roundsToHalf: false) {
                context.output(constant: Tensor(type: .float32, shape: shape.ints, storage: .packed(decoded)))
                return
            }
            let bytes = indices.ints.map(UInt8.init(truncatingIfNeeded:))
            guard bytes.count * 8 >= count * bits else { throw context.invalid("\(bytes.count) bytes of indices for \(count) values") }
            let values = table.floats
            var floats = [Float](repeating: 0, count: count)
            for index in 0..<count { floats[index] = values[Int(MILPackedBits.code(bytes, bits: bits, at: index))] }
            context.output(constant: Tensor(floats: floats, shape: shape.ints))
            return
        }
        context.output(constant: try lookup(context, indices: indices, table: table))
    }

    /// iOS 18: each index looked up in its block's table (lut has the indices'
    /// rank + 2 dimensions: blocks per axis, entries, vector size). With
    /// vectors of `n` values, each index stands for `n` consecutive elements
    /// along `vector_axis`.
    private static func lookup(_ context: OperationContext, indices: Tensor, table: Tensor) throws(RuntimeError) -> Tensor {
        let rank = indices.shape.count
        guard table.shape.count == rank + 2 else { throw context.invalid("a table of rank \(table.shape.count) for indices of rank \(rank)") }
        let entries = table.shape[rank], vector = table.shape[rank + 1]
        var axis = 0
        if vector > 1 {
            guard context.has("vector_axis") else { throw context.invalid("tables of vectors need a vector_axis") }
            axis = try context.axis(try context.int("vector_axis", 0), rank: rank, key: "vector_axis")
        }
        if vector == 1, let packed = packedCodes(indices), let blockRows = blockSize(packed, Array(table.shape.prefix(rank))),
           let decoded = packed.decoded(by: .lookup(table: table.floats, entries: entries), blockRows: blockRows.rows, blockColumns: blockRows.columns,
                                        roundsToHalf: false) {
            return Tensor(type: .float32, shape: indices.shape, storage: .packed(decoded))
        }
        let blocks = blockIndex(of: indices.shape, per: Array(table.shape.prefix(rank)))
        let codes = indices.ints, values = table.floats
        var shape = indices.shape
        if vector > 1 { shape[axis] *= vector }
        let inner = shape[(axis + 1)...].reduce(1, *), along = indices.shape.isEmpty ? 1 : indices.shape[axis]
        var floats = [Float](repeating: 0, count: codes.count * vector)
        for index in codes.indices {
            guard codes[index] >= 0, codes[index] < entries else { throw context.invalid("index \(codes[index]) outside a table of \(entries)") }
            let base = (blocks[index] * entries + codes[index]) * vector
            if vector == 1 {
                floats[index] = values[base]
                continue
            }
            // The index's position, and where its vector's elements go along the axis.
            let o = index / (along * inner), j = index / inner % along, i = index % inner
            for v in 0..<vector { floats[(o * along * vector + j * vector + v) * inner + i] = values[base + v] }
        }
        return Tensor(floats: floats, shape: shape)
    }

    private static func sparse(_ context: OperationContext) throws(RuntimeError) {
        let values = try required(context, "nonzero_data"), mask = try required(context, "mask")
        var shape = mask.shape
        var bits = mask.ints
        if let given = try context.constant("shape") {
            // iOS 16: the mask packed into bytes, lowest bit first.
            shape = given.ints
            let count = shape.reduce(1, *)
            guard bits.count * 8 >= count else { throw context.invalid("\(bits.count) mask bytes for \(count) values") }
            bits = MILPackedBits.codes(bits.map(UInt8.init(truncatingIfNeeded:)), bits: 1, count: count)
        }
        context.output(constant: try dense(context, values, bits: bits, shape: shape, type: values.type))
    }

    /// The values placed where `bits` is set (row-major), zeros elsewhere.
    private static func dense(_ context: OperationContext, _ values: Tensor, bits: [Int], shape: [Int], type: ElementType) throws(RuntimeError) -> Tensor {
        let data = values.floats
        var next = 0
        var floats = [Float](repeating: 0, count: bits.count)
        for index in bits.indices where bits[index] != 0 {
            guard next < data.count else { throw context.invalid("the mask sets more values than the \(data.count) given") }
            floats[index] = data[next]
            next += 1
        }
        return type.isFloat ? Tensor(floats: floats, shape: shape, type: type) : Tensor(ints: floats.map { Int32($0) }, shape: shape, type: type)
    }

    /// The elements of `tensor` where `bits` is set, in order.
    private static func nonzero(_ tensor: Tensor, bits: [Int]) -> Tensor {
        let floats = tensor.floats
        let kept = bits.indices.filter { bits[$0] != 0 }.map { floats[$0] }
        return Tensor(floats: kept, shape: [kept.count])
    }

    /// (data − offset) × scale, scale and offset given per block of every axis.
    private static func blockwise(_ context: OperationContext) throws(RuntimeError) {
        context.output(constant: try shiftScale(context, data: try required(context, "data"), scale: try required(context, "scale"),
                                                offset: try context.constant("offset")))
    }

    private static func shiftScale(_ context: OperationContext, data: Tensor, scale: Tensor, offset: Tensor?) throws(RuntimeError) -> Tensor {
        let rank = data.shape.count
        guard scale.shape.count == rank else { throw context.invalid("scale of rank \(scale.shape.count) for data of rank \(rank)") }
        if let packed = packedCodes(data), let size = blockSize(packed, scale.shape),
           let decoded = packed.decoded(by: .shiftScale(scale: .init(scale), offset: offset?.floats), blockRows: size.rows, blockColumns: size.columns,
                                        roundsToHalf: false) {
            return Tensor(type: .float32, shape: data.shape, storage: .packed(decoded))
        }
        let blocks = blockIndex(of: data.shape, per: scale.shape)
        let values = data.floats, scales = scale.floats, offsets = offset?.floats
        let floats = values.indices.map { index in (values[index] - (offsets?[blocks[index]] ?? 0)) * scales[blocks[index]] }
        return Tensor(floats: floats, shape: data.shape)
    }

    /// iOS 18's sparse forms: a mask and the non-zero entries, decompressed
    /// (looked up, or shifted and scaled) as their dense forms would be.
    private static func sparseOutputs(_ context: OperationContext, lookup isLookup: Bool) throws(RuntimeError) {
        let mask = try required(context, isLookup ? "indices_mask" : "data_mask")
        let bits = mask.ints
        let data = try required(context, isLookup ? "indices_nonzero_data" : "nonzero_data")
        let dense = try dense(context, data, bits: bits, shape: mask.shape, type: isLookup ? .int32 : .float32)
        let decompressed = isLookup ? try lookup(context, indices: dense, table: try required(context, "lut"))
            : try shiftScale(context, data: dense, scale: try required(context, "scale"), offset: try context.constant("offset"))
        guard decompressed.count != mask.count, let axis = decompressed.shape.indices.first(where: { decompressed.shape[$0] != mask.shape[$0] }) else {
            context.output(constant: mask)
            context.output(constant: nonzero(decompressed, bits: bits))
            return
        }
        // Tables of vectors: the mask repeated along the vector axis.
        let vector = decompressed.shape[axis] / max(mask.shape[axis], 1)
        let inner = mask.shape[(axis + 1)...].reduce(1, *), along = mask.shape[axis]
        var repeated = [Int32](repeating: 0, count: decompressed.count)
        for index in bits.indices {
            let o = index / (along * inner), j = index / inner % along, i = index % inner
            for v in 0..<vector { repeated[(o * along * vector + j * vector + v) * inner + i] = Int32(bits[index]) }
        }
        let expanded = Tensor(ints: repeated, shape: decompressed.shape, type: mask.type)
        context.output(constant: expanded)
        context.output(constant: nonzero(decompressed, bits: repeated.map(Int.init)))
    }

    /// The codes of a matrix kept packed where the weight file is mapped (see `PackedWeights`).
    private static func packedCodes(_ tensor: Tensor) -> PackedWeights? {
        guard case .packed(let packed) = tensor.storage, packed.decoding == .codes else { return nil }
        return packed
    }

    /// The rows and columns of one block when `packed` (rank 1 or 2) is cut
    /// into `counts` blocks per axis; `nil` when they do not divide it.
    private static func blockSize(_ packed: PackedWeights, _ counts: [Int]) -> (rows: Int, columns: Int)? {
        let grid = counts.count == 1 ? [1] + counts : counts
        guard grid.count == 2, grid[0] > 0, grid[1] > 0, packed.rows % grid[0] == 0, packed.columns % grid[1] == 0 else { return nil }
        return (packed.rows / grid[0], packed.columns / grid[1])
    }

    /// For each element of `shape` (row-major), the row-major position of its
    /// block when every axis is cut into `counts[axis]` equal blocks.
    private static func blockIndex(of shape: [Int], per counts: [Int]) -> [Int] {
        let sizes = zip(shape, counts).map { size, count in max(size / max(count, 1), 1) }
        let strides = Shapes.strides(counts)
        var result: [Int] = []
        result.reserveCapacity(shape.reduce(1, *))
        Shapes.forEachIndex(shape) { position in
            var block = 0
            for axis in position.indices { block += position[axis] / sizes[axis] * strides[axis] }
            result.append(block)
        }
        return result
    }
}

// MARK: Facts

extension ConstexprOperations {
    static let castFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let source = try context.input("source_val")
        return [source.with(ElementType(milName: context.string("output_dtype", "fp32")) ?? source.element)]
    }

    /// `constexpr_lut_to_dense`: the `shape` parameter's dimensions (iOS16),
    /// else the indices' with the vector axis scaled by the table's vector
    /// length (iOS18); the table's type.
    static let lutFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let lut = try context.input("lut"), indices = try context.input("indices")
        if context.has("shape") { return [ValueType(lut.element, shape: context.ints("shape"))] }
        guard var shape = indices.shape else { return [.unknownRank(lut.element)] }
        if context.has("vector_axis"), let lutShape = lut.shape, let vector = lutShape.last ?? nil, vector > 1 {
            let axis = try context.axis(context.int("vector_axis", 0), rank: shape.count, key: "vector_axis")
            shape[axis] = shape[axis].map { $0 * vector }
        }
        return [ValueType(lut.element, shape: shape)]
    }

    /// `constexpr_sparse_to_dense`: the `shape` parameter's dimensions (iOS16), else the mask's; the data's type.
    static let sparseFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let data = try context.input("nonzero_data")
        if context.has("shape") { return [ValueType(data.element, shape: context.ints("shape"))] }
        return [ValueType(data.element, shape: try context.input("mask").shape)]
    }

    /// The sparse forms (iOS18): the mask as it is, and a vector of the values it keeps, of `typeFrom`'s type.
    static func sparsePairFacts(mask: String, typeFrom: String) -> OperationDefinition.FactsRule {
        { context throws(RuntimeError) in
            [try context.input(mask), ValueType(try context.input(typeFrom).element, rank: 1)]
        }
    }
}
