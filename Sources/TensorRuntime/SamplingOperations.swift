import Foundation
import ModelFeatures

/// Sampling an image at computed positions: `resample` (a grid of
/// coordinates), `affine` (a transform of the output grid) and `crop_resize`
/// (boxes resized by bilinear interpolation).
enum SamplingOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "resample": OperationDefinition(["x", "coordinates", "sampling_mode", "padding_mode", "padding_value", "coordinates_mode", "align_corners"]) { context throws(RuntimeError) in
            let x = try context.input(), coordinates = try context.input("coordinates")
            guard x.rank == 4, coordinates.rank == 4, coordinates.shape[3] == 2, coordinates.shape[0] == x.shape[0] else {
                throw context.invalid("x \(x.shape) and coordinates \(coordinates.shape) must be [B, C, H, W] and [B, H2, W2, 2]")
            }
            let sampler = try Sampler(context)
            let batch = x.shape[0], channels = x.shape[1], height = coordinates.shape[1], width = coordinates.shape[2]
            let out = try context.output([batch, channels, height, width])
            let from = x.id, grid = coordinates.id, gridIsFloat = coordinates.type.isFloat
            let rows = x.shape[2], columns = x.shape[3]
            context.run(reads: [x, coordinates], writes: [out]) { buffers in
                let input = buffers.floats(from), target = buffers.floats(out)
                for b in 0..<batch {
                    for i in 0..<height * width {
                        let at = (b * height * width + i) * 2
                        let gx = gridIsFloat ? Double(buffers.floats(grid)[at]) : Double(buffers.ints(grid)[at])
                        let gy = gridIsFloat ? Double(buffers.floats(grid)[at + 1]) : Double(buffers.ints(grid)[at + 1])
                        let px = sampler.position(gx, size: columns), py = sampler.position(gy, size: rows)
                        for c in 0..<channels {
                            let plane = input + (b * channels + c) * rows * columns
                            target[(b * channels + c) * height * width + i] = Float(sampler.sample(plane, rows: rows, columns: columns, y: py, x: px))
                        }
                    }
                }
            }
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "affine": OperationDefinition(["x", "transform_matrix", "output_height", "output_width", "sampling_mode", "padding_mode", "padding_value", "coordinates_mode", "align_corners"]) { context throws(RuntimeError) in
            let x = try context.input(), matrix = try context.input("transform_matrix")
            guard x.rank == 4, matrix.rank == 2, matrix.shape[1] == 6, matrix.shape[0] == 1 || matrix.shape[0] == x.shape[0] else {
                throw context.invalid("x \(x.shape) and transform_matrix \(matrix.shape) must be [B, C, H, W] and [1 or B, 6]")
            }
            let sampler = try Sampler(context)
            guard sampler.coordinates != "unnormalized" else {
                throw context.unsupported("coordinates_mode \"unnormalized\" is not supported (the output grid is normalized)")
            }
            let height = try context.int("output_height", 0), width = try context.int("output_width", 0)
            guard height > 0, width > 0 else { throw context.invalid("output_height and output_width must be positive") }
            let batch = x.shape[0], channels = x.shape[1], rows = x.shape[2], columns = x.shape[3], perBatch = matrix.shape[0] > 1
            let out = try context.output([batch, channels, height, width])
            let from = x.id, transform = matrix.id
            context.run(reads: [x, matrix], writes: [out]) { buffers in
                let input = buffers.floats(from), target = buffers.floats(out)
                for b in 0..<batch {
                    let m = (0..<6).map { Double(buffers.floats(transform)[(perBatch ? b : 0) * 6 + $0]) }
                    for i in 0..<height {
                        let oy = sampler.normalized(i, size: height)
                        for j in 0..<width {
                            let ox = sampler.normalized(j, size: width)
                            let px = sampler.position(m[0] * ox + m[1] * oy + m[2], size: columns)
                            let py = sampler.position(m[3] * ox + m[4] * oy + m[5], size: rows)
                            for c in 0..<channels {
                                let plane = input + (b * channels + c) * rows * columns
                                target[((b * channels + c) * height + i) * width + j] = Float(sampler.sample(plane, rows: rows, columns: columns, y: py, x: px))
                            }
                        }
                    }
                }
            }
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "crop_resize": OperationDefinition(["x", "roi", "boxes", "box_indices", "target_height", "target_width", "normalized_coordinates",
                                            "spatial_scale", "box_coordinate_mode", "sampling_mode", "pad_value"]) { context throws(RuntimeError) in
            try cropResize(context)
        }.withFacts(cropResizeFacts),
    ]

    /// How `resample` and `affine` read the image at a position.
    struct Sampler: Sendable {
        let nearest: Bool
        let padding: String
        let paddingValue: Double
        let coordinates: String
        let alignCorners: Bool

