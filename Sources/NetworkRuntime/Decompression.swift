import Foundation
import ModelFeatures

/// The weight-compression operations of ML programs (`constexpr_*`),
/// evaluated once at load into dense float constants.
struct Decompression {
    let kind: String
    let owner: String
    /// The operation's constant parameters, by name.
    let parameters: [String: ProgramConstant]

    /// Every parameter name the decompression operations take.
    static let parameterNames = ["quantized_data", "zero_point", "scale", "axis", "indices", "lut", "shape", "data", "offset",
                                 "source_val", "nonzero_data", "mask"]

    private func parameter(_ key: String) throws(RuntimeError) -> ProgramConstant? { parameters[key] }

    private func bad(_ detail: String) -> RuntimeError {
        .invalidParameters(model: "operation \"\(owner)\" (\(kind))", detail: detail)
    }

    private func required(_ key: String) throws(RuntimeError) -> ProgramConstant {
        guard let value = try parameter(key) else { throw bad("no \(key)") }
        return value
    }

    func value() throws(RuntimeError) -> ProgramConstant {
        switch kind {
        case "constexpr_affine_dequantize": return try affine()
        case "constexpr_lut_to_dense": return try lookupTable()
        case "constexpr_blockwise_shift_scale": return try blockwise()
        case "constexpr_sparse_to_dense": return try sparse()
        default: return try required("source_val")
        }
    }

    /// (q − zero point) × scale, the point and scale per slice along `axis` or for all.
    private func affine() throws(RuntimeError) -> ProgramConstant {
        let data = try required("quantized_data")
        let scale = try required("scale")
        let zero = try parameter("zero_point")
        let rank = data.shape.count
        var axis = Int(try parameter("axis")?.scalar ?? 0)
        if axis < 0 { axis += rank }
        guard (0..<max(rank, 1)).contains(axis) else { throw bad("axis \(axis) of rank \(rank)") }
        let along = rank > 0 ? data.shape[axis] : 1
        let inner = rank > 0 ? data.shape[(axis + 1)...].reduce(1, *) : 1
        for (name, values) in [("scale", scale.floats), ("zero_point", zero?.floats ?? [0])] where values.count != 1 && values.count != along {
            throw bad("\(name) has \(values.count) values for \(along) slices")
        }
        let floats = data.floats.enumerated().map { index, q in
            let slice = (index / inner) % along
            let point = zero.map { $0.count == 1 ? $0.floats[0] : $0.floats[slice] } ?? 0
            return (q - point) * (scale.count == 1 ? scale.floats[0] : scale.floats[slice])
        }
        return ProgramConstant(shape: data.shape, floats: floats)
    }

    /// Each index looked up in its block's table (iOS 18), or in one table
    /// with the indices packed into bytes (iOS 16).
    private func lookupTable() throws(RuntimeError) -> ProgramConstant {
        let indices = try required("indices")
        let table = try required("lut")
        if let shape = try parameter("shape") {
            // iOS 16: `indices` holds the codes packed into bytes, lowest bits first.
            let count = shape.ints.reduce(1, *)
            let bits = table.count > 1 ? Int(log2(Double(table.count)).rounded()) : 0
            guard bits >= 1, bits <= 8, 1 << bits == table.count else { throw bad("a table of \(table.count) values is not 2^bits") }
            let bytes = indices.ints.map(UInt8.init(truncatingIfNeeded:))
            guard bytes.count * 8 >= count * bits else { throw bad("\(bytes.count) bytes of indices for \(count) values") }
            return ProgramConstant(shape: shape.ints, floats: unpack(bytes, bits: bits, count: count).map { table.floats[$0] })
        }
        // iOS 18: lut has the indices' rank + 2 dimensions: blocks per axis, entries, vector size.
        let rank = indices.shape.count
        guard table.shape.count == rank + 2 else { throw bad("a table of rank \(table.shape.count) for indices of rank \(rank)") }
        guard table.shape[rank + 1] == 1 else {
            throw .unsupportedLayer(layer: owner, kind: kind, reason: "vector palettization (tables of vectors) is not supported yet")
        }
        let entries = table.shape[rank]
        let tables = Self.blocks(of: indices.shape, per: Array(table.shape.prefix(rank)))
        var floats = [Float](repeating: 0, count: indices.count)
        for index in 0..<indices.count {
            let code = Int(indices.floats[index])
            guard code >= 0, code < entries else { throw bad("index \(code) outside a table of \(entries)") }
            floats[index] = table.floats[tables[index] * entries + code]
        }
        return ProgramConstant(shape: indices.shape, floats: floats)
    }

    /// The non-zero values placed where the mask is set, zeros elsewhere. The
    /// iOS 16 form packs the mask into bytes (lowest bit first) with a `shape`.
    private func sparse() throws(RuntimeError) -> ProgramConstant {
        let values = try required("nonzero_data")
        let mask = try required("mask")
        var shape = mask.shape
        var bits = mask.floats
        if let given = try parameter("shape") {
            shape = given.ints
            let count = shape.reduce(1, *)
            let bytes = mask.ints.map(UInt8.init(truncatingIfNeeded:))
            guard bytes.count * 8 >= count else { throw bad("\(bytes.count) mask bytes for \(count) values") }
            bits = unpack(bytes, bits: 1, count: count).map(Float.init)
        }
        var next = 0
        var floats = [Float](repeating: 0, count: bits.count)
        for index in bits.indices where bits[index] != 0 {
            guard next < values.count else { throw bad("the mask sets more values than the \(values.count) given") }
            floats[index] = values.floats[next]
            next += 1
        }
        return ProgramConstant(shape: shape, floats: floats)
    }

    /// (data − offset) × scale, scale and offset given per block of every axis.
    private func blockwise() throws(RuntimeError) -> ProgramConstant {
        let data = try required("data")
        let scale = try required("scale")
        let offset = try parameter("offset")
        let rank = data.shape.count
        guard scale.shape.count == rank else { throw bad("scale of rank \(scale.shape.count) for data of rank \(rank)") }
        let blocks = Self.blocks(of: data.shape, per: scale.shape)
        let floats = data.floats.indices.map { index in
            (data.floats[index] - (offset?.floats[blocks[index]] ?? 0)) * scale.floats[blocks[index]]
        }
        return ProgramConstant(shape: data.shape, floats: floats)
    }

    /// For each element of `shape` (row-major), the row-major position of its
    /// block when every axis is cut into `counts[axis]` equal blocks.
    private static func blocks(of shape: [Int], per counts: [Int]) -> [Int] {
        let sizes = zip(shape, counts).map { size, count in max(size / max(count, 1), 1) }
        let strides = MultiArray.rowMajorStrides(counts)
        var result: [Int] = []
        result.reserveCapacity(shape.reduce(1, *))
        Gathers.forEachIndex(shape) { position in
            var block = 0
            for axis in position.indices { block += position[axis] / sizes[axis] * strides[axis] }
            result.append(block)
        }
        return result
    }
}
