import Foundation
import ModelFeatures

/// The weight-compression operations (`constexpr_*`): evaluated when the
/// program is read (their arguments are constants), once per model.
enum ConstexprOperations {
    static let definitions: [String: OperationDefinition] = [
        "constexpr_cast": OperationDefinition(["source_val", "output_dtype"]) { context throws(RuntimeError) in
            context.output(constant: try required(context, "source_val"))
        },
        "constexpr_affine_dequantize": OperationDefinition(["quantized_data", "zero_point", "scale", "axis"]) { context throws(RuntimeError) in
            try affine(context)
        },
        "constexpr_lut_to_dense": OperationDefinition(["indices", "lut", "shape", "vector_axis"]) { context throws(RuntimeError) in
            try lookupTable(context)
        },
        "constexpr_sparse_to_dense": OperationDefinition(["nonzero_data", "mask", "shape"]) { context throws(RuntimeError) in
            try sparse(context)
        },
        "constexpr_blockwise_shift_scale": OperationDefinition(["data", "scale", "offset"]) { context throws(RuntimeError) in
            try blockwise(context)
        },
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
            let bytes = indices.ints.map(UInt8.init(truncatingIfNeeded:))
            guard bytes.count * 8 >= count * bits else { throw context.invalid("\(bytes.count) bytes of indices for \(count) values") }
            let values = table.floats
            var floats = [Float](repeating: 0, count: count)
            for index in 0..<count {
                var code = 0
                for bit in 0..<bits {
                    let position = index * bits + bit
                    code |= Int(bytes[position / 8] >> (position % 8) & 1) << bit
                }
                floats[index] = values[code]
            }
            context.output(constant: Tensor(floats: floats, shape: shape.ints))
            return
        }
        // iOS 18: lut has the indices' rank + 2 dimensions: blocks per axis, entries, vector size.
        let rank = indices.shape.count
        guard table.shape.count == rank + 2 else { throw context.invalid("a table of rank \(table.shape.count) for indices of rank \(rank)") }
        guard table.shape[rank + 1] == 1 else { throw context.unsupported("vector palettization (tables of vectors) is not supported yet") }
        let entries = table.shape[rank]
        let blocks = blockIndex(of: indices.shape, per: Array(table.shape.prefix(rank)))
        let codes = indices.ints, values = table.floats
        var floats = [Float](repeating: 0, count: codes.count)
        for index in codes.indices {
            guard codes[index] >= 0, codes[index] < entries else { throw context.invalid("index \(codes[index]) outside a table of \(entries)") }
            floats[index] = values[blocks[index] * entries + codes[index]]
        }
        context.output(constant: Tensor(floats: floats, shape: indices.shape))
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
            let bytes = bits
            bits = (0..<count).map { Int(UInt8(truncatingIfNeeded: bytes[$0 / 8]) >> ($0 % 8) & 1) }
        }
        let data = values.floats
        var next = 0
        var floats = [Float](repeating: 0, count: bits.count)
        for index in bits.indices where bits[index] != 0 {
            guard next < data.count else { throw context.invalid("the mask sets more values than the \(data.count) given") }
            floats[index] = data[next]
            next += 1
        }
        context.output(constant: Tensor(floats: floats, shape: shape))
    }

    /// (data − offset) × scale, scale and offset given per block of every axis.
    private static func blockwise(_ context: OperationContext) throws(RuntimeError) {
        let data = try required(context, "data"), scale = try required(context, "scale")
        let offset = try context.constant("offset")
        let rank = data.shape.count
        guard scale.shape.count == rank else { throw context.invalid("scale of rank \(scale.shape.count) for data of rank \(rank)") }
        let blocks = blockIndex(of: data.shape, per: scale.shape)
        let values = data.floats, scales = scale.floats, offsets = offset?.floats
        let floats = values.indices.map { index in (values[index] - (offsets?[blocks[index]] ?? 0)) * scales[blocks[index]] }
        context.output(constant: Tensor(floats: floats, shape: data.shape))
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