        init(_ context: OperationContext) throws(RuntimeError) {
            let mode = try context.string("sampling_mode", "bilinear").lowercased()
            guard mode == "bilinear" || mode == "nearest" else { throw context.unsupported("sampling_mode \"\(mode)\" is not supported (bilinear, nearest)") }
            nearest = mode == "nearest"
            padding = try context.string("padding_mode", "constant").lowercased()
            guard ["constant", "border", "reflection", "symmetric"].contains(padding) else {
                throw context.unsupported("padding_mode \"\(padding)\" is not supported (constant, border, reflection, symmetric)")
            }
            paddingValue = Double(try context.float("padding_value", 0))
            coordinates = try context.string("coordinates_mode", "normalized_minus_one_to_one").lowercased()
            guard ["unnormalized", "normalized_minus_one_to_one", "normalized_zero_to_one"].contains(coordinates) else {
                throw context.unsupported("coordinates_mode \"\(coordinates)\" is not supported (unnormalized, normalized_minus_one_to_one, normalized_zero_to_one)")
            }
            alignCorners = try context.bool("align_corners", true)
        }

        /// The pixel position of coordinate `value` along an axis of `size` pixels.
        func position(_ value: Double, size: Int) -> Double {
            let n = Double(size)
            switch coordinates {
            case "unnormalized": return value
            case "normalized_zero_to_one": return alignCorners ? value * (n - 1) : value * n - 0.5
            default: return alignCorners ? (value + 1) / 2 * (n - 1) : ((value + 1) * n - 1) / 2
            }
        }

        /// The normalized coordinate of output pixel `index` of `size` (the grid `affine` transforms).
        func normalized(_ index: Int, size: Int) -> Double {
            let i = Double(index), n = Double(size)
            let minusOneToOne = alignCorners ? (size > 1 ? -1 + 2 * i / (n - 1) : 0) : (2 * i + 1) / n - 1
            return coordinates == "normalized_zero_to_one" ? (minusOneToOne + 1) / 2 : minusOneToOne
        }

        /// The index an out-of-image index reads under the padding mode; nil for the padding value.
        func index(_ i: Int, _ size: Int) -> Int? {
            if i >= 0, i < size { return i }
            switch padding {
            case "border": return min(max(i, 0), size - 1)
            case "reflection":
                guard size > 1 else { return 0 }
                let period = 2 * (size - 1), m = ((i % period) + period) % period
                return m < size ? m : period - m
            case "symmetric":
                let period = 2 * size, m = ((i % period) + period) % period
                return m < size ? m : period - 1 - m
            default: return nil
            }
        }

        func sample(_ plane: UnsafeMutablePointer<Float>, rows: Int, columns: Int, y: Double, x: Double) -> Double {
            func at(_ r: Int, _ c: Int) -> Double {
                guard let r = index(r, rows), let c = index(c, columns) else { return paddingValue }
                return Double(plane[r * columns + c])
            }
            guard y.isFinite, x.isFinite else { return paddingValue }
            if nearest { return at(Int((y + 0.5).rounded(.down)), Int((x + 0.5).rounded(.down))) }
            let r0 = Int(y.rounded(.down)), c0 = Int(x.rounded(.down))
            let fy = y - Double(r0), fx = x - Double(c0)
            let top = at(r0, c0) * (1 - fx) + at(r0, c0 + 1) * fx
            let bottom = at(r0 + 1, c0) * (1 - fx) + at(r0 + 1, c0 + 1) * fx
            return top * (1 - fy) + bottom * fy
        }
    }

