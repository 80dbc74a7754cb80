import Foundation
import ModelFeatures

/// Operations that rearrange elements between axes (depth and space, batch
/// and space, pixel shuffles), windows, partial updates, sequence reversal,
/// cropping, and quantization of activations (`quantize`/`dequantize`).
enum RearrangementOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        // [n, C·b², H, W] → [n, C, H·b, W·b]; depth index (i·b + j)·C + c (TensorFlow's DCR order).
        "depth_to_space": OperationDefinition(["x", "block_size"]) { context throws(RuntimeError) in
            try blocks(context, depthFirst: true, toSpace: true, key: "block_size")
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "space_to_depth": OperationDefinition(["x", "block_size"]) { context throws(RuntimeError) in
            try blocks(context, depthFirst: true, toSpace: false, key: "block_size")
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        // [n, C·r², H, W] → [n, C, H·r, W·r]; depth index c·r² + i·r + j (PyTorch's order).
        "pixel_shuffle": OperationDefinition(["x", "upscale_factor"]) { context throws(RuntimeError) in
            try blocks(context, depthFirst: false, toSpace: true, key: "upscale_factor")
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "pixel_unshuffle": OperationDefinition(["x", "downscale_factor"]) { context throws(RuntimeError) in
            try blocks(context, depthFirst: false, toSpace: false, key: "downscale_factor")
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "space_to_batch": OperationDefinition(["x", "block_shape", "paddings"]) { context throws(RuntimeError) in try spaceToBatch(context) }.withFacts(FactsRules.sameRank()),
        "batch_to_space": OperationDefinition(["x", "block_shape", "crops"]) { context throws(RuntimeError) in try batchToSpace(context) }.withFacts(FactsRules.sameRank()),
        "sliding_windows": OperationDefinition(["x", "axis", "size", "stride"]) { context throws(RuntimeError) in
            let x = try context.input()
            let axis = try context.axis(try context.int("axis", 0), rank: x.rank)
            let size = try context.int("size", 1), stride = try context.int("stride", 1)
            guard size >= 1, stride >= 1, size <= x.shape[axis] else { throw context.invalid("size \(size) stride \(stride) on an axis of \(x.shape[axis])") }
            let windows = (x.shape[axis] - size) / stride + 1
            let shape = Array(x.shape[..<axis]) + [windows, size] + Array(x.shape[(axis + 1)...])
            var strides = Shapes.strides(x.shape)
            strides.insert(strides[axis] * stride, at: axis)
            try ShapeOperations.copy(context, x, offset: 0, strides: strides, shape: shape)
        }.withFacts(slidingWindowsFacts),
        "slice_update": OperationDefinition(["x", "update", "begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"]) { context throws(RuntimeError) in
            let x = try context.input(), update = try context.input("update")
            let begin = try context.input("begin"), end = try context.input("end")
            guard begin.constant != nil, end.constant != nil else {
                try sliceUpdateAtRunTime(context, x, update: update, begin: begin, end: end)
                return
            }
            let slice = try ShapeOperations.slice(context, x)
            guard update.count == slice.shape.reduce(1, *) else { throw context.invalid("update \(update.shape) for a slice of \(slice.shape)") }
            let out = try context.output(x.shape)
            let from = x.id, values = update.id, count = x.count, shape = slice.shape, strides = slice.strides, offset = slice.offset
            context.run(reads: [x, update], writes: [out]) { buffers in
                let target = buffers.ints(out), source = buffers.ints(values)
                target.update(from: buffers.ints(from), count: count)
                var next = 0
                Shapes.walk(shape, [strides]) { _, offsets, n in
                    for k in 0..<n { target[offset + offsets[0] + k * (strides.last ?? 0)] = source[next + k] }
                    next += n
                }
            }
        }.withFacts(FactsRules.same()),
        "reverse_sequence": OperationDefinition(["x", "lengths", "seq_axis", "batch_axis"]) { context throws(RuntimeError) in
            let x = try context.input(), lengths = try context.input("lengths")
            let sequenceAxis = try context.axis(try context.int("seq_axis", 0), rank: x.rank)
            let batchAxis = try context.axis(try context.int("batch_axis", 0), rank: x.rank)
            guard lengths.count == x.shape[batchAxis] else { throw context.invalid("\(lengths.count) lengths for a batch of \(x.shape[batchAxis])") }
            let out = try context.output(x.shape)
            let strides = Shapes.strides(x.shape), shape = x.shape, from = x.id, at = lengths.id, count = x.count
            let name = context.op.name, lengthsFloat = lengths.isFloat
            context.run(reads: [x, lengths], writes: [out]) { buffers throws(RuntimeError) in
                let source = buffers.ints(from), target = buffers.ints(out)
                for index in 0..<count {
                    let b = index / strides[batchAxis] % shape[batchAxis], s = index / strides[sequenceAxis] % shape[sequenceAxis]
                    let length = lengthsFloat ? Int(buffers.floats(at)[b]) : Int(buffers.ints(at)[b])
                    guard length >= 0, length <= shape[sequenceAxis] else {
                        throw .invalidValue(feature: name, detail: "length \(length) for a sequence of \(shape[sequenceAxis])")
                    }
                    let reversed = s < length ? length - 1 - s : s
                    target[index] = source[index + (reversed - s) * strides[sequenceAxis]]
                }
            }
        }.withFacts(FactsRules.same()),
        "crop": OperationDefinition(["x", "crop_height", "crop_width"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let height = try context.ints("crop_height") ?? [0, 0], width = try context.ints("crop_width") ?? [0, 0]
            guard height.count == 2, width.count == 2 else { throw context.invalid("crop_height and crop_width need two values each") }
            for (key, crop, size) in [("crop_height", height, x.shape[x.rank - 2]), ("crop_width", width, x.shape[x.rank - 1])]
            where crop.contains(where: { $0 < 0 }) || crop[0] + crop[1] > size {
                throw context.invalid("\(key) \(crop) does not fit an axis of size \(size)")
            }
            var shape = x.shape
            shape[x.rank - 2] -= height[0] + height[1]
            shape[x.rank - 1] -= width[0] + width[1]
            let strides = Shapes.strides(x.shape)
            try ShapeOperations.copy(context, x, offset: height[0] * strides[x.rank - 2] + width[0], strides: strides, shape: shape)
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "quantize": OperationDefinition(["input", "zero_point", "scale", "axis", "output_dtype"]) { context throws(RuntimeError) in
            try quantization(context, quantize: true)
        }.withFacts(quantizeFacts),
        "dequantize": OperationDefinition(["input", "zero_point", "scale", "axis"]) { context throws(RuntimeError) in
            try quantization(context, quantize: false)
        }.withFacts(FactsRules.same("input", element: .float32)),
    ]

    /// `slice_update` with `begin`/`end` computed at run time: the slice is
    /// found at prediction and must have the update's shape (else an error
    /// naming the operation).
    private static func sliceUpdateAtRunTime(_ context: OperationContext, _ x: PlanValue, update: PlanValue, begin: PlanValue,
                                             end: PlanValue) throws(RuntimeError) {
        let slice = try ShapeOperations.RunTimeSlice(context, shape: x.shape, begin: begin, end: end)
        let out = try context.output(x.shape)
        let from = x.id, values = update.id, count = x.count, updateCount = update.count
        context.run(reads: [x, update, begin, end], writes: [out]) { buffers throws(RuntimeError) in
            let geometry = try slice.geometry(buffers, count: updateCount)
            let target = buffers.ints(out), source = buffers.ints(values)
            target.update(from: buffers.ints(from), count: count)
            var next = 0
            let step = geometry.strides.last ?? 0
            Shapes.walk(geometry.shape, [geometry.strides]) { _, offsets, n in
                for k in 0..<n { target[geometry.offset + offsets[0] + k * step] = source[next + k] }
                next += n
            }
        }
    }

    /// Depth ↔ space in blocks of `b × b` over the last two axes of [n, C, H, W].
    private static func blocks(_ context: OperationContext, depthFirst: Bool, toSpace: Bool, key: String) throws(RuntimeError) {
        let x = try context.input()
        let b = try context.int(key, 1)
        guard x.rank == 4, b >= 1 else { throw context.invalid("x \(x.shape) needs rank 4 and \(key) ≥ 1") }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        if toSpace {
            guard c % (b * b) == 0 else { throw context.invalid("\(key) \(b): \(c) channels are not divisible by \(b * b)") }
            let channels = c / (b * b)
            try ShapeOperations.indexed(context, x, shape: [n, channels, h * b, w * b]) { index in
                let (i, j) = (index[2] % b, index[3] % b)
                let depth = depthFirst ? (i * b + j) * channels + index[1] : index[1] * b * b + i * b + j
                return ((index[0] * c + depth) * h + index[2] / b) * w + index[3] / b
            }
        } else {
            guard h % b == 0, w % b == 0 else { throw context.invalid("\(key) \(b): spatial size \(h) × \(w) is not divisible by \(b)") }
            try ShapeOperations.indexed(context, x, shape: [n, c * b * b, h / b, w / b]) { index in
                let depth = index[1]
                let (channel, i, j) = depthFirst ? (depth % c, depth / c / b, depth / c % b) : (depth / (b * b), depth / b % b, depth % b)
                return ((index[0] * c + channel) * h + index[2] * b + i) * w + index[3] * b + j
            }
        }
    }

    private static func spaceToBatch(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank == 4, let block = try context.ints("block_shape"), block.count == 2, let pads = try context.ints("paddings"), pads.count == 4 else {
            throw context.invalid("space_to_batch needs rank 4, block_shape [2] and paddings [2, 2]")
        }
        guard block.allSatisfy({ $0 >= 1 }), pads.allSatisfy({ $0 >= 0 }) else {
            throw context.invalid("block_shape \(block) must be positive and paddings \(pads) non-negative")
        }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let ph = h + pads[0] + pads[1], pw = w + pads[2] + pads[3]
        guard ph % block[0] == 0, pw % block[1] == 0 else { throw context.invalid("block_shape \(block): padded size \(ph) × \(pw) is not divisible by it") }
        let shape = [n * block[0] * block[1], c, ph / block[0], pw / block[1]]
        // Padding reads a zero: an extra zero element is not available, so positions map into x or to −1.
        try padded(context, x, shape: shape) { index in
            let offset = index[0] / n, batch = index[0] % n
            let y = index[2] * block[0] + offset / block[1] - pads[0], z = index[3] * block[1] + offset % block[1] - pads[2]
            guard y >= 0, y < h, z >= 0, z < w else { return -1 }
            return ((batch * c + index[1]) * h + y) * w + z
        }
    }

    private static func batchToSpace(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank == 4, let block = try context.ints("block_shape"), block.count == 2, let crops = try context.ints("crops"), crops.count == 4 else {
            throw context.invalid("batch_to_space needs rank 4, block_shape [2] and crops [2, 2]")
        }
        guard block.allSatisfy({ $0 >= 1 }), crops.allSatisfy({ $0 >= 0 }) else {
            throw context.invalid("block_shape \(block) must be positive and crops \(crops) non-negative")
        }
        let blocks = block[0] * block[1]
        guard x.shape[0] % blocks == 0 else { throw context.invalid("block_shape: batch \(x.shape[0]) is not divisible by \(blocks)") }
        let (n, c, h, w) = (x.shape[0] / blocks, x.shape[1], x.shape[2], x.shape[3])
        let shape = [n, c, h * block[0] - crops[0] - crops[1], w * block[1] - crops[2] - crops[3]]
        try ShapeOperations.indexed(context, x, shape: shape) { index in
            let y = index[2] + crops[0], z = index[3] + crops[2]
            let offset = (y % block[0]) * block[1] + z % block[1]
            return (((offset * n + index[0]) * c + index[1]) * h + y / block[0]) * w + z / block[1]
        }
    }

    /// Like `ShapeOperations.indexed`, with −1 positions giving zero.
    private static func padded(_ context: OperationContext, _ x: PlanValue, shape: [Int], _ source: ([Int]) -> Int) throws(RuntimeError) {
        var table: [Int32] = []
        Shapes.forEachIndex(shape) { table.append(Int32(source($0))) }
        let positions = table, from = x.id
        let out = try context.output(shape)
        context.run(reads: [x], writes: [out]) { buffers in
            let values = buffers.ints(from), target = buffers.ints(out)
            for index in positions.indices { target[index] = positions[index] < 0 ? 0 : values[Int(positions[index])] }
        }
    }

    /// quantize: round(x / scale) + zero point, clamped to the output type;
    /// dequantize: (q − zero point) × scale; scale and zero point per `axis` or one for all.
    private static func quantization(_ context: OperationContext, quantize: Bool) throws(RuntimeError) {
        let x = try context.input("input")
        guard let scale = try context.constant("scale")?.floats else { throw context.invalid("no scale") }
        let zero = try context.constant("zero_point")?.floats ?? [0]
        let axis = context.has("axis") ? try context.axis(try context.int("axis", 0), rank: x.rank) : nil
        let along = axis.map { x.shape[$0] } ?? 1
        for (name, values) in [("scale", scale), ("zero_point", zero)] where values.count != 1 && values.count != along {
            throw context.invalid("\(name) has \(values.count) values for \(along) slices")
        }
        let inner = axis.map { x.shape[($0 + 1)...].reduce(1, *) } ?? 1
        let type = context.outputType()
        let (low, high): (Float, Float) = switch type {
        case .int8: (-128, 127)
        case .uint8: (0, 255)
        case .int16: (-32768, 32767)
        case .uint16: (0, 65535)
        default: (-2_147_483_648, 2_147_483_520)
        }
        let out = try context.output(x.shape)
        let count = x.count, from = x.id, inputFloat = x.isFloat
        context.run(reads: [x], writes: [out]) { buffers in
            for index in 0..<count {
                let slice = (index / inner) % along
                let s = scale[scale.count == 1 ? 0 : slice], z = zero[zero.count == 1 ? 0 : slice]
                if quantize {
                    let value = inputFloat ? buffers.floats(from)[index] : Float(buffers.ints(from)[index])
                    buffers.ints(out)[index] = Int32(min(max((value / s).rounded(.toNearestOrEven) + z, low), high))
                } else {
                    let value = inputFloat ? buffers.floats(from)[index] : Float(buffers.ints(from)[index])
                    buffers.floats(out)[index] = (value - z) * s
                }
            }
        }
    }
}

// MARK: Facts

extension RearrangementOperations {
    /// `sliding_windows`: `axis` replaced by the windows' count and size.
    static let slidingWindowsFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard var dims = x.shape else { return [.unknownRank(x.element)] }
        let axis = try context.axis(context.int("axis", 0), rank: dims.count)
        let size = context.constant("size")?.scalar.map { Int($0) }, stride = context.int("stride", 1)
        let windows: Int? = if let size, let count = dims[axis], stride > 0 { (count - size) / stride + 1 } else { nil }
        dims[axis] = windows
        dims.insert(size, at: axis + 1)
        return [ValueType(x.element, shape: dims)]
    }
}

extension RearrangementOperations {
    /// `quantize`: the input's shape in `output_dtype` (uint8 or int8).
    static let quantizeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let input = try context.input("input")
        return [input.with(ElementType(milName: context.string("output_dtype", "uint8")) ?? .uint8)]
    }
}
