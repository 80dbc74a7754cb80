import Foundation
import ModelFeatures

/// Resizing the last two axes: nearest-neighbour and bilinear upsampling.
enum ResamplingOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "upsample_nearest_neighbor": OperationDefinition(["x", "scale_factor_height", "scale_factor_width"]) { context throws(RuntimeError) in
            let x = try context.input()
            let (height, width, _, _) = try sizes(context, x)
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
            // Output pixel i reads floor(i · input / output): the sizes' ratio, not the scale given
            // (they differ for fractional scales: 3 columns × 1.12 gives 3, which read columns 0, 1, 2).
            try ShapeOperations.indexed(context, x, shape: Array(x.shape.dropLast(2)) + [height, width]) { index in
                let r = min(index[index.count - 2] * rows / max(height, 1), rows - 1)
                let c = min(index[index.count - 1] * columns / max(width, 1), columns - 1)
                let plane = index.dropLast(2).enumerated().reduce(0) { $0 * x.shape[$1.offset] + $1.element }
                return (plane * rows + r) * columns + c
            }
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "upsample_bilinear": OperationDefinition(["x", "scale_factor_height", "scale_factor_width", "align_corners", "half_pixel_centers"]) { context throws(RuntimeError) in
            let x = try context.input()
            let (height, width, _, _) = try sizes(context, x)
            let alignCorners = try context.bool("align_corners", false)
            let halfPixel = try context.bool("half_pixel_centers", !alignCorners)
            // The spacing is the sizes' ratio Xin / Xout, not 1 / scale: MIL recomputes the scale from the
            // output size (they differ for fractional scales: 2 columns × 2.6 gives 5, spaced 0.4, not 1 / 2.6).
            func grid(_ input: Int, _ output: Int) -> [Double] {
                let spacing = Double(input) / Double(max(output, 1))
                return (0..<output).map { o in
                    let position: Double
                    if alignCorners { position = output > 1 ? Double(o) * Double(input - 1) / Double(output - 1) : 0 }
                    else if halfPixel { position = max((Double(o) + 0.5) * spacing - 0.5, 0) }
                    else { position = Double(o) * spacing }
                    return min(position, Double(input - 1))
                }
            }
            try bilinear(context, x, ys: grid(x.shape[x.rank - 2], height), xs: grid(x.shape[x.rank - 1], width))
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "resize_bilinear": OperationDefinition(["x", "target_size_height", "target_size_width", "sampling_mode"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let height = try context.int("target_size_height", 1), width = try context.int("target_size_width", 1)
            guard height >= 1, width >= 1 else {
                throw context.invalid("target_size_height \(height) and target_size_width \(width) must be positive")
            }
            let mode = try context.string("sampling_mode", "DEFAULT")
            guard ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"].contains(mode) else {
                throw context.unsupported("sampling_mode \(mode) is not one MIL defines")
            }
            try bilinear(context, x, ys: grid(mode, x.shape[x.rank - 2], height), xs: grid(mode, x.shape[x.rank - 1], width))
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        // iOS 17: the last `resized_dims` axes take their sizes from `shape` (0 keeps x's), with resize_bilinear's sampling modes.
        "resize": OperationDefinition(["x", "shape", "resized_dims", "interpolation_mode", "sampling_mode"]) { context throws(RuntimeError) in
            try resize(context)
        }.withFacts(FactsRules.sameRank(keeping: [])),
        "resize_nearest_neighbor": OperationDefinition(["x", "target_size_height", "target_size_width"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let height = try context.int("target_size_height", 1), width = try context.int("target_size_width", 1)
            guard height >= 1, width >= 1 else {
                throw context.invalid("target_size_height \(height) and target_size_width \(width) must be positive")
            }
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
            try ShapeOperations.indexed(context, x, shape: Array(x.shape.dropLast(2)) + [height, width]) { index in
                let r = min(index[index.count - 2] * rows / max(height, 1), rows - 1)
                let c = min(index[index.count - 1] * columns / max(width, 1), columns - 1)
                let plane = index.dropLast(2).enumerated().reduce(0) { $0 * x.shape[$1.offset] + $1.element }
                return (plane * rows + r) * columns + c
            }
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
    ]

    /// Where each of `output` samples reads an axis of `input` elements, for a
    /// `resize_bilinear` sampling mode (clamped to the axis).
    static func grid(_ mode: String, _ input: Int, _ output: Int) -> [Double] {
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

    private static func resize(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard let requested = try context.ints("shape") else { throw context.invalid("no shape") }
        let count = try context.int("resized_dims", 0)
        let interpolation = try context.string("interpolation_mode", "LINEAR"), mode = try context.string("sampling_mode", "DEFAULT")
        guard ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"].contains(mode) else {
            throw context.unsupported("sampling_mode \(mode) is not one MIL defines")
        }
        guard (1...2).contains(count), count <= requested.count, requested.count <= x.rank else {
            throw context.unsupported("resized_dims \(count) with a shape of \(requested.count) values on a rank-\(x.rank) x (1 or 2 resized axes are run)")
        }
        var shape = x.shape
        for k in 0..<count {
            let size = requested[requested.count - count + k], axis = x.rank - count + k
            if size != 0 { shape[axis] = size }
        }
        // One resized axis is a plane of one row.
        let rows = count == 2 ? x.shape[x.rank - 2] : 1, columns = x.shape[x.rank - 1]
        let height = count == 2 ? shape[x.rank - 2] : 1, width = shape[x.rank - 1]
        let ys = grid(mode, rows, height), xs = grid(mode, columns, width)
        switch interpolation {
        case "LINEAR":
            guard x.isFloat else { throw context.unsupported("LINEAR interpolation of integers is not supported") }
            try bilinear(context, x, ys: ys, xs: xs, rows: rows, columns: columns, shape: shape)
        case "NEAREST_NEIGHBOR":
            try ShapeOperations.indexed(context, x, shape: shape) { index in
                let r = count == 2 ? Int(ys[index[index.count - 2]].rounded()) : 0
                let c = Int(xs[index[index.count - 1]].rounded())
                let plane = index.dropLast(count).enumerated().reduce(0) { $0 * x.shape[$1.offset] + $1.element }
                return (plane * rows + r) * columns + c
            }
        default:
            throw context.unsupported("interpolation_mode \(interpolation) is not one MIL defines")
        }
    }

    /// Bilinear interpolation of the last two axes (or of planes `rows` × `columns`
    /// giving an output of `shape`) at the source positions `ys` × `xs`.
    static func bilinear(_ context: OperationContext, _ x: PlanValue, ys positionsY: [Double], xs positionsX: [Double],
                         rows planeRows: Int? = nil, columns planeColumns: Int? = nil, shape: [Int]? = nil) throws(RuntimeError) {
        let rows = planeRows ?? x.shape[x.rank - 2], columns = planeColumns ?? x.shape[x.rank - 1]
        func split(_ position: Double, _ size: Int) -> (Int, Int, Float) {
            let low = min(Int(position.rounded(.down)), size - 1), high = min(low + 1, size - 1)
            return (low, high, Float(position - Double(low)))
        }
        let ys = positionsY.map { split($0, rows) }, xs = positionsX.map { split($0, columns) }
        let height = ys.count, width = xs.count
        let planes = x.count / max(rows * columns, 1), from = x.id
        let out = try context.output(shape ?? Array(x.shape.dropLast(2)) + [height, width])
        // Separable: each output row blends its two source rows once (per source column), then each output
        // column blends two neighbours of that row — one interpolation per output element instead of three.
        let rowLow = ys.map(\.0), rowHigh = ys.map(\.1), rowWeight = ys.map(\.2)
        let columnLow = xs.map(\.0), columnHigh = xs.map(\.1), columnWeight = xs.map(\.2)
        if rows < height {
            // Upsampling the rows: each source row is interpolated along the columns once (rows × width
            // gathers, not height × width), then each output row blends two of those rows, contiguously.
            context.run(reads: [x], writes: [out]) { buffers in
                let input = buffers.floats(from), target = buffers.floats(out)
                withUnsafeTemporaryAllocation(of: Float.self, capacity: max(rows * width, 1)) { scratch in
                    guard let widened = scratch.baseAddress else { return }
                    for p in 0..<planes {
                        let image = input + p * rows * columns, result = target + p * height * width
                        for r in 0..<rows {
                            let source = image + r * columns, line = widened + r * width
                            for j in 0..<width {
                                let fx = columnWeight[j]
                                line[j] = source[columnLow[j]] * (1 - fx) + source[columnHigh[j]] * fx
                            }
                        }
                        for i in 0..<height {
                            let top = widened + rowLow[i] * width, bottom = widened + rowHigh[i] * width, fy = rowWeight[i]
                            let line = result + i * width
                            for j in 0..<width { line[j] = top[j] * (1 - fy) + bottom[j] * fy }
                        }
                    }
                }
            }
            return
        }
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
        guard scaleH > 0, scaleW > 0 else { throw context.invalid("scale_factor_height \(scaleH) and scale_factor_width \(scaleW) must be positive") }
        return (Int((Double(x.shape[x.rank - 2]) * scaleH).rounded(.down)), Int((Double(x.shape[x.rank - 1]) * scaleW).rounded(.down)), scaleH, scaleW)
    }
}
