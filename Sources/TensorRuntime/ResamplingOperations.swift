import Foundation
import ModelFeatures

/// Resizing the last two axes: nearest-neighbour and bilinear upsampling.
enum ResamplingOperations {
    static let definitions: [String: OperationDefinition] = [
        "upsample_nearest_neighbor": OperationDefinition(["x", "scale_factor_height", "scale_factor_width"]) { context throws(RuntimeError) in
            let x = try context.input()
            let (height, width, scaleH, scaleW) = try sizes(context, x)
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
            try ShapeOperations.indexed(context, x, shape: Array(x.shape.dropLast(2)) + [height, width]) { index in
                let r = min(Int(Double(index[index.count - 2]) / scaleH), rows - 1)
                let c = min(Int(Double(index[index.count - 1]) / scaleW), columns - 1)
                let plane = index.dropLast(2).enumerated().reduce(0) { $0 * x.shape[$1.offset] + $1.element }
                return (plane * rows + r) * columns + c
            }
        },
        "upsample_bilinear": OperationDefinition(["x", "scale_factor_height", "scale_factor_width", "align_corners", "half_pixel_centers"]) { context throws(RuntimeError) in
            let x = try context.input()
            let (height, width, scaleH, scaleW) = try sizes(context, x)
            let alignCorners = try context.bool("align_corners", false)
            let halfPixel = try context.bool("half_pixel_centers", !alignCorners)
            func grid(_ scale: Double, _ input: Int, _ output: Int) -> [Double] {
                (0..<output).map { o in
                    let position: Double
                    if alignCorners { position = output > 1 ? Double(o) * Double(input - 1) / Double(output - 1) : 0 }
                    else if halfPixel { position = max((Double(o) + 0.5) / scale - 0.5, 0) }
                    else { position = Double(o) / scale }
                    return min(position, Double(input - 1))
                }
            }
            try bilinear(context, x, ys: grid(scaleH, x.shape[x.rank - 2], height), xs: grid(scaleW, x.shape[x.rank - 1], width))
        },
        "resize_bilinear": OperationDefinition(["x", "target_size_height", "target_size_width", "sampling_mode"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let height = try context.int("target_size_height", 1), width = try context.int("target_size_width", 1)
            let mode = try context.string("sampling_mode", "DEFAULT")
            guard ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"].contains(mode) else {
                throw context.unsupported("sampling_mode \(mode) is not one MIL defines")
            }
            func grid(_ input: Int, _ output: Int) -> [Double] {
                let xin = Double(input), xout = Double(output)
                return (0..<output).map { index in
                    let i = Double(index)
                    let point: Double
                    switch mode {
                    case "STRICT_ALIGN_CORNERS", "ALIGN_CORNERS":
                        point = output == 1 ? (mode == "ALIGN_CORNERS" ? (xin - 1) / 2 : 0) : i * (xin - 1) / (xout - 1)
                    case "DEFAULT": point = output == 1 ? 0 : i * (xin - xin / xout) / (xout - 1)
                    case "OFFSET_CORNERS":
                        let delta = max(1, xin - 1) / xout
                        point = 0.5 * delta + i * delta
                    default:
                        let spacing = xin / xout
                        point = i * spacing + 0.5 * spacing - 0.5
                    }
                    return min(xin - 1, max(0, point))
                }
            }
            try bilinear(context, x, ys: grid(x.shape[x.rank - 2], height), xs: grid(x.shape[x.rank - 1], width))
        },
        "resize_nearest_neighbor": OperationDefinition(["x", "target_size_height", "target_size_width"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let height = try context.int("target_size_height", 1), width = try context.int("target_size_width", 1)
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
            try ShapeOperations.indexed(context, x, shape: Array(x.shape.dropLast(2)) + [height, width]) { index in
                let r = min(index[index.count - 2] * rows / max(height, 1), rows - 1)
                let c = min(index[index.count - 1] * columns / max(width, 1), columns - 1)
                let plane = index.dropLast(2).enumerated().reduce(0) { $0 * x.shape[$1.offset] + $1.element }
                return (plane * rows + r) * columns + c
            }
        },
    ]

    /// Bilinear interpolation of the last two axes at the source positions `ys` × `xs`.
    static func bilinear(_ context: OperationContext, _ x: PlanValue, ys positionsY: [Double], xs positionsX: [Double]) throws(RuntimeError) {
        let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
        func split(_ position: Double, _ size: Int) -> (Int, Int, Float) {
            let low = min(Int(position.rounded(.down)), size - 1), high = min(low + 1, size - 1)
            return (low, high, Float(position - Double(low)))
        }
        let ys = positionsY.map { split($0, rows) }, xs = positionsX.map { split($0, columns) }
        let height = ys.count, width = xs.count
        let planes = x.count / max(rows * columns, 1), from = x.id
        let out = try context.output(Array(x.shape.dropLast(2)) + [height, width])
        // Separable: each output row blends its two source rows once (per source column), then each output
        // column blends two neighbours of that row — one interpolation per output element instead of three.
        let rowLow = ys.map(\.0), rowHigh = ys.map(\.1), rowWeight = ys.map(\.2)
        let columnLow = xs.map(\.0), columnHigh = xs.map(\.1), columnWeight = xs.map(\.2)
        context.run(reads: [x], writes: [out]) { buffers in
            let input = buffers.floats(from), target = buffers.floats(out)
            withUnsafeTemporaryAllocation(of: Float.self, capacity: max(columns, 1)) { row in
                guard let blended = row.baseAddress else { return }
                for p in 0..<planes {
                    let image = input + p * rows * columns, result = target + p * height * width
                    for i in 0..<height {
                        let top = image + rowLow[i] * columns, bottom = image + rowHigh[i] * columns, fy = rowWeight[i]
                        for c in 0..<columns { blended[c] = top[c] * (1 - fy) + bottom[c] * fy }
                        let line = result + i * width
                        for j in 0..<width {
                            let fx = columnWeight[j]
                            line[j] = blended[columnLow[j]] * (1 - fx) + blended[columnHigh[j]] * fx
                        }
                    }
                }
            }
        }
    }

    private static func sizes(_ context: OperationContext, _ x: PlanValue) throws(RuntimeError) -> (Int, Int, Double, Double) {
        guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
        let scaleH = Double(try context.float("scale_factor_height", 1)), scaleW = Double(try context.float("scale_factor_width", 1))
        guard scaleH > 0, scaleW > 0 else { throw context.invalid("scale factors must be positive") }
        return (Int((Double(x.shape[x.rank - 2]) * scaleH).rounded(.down)), Int((Double(x.shape[x.rank - 1]) * scaleW).rounded(.down)), scaleH, scaleW)
    }
}
