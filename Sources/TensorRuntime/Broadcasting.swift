import ModelFeatures

/// Shape arithmetic shared by the kernels: row-major strides, NumPy
/// broadcasting, and walks over broadcast operands.
enum Shapes {
    /// Row-major strides of `shape`, in elements (`MultiArray`'s rule).
    static func strides(_ shape: [Int]) -> [Int] { MultiArray.rowMajorStrides(shape) }

    /// The NumPy broadcast of two shapes, or `nil` when they do not broadcast.
    static func broadcast(_ a: [Int], _ b: [Int]) -> [Int]? {
        let rank = max(a.count, b.count)
        var result = [Int](repeating: 1, count: rank)
        for axis in 0..<rank {
            let x = axis < rank - a.count ? 1 : a[axis - (rank - a.count)]
            let y = axis < rank - b.count ? 1 : b[axis - (rank - b.count)]
            guard x == y || x == 1 || y == 1 else { return nil }
            result[axis] = x == 1 ? y : x
        }
        return result
    }

    /// Strides of `shape` read as `target` (right-aligned; 0 along broadcast axes).
    static func broadcastStrides(_ shape: [Int], to target: [Int]) -> [Int] {
        let own = strides(shape)
        let offset = target.count - shape.count
        return target.indices.map { axis in
            axis < offset || shape[axis - offset] == 1 ? 0 : own[axis - offset]
        }
    }

    /// Walks `shape` row-major in runs along the last axis: `body(output, offsets, length)`
    /// with each operand's offset at the start of the run; operand `k`
    /// advances by `strides[k].last` per element within a run.
    @inline(__always)
    static func walk(_ shape: [Int], _ strides: [[Int]], _ body: (Int, UnsafeMutableBufferPointer<Int>, Int) -> Void) {
        let rank = shape.count
        let operands = strides.count
        withUnsafeTemporaryAllocation(of: Int.self, capacity: operands + rank + 1) { scratch in
            let offsets = UnsafeMutableBufferPointer(rebasing: scratch[0..<operands])
            let index = UnsafeMutableBufferPointer(rebasing: scratch[operands..<(operands + rank)])
            for k in 0..<operands { offsets[k] = 0 }
            for axis in 0..<rank { index[axis] = 0 }
            if shape.contains(0) { return }
            if rank == 0 {
                body(0, offsets, 1)
                return
            }
            let inner = shape[rank - 1]
            let outer = shape.dropLast().reduce(1, *)
            for run in 0..<outer {
                body(run * inner, offsets, inner)
                var axis = rank - 2
                while axis >= 0 {
                    index[axis] += 1
                    for k in 0..<operands { offsets[k] += strides[k][axis] }
                    if index[axis] < shape[axis] { break }
                    for k in 0..<operands { offsets[k] -= strides[k][axis] * shape[axis] }
                    index[axis] = 0
                    axis -= 1
                }
            }
        }
    }

    /// The offset of every multi-index of `shape`, row-major, for `strides`
    /// (0 along a broadcast axis); `[0]` for a shape with no elements.
    static func offsets(_ shape: [Int], strides: [Int]) -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(shape.reduce(1, *))
        let step = strides.last ?? 0
        walk(shape, [strides]) { _, offsets, run in
            for k in 0..<run { result.append(offsets[0] + k * step) }
        }
        return result.isEmpty ? [0] : result
    }

    /// Calls `body` with every multi-index of `shape`, row-major.
    static func forEachIndex(_ shape: [Int], _ body: ([Int]) -> Void) {
        let count = shape.reduce(1, *)
        guard count > 0 else { return }
        var index = [Int](repeating: 0, count: shape.count)
        for _ in 0..<count {
            body(index)
            var axis = shape.count - 1
            while axis >= 0 {
                index[axis] += 1
                if index[axis] < shape[axis] { break }
                index[axis] = 0
                axis -= 1
            }
        }
    }
}
