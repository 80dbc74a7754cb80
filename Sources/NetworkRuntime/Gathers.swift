import ModelFeatures

/// Index tables for the layers that only move elements (padding, cropping,
/// slicing, permuting, nearest upsampling, splitting): made once per plan,
/// then one loop copies `output[i] = input[table[i]]` (-1 takes a constant).
enum Gathers {
    /// For each channel, the positions an output plane of `outH × outW` reads
    /// (`position` returns the offset inside the channel's input plane, or
    /// `nil` for the constant).
    static func plane(channels: Int, outH: Int, outW: Int, position: (Int, Int) -> Int?,
                      source: (Int) -> Int) -> [Int32] {
        var indices: [Int32] = []
        indices.reserveCapacity(channels * outH * outW)
        for c in 0..<channels {
            let base = source(c)
            for y in 0..<outH {
                for x in 0..<outW {
                    indices.append(position(y, x).map { Int32(base + $0) } ?? -1)
                }
            }
        }
        return indices
    }

    /// Channels `from..<from+count` of a [C, H, W] input.
    static func channelRange(from: Int, count: Int, plane: Int) -> [Int32] {
        (0..<(count * plane)).map { Int32(from * plane + $0) }
    }

    /// The source index of every output element of `shape` transposed by `axes`.
    static func transpose(_ shape: [Int], _ axes: [Int]) -> [Int32] {
        let sourceStrides = MultiArray.rowMajorStrides(shape)
        var indices: [Int32] = []
        indices.reserveCapacity(shape.reduce(1, *))
        forEachIndex(axes.map { shape[$0] }) { position in
            var source = 0
            for axis in 0..<shape.count { source += position[axis] * sourceStrides[axes[axis]] }
            indices.append(Int32(source))
        }
        return indices
    }

    /// The source index of every output element of `shape` repeated `reps[i]`
    /// times along each axis i.
    static func tile(_ shape: [Int], _ reps: [Int]) -> [Int32] {
        let sourceStrides = MultiArray.rowMajorStrides(shape)
        var indices: [Int32] = []
        indices.reserveCapacity(shape.reduce(1, *) * reps.reduce(1, *))
        forEachIndex(zip(shape, reps).map { $0 * $1 }) { position in
            var source = 0
            for axis in 0..<shape.count { source += position[axis] % shape[axis] * sourceStrides[axis] }
            indices.append(Int32(source))
        }
        return indices
    }

    /// Calls `body` with every index of `shape` in row-major order.
    static func forEachIndex(_ shape: [Int], _ body: ([Int]) -> Void) {
        let total = shape.reduce(1, *)
        guard total > 0 else { return }
        var position = [Int](repeating: 0, count: shape.count)
        for _ in 0..<total {
            body(position)
            var axis = shape.count - 1
            while axis >= 0 {
                position[axis] += 1
                if position[axis] < shape[axis] { break }
                position[axis] = 0
                axis -= 1
            }
        }
    }

    /// The elements of `shape` in the box `begin..<end` stepping by `stride`.
    static func box(_ shape: [Int], begin: [Int], end: [Int], stride step: [Int]) -> [Int32] {
        let sourceStrides = MultiArray.rowMajorStrides(shape)
        let outShape: [Int] = (0..<shape.count).map { axis -> Int in
            let span: Int = end[axis] - begin[axis]
            return (span + step[axis] - 1) / step[axis]
        }
        var indices: [Int32] = []
        forEachIndex(outShape) { position in
            var source = 0
            for axis in 0..<shape.count { source += (begin[axis] + position[axis] * step[axis]) * sourceStrides[axis] }
            indices.append(Int32(source))
        }
        return indices
    }

    /// `shape` padded to `output` with `before` elements ahead on each axis.
    static func padded(_ shape: [Int], before: [Int], output: [Int], mode: LayerOperation.PaddingMode) -> [Int32] {
        let sourceStrides = MultiArray.rowMajorStrides(shape)
        var indices: [Int32] = []
        forEachIndex(output) { position in
            var source = 0
            for axis in 0..<shape.count {
                var coordinate = position[axis] - before[axis]
                let size = shape[axis]
                if coordinate < 0 || coordinate >= size {
                    switch mode {
                    case .constant:
                        indices.append(-1)
                        return
                    case .replication:
                        coordinate = min(max(coordinate, 0), size - 1)
                    case .reflection:
                        coordinate = coordinate < 0 ? -coordinate : 2 * (size - 1) - coordinate
                        coordinate = min(max(coordinate, 0), size - 1)
                    }
                }
                source += coordinate * sourceStrides[axis]
            }
            indices.append(Int32(source))
        }
        return indices
    }
}