    /// `crop_resize` in its iOS15 form (`roi` `[N, 1, 4 or 5, 1, 1]`, output
    /// `[N, B or 1, C, h, w]`) and its iOS17 form (`boxes` `[N, 4]`,
    /// `box_indices`, output `[N, C, h, w]`).
    private static func cropResize(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank == 4 else { throw context.invalid("x has rank \(x.rank); 4 is required") }
        let height = try context.int("target_height", 1), width = try context.int("target_width", 1)
        guard height > 0, width > 0 else { throw context.invalid("target_height and target_width must be positive") }
        let normalized = try context.bool("normalized_coordinates", false)
        let scale = Double(try context.float("spatial_scale", 1))
        let boxMode = try context.string("box_coordinate_mode", "CORNERS_HEIGHT_FIRST")
        guard ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"].contains(boxMode) else {
            throw context.unsupported("box_coordinate_mode \"\(boxMode)\" is not one MIL defines")
        }
        let mode = try context.string("sampling_mode", "DEFAULT")
        guard ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"].contains(mode) else {
            throw context.unsupported("sampling_mode \"\(mode)\" is not one MIL defines")
        }
        let pad = Double(try context.float("pad_value", 0))
        let batch = x.shape[0], channels = x.shape[1], rows = x.shape[2], columns = x.shape[3]
        let boxes: PlanValue, indices: PlanValue?, count: Int, withIndex: Bool, outShape: [Int]
        if let roi = try context.optional("roi") {
            guard roi.rank == 5, roi.shape[2] == 4 || roi.shape[2] == 5 else { throw context.invalid("roi \(roi.shape) must be [N, 1, 4 or 5, 1, 1]") }
            boxes = roi; indices = nil; count = roi.shape[0]; withIndex = roi.shape[2] == 5
            // coremltools declares [N, B, C, h, w] for an indexed roi where its definition documents [N, 1, C, h, w].
            guard !withIndex || batch == 1 else {
                throw context.unsupported("roi with a batch index (5 coordinates) on a batch of \(batch) images is not supported")
            }
            outShape = [count, withIndex ? 1 : batch, channels, height, width]
        } else {
            boxes = try context.input("boxes")
            guard boxes.rank == 2, boxes.shape[1] == 4 else { throw context.invalid("boxes \(boxes.shape) must be [N, 4]") }
            indices = try context.optional("box_indices"); count = boxes.shape[0]; withIndex = true
            outShape = [count, channels, height, width]
        }
        let out = try context.output(outShape)
        let from = x.id, box = boxes.id, boxIsFloat = boxes.type.isFloat, stride = withIndex && indices == nil ? 5 : 4
        let indexID = indices?.id, indexIsFloat = indices?.type.isFloat ?? false, iOS17 = indices != nil || context.has("boxes")
        context.run(reads: [x, boxes] + (indices.map { [$0] } ?? []), writes: [out]) { buffers in
            let input = buffers.floats(from), target = buffers.floats(out)
            func value(_ i: Int) -> Double { boxIsFloat ? Double(buffers.floats(box)[i]) : Double(buffers.ints(box)[i]) }
            var written = 0
            for n in 0..<count {
                let base = n * stride + (stride == 5 ? 1 : 0)
                var images = Array(0..<batch)
                if stride == 5 { images = [Int(value(n * 5))] }
                if iOS17 {
                    if let indexID { images = [indexIsFloat ? Int(buffers.floats(indexID)[n]) : Int(buffers.ints(indexID)[n])] }
                    else { images = [n] }
                }
                let b = (0..<4).map { value(base + $0) }
                var (y0, x0, y1, x1): (Double, Double, Double, Double)
                switch boxMode {
                case "CORNERS_WIDTH_FIRST": (y0, x0, y1, x1) = (b[1], b[0], b[3], b[2])
                case "CENTER_SIZE_HEIGHT_FIRST": (y0, x0, y1, x1) = (b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2)
                case "CENTER_SIZE_WIDTH_FIRST": (y0, x0, y1, x1) = (b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2)
                default: (y0, x0, y1, x1) = (b[0], b[1], b[2], b[3])
                }
                let sy = (normalized ? Double(rows - 1) : 1) * scale, sx = (normalized ? Double(columns - 1) : 1) * scale
                let ys = grid(mode, y0 * sy, y1 * sy, height, rows), xs = grid(mode, x0 * sx, x1 * sx, width, columns)
                for image in images {
                    let source = min(max(image, 0), batch - 1)
                    for c in 0..<channels {
                        let plane = input + (source * channels + c) * rows * columns
                        for (i, y) in ys.enumerated() {
                            for (j, px) in xs.enumerated() {
                                guard let y, let px else { target[written + i * width + j] = Float(pad); continue }
                                let top = Double(plane[y.0 * columns + px.0]) * (1 - px.2) + Double(plane[y.0 * columns + px.1]) * px.2
                                let bottom = Double(plane[y.1 * columns + px.0]) * (1 - px.2) + Double(plane[y.1 * columns + px.1]) * px.2
                                target[written + i * width + j] = Float(top * (1 - y.2) + bottom * y.2)
                            }
                        }
                        written += height * width
                    }
                }
            }
        }
    }

    /// Source positions of `output` samples in the box `[start, end]` of an
    /// axis of `size` pixels under a `resize_bilinear` sampling mode:
    /// (low index, high index, weight of the high one); nil outside the image (the pad value).
    static func grid(_ mode: String, _ start: Double, _ end: Double, _ output: Int, _ size: Int) -> [(Int, Int, Double)?] {
        let length = end - start, n = Double(output)
        return (0..<output).map { index in
            let i = Double(index)
            var point: Double
            switch mode {
            case "STRICT_ALIGN_CORNERS", "ALIGN_CORNERS":
                point = output == 1 ? (mode == "ALIGN_CORNERS" ? start + length / 2 : start) : start + i * length / (n - 1)
            case "DEFAULT": point = start + i * length / n
            case "OFFSET_CORNERS": point = start + (i + 0.5) * length / n
            default: point = start + (i + 0.5) * length / n - 0.5
            }
            guard point >= 0, point <= Double(size - 1) else { return nil }
            let low = min(Int(point.rounded(.down)), size - 1), high = min(low + 1, size - 1)
            return (low, high, point - Double(low))
        }
    }
}

// MARK: Facts

extension SamplingOperations {
    /// `crop_resize`: `[N, B, C, height, width]` for the `roi` form (iOS15),
    /// `[N, C, height, width]` for the `boxes` form (iOS17), `N` the boxes.
    static let cropResizeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        let size = [context.int("target_height", 1), context.int("target_width", 1)]
        if let boxes = try context.optional("boxes") {
            return [ValueType(x.element, shape: [boxes.dimension(0), x.dimension(1)] + size)]
        }
        let roi = try context.input("roi")
        return [ValueType(x.element, shape: [roi.dimension(0), x.dimension(0), x.dimension(1)] + size)]
    }
}
