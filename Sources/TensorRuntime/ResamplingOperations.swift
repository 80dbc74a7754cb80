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
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1]
            func source(_ o: Int, _ scale: Double, _ input: Int, _ output: Int) -> (Int, Int, Float) {
                var position: Double
                if alignCorners { position = output > 1 ? Double(o) * Double(input - 1) / Double(output - 1) : 0 }
                else if halfPixel { position = max((Double(o) + 0.5) / scale - 0.5, 0) }
                else { position = Double(o) / scale }
                position = min(position, Double(input - 1))
                let low = Int(position.rounded(.down)), high = min(low + 1, input - 1)
                return (low, high, Float(position - Double(low)))
            }
            let ys = (0..<height).map { source($0, scaleH, rows, height) }, xs = (0..<width).map { source($0, scaleW, columns, width) }
            let planes = x.count / max(rows * columns, 1), from = x.id
            let out = try context.output(Array(x.shape.dropLast(2)) + [height, width])
            context.run(reads: [x], writes: [out]) { buffers in
                let input = buffers.floats(from), target = buffers.floats(out)
                for p in 0..<planes {
                    let image = input + p * rows * columns, result = target + p * height * width
                    for (i, y) in ys.enumerated() {
                        for (j, x) in xs.enumerated() {
                            let top = image[y.0 * columns + x.0] * (1 - x.2) + image[y.0 * columns + x.1] * x.2
                            let bottom = image[y.1 * columns + x.0] * (1 - x.2) + image[y.1 * columns + x.1] * x.2
                            result[i * width + j] = top * (1 - y.2) + bottom * y.2
                        }
                    }
                }
            }
        },
    ]

    private static func sizes(_ context: OperationContext, _ x: PlanValue) throws(RuntimeError) -> (Int, Int, Double, Double) {
        guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
        let scaleH = Double(try context.float("scale_factor_height", 1)), scaleW = Double(try context.float("scale_factor_width", 1))
        guard scaleH > 0, scaleW > 0 else { throw context.invalid("scale factors must be positive") }
        return (Int((Double(x.shape[x.rank - 2]) * scaleH).rounded(.down)), Int((Double(x.shape[x.rank - 1]) * scaleW).rounded(.down)), scaleH, scaleW)
    }
}
