import ModelFeatures

/// `non_maximum_suppression`: per batch, boxes taken in descending order of
/// their best class score, each kept unless its intersection over union with
/// a box kept before is above `iou_threshold` (with `per_class_suppression`,
/// only boxes of the same best class suppress each other). iOS 15 takes
/// `[n, B, 4]` boxes and `[n, B, K]` scores, drops scores not above
/// `score_threshold` and returns the count of boxes kept too; iOS 17 takes
/// `[n, 4, B]` and `[n, K, B]` and returns its outputs that way. Unused rows
/// are zeros, their index -1; when no box passes, the best-scoring one is
/// kept (as Core ML does, per coremltools' reference).
enum DetectionOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "non_maximum_suppression": OperationDefinition(["boxes", "scores", "iou_threshold", "score_threshold", "max_boxes",
                                                        "per_class_suppression"]) { context throws(RuntimeError) in
            try suppression(context)
        }.withFacts(suppressionFacts),
    ]

    private static func suppression(_ context: OperationContext) throws(RuntimeError) {
        let boxes = try context.input("boxes"), scores = try context.input("scores")
        let boxesLast = context.op.outputs.count == 4
        guard boxes.rank == 3, scores.rank == 3, boxes.isFloat, scores.isFloat else { throw context.invalid("boxes and scores must be rank-3 floats") }
        let batches = boxes.shape[0], count = boxesLast ? boxes.shape[1] : boxes.shape[2]
        let classes = boxesLast ? scores.shape[2] : scores.shape[1]
        guard (boxesLast ? boxes.shape[2] : boxes.shape[1]) == 4, scores.shape[0] == batches, (boxesLast ? scores.shape[1] : scores.shape[2]) == count else {
            throw context.invalid("boxes \(boxes.shape) and scores \(scores.shape) do not match")
        }
        let iou = try context.float("iou_threshold", 0.5)
        let scoreThreshold: Float? = boxesLast ? try context.float("score_threshold", -.infinity) : nil
        let limit = try context.int("max_boxes", 1), perClass = try context.bool("per_class_suppression", false)
        guard limit >= 0 else { throw context.invalid("max_boxes \(limit)") }
        let outBoxes = try context.output(boxesLast ? [batches, limit, 4] : [batches, 4, limit])
        let outScores = try context.output(boxesLast ? [batches, limit, classes] : [batches, classes, limit])
        let outIndices = try context.output([batches, limit], type: .int32)
        let outCount = boxesLast ? try context.output([batches], type: .int32) : nil
        let boxesID = boxes.id, scoresID = scores.id
        let writes = [outBoxes, outScores, outIndices] + (outCount.map { [$0] } ?? [])
        context.run(reads: [boxes, scores], writes: writes) { buffers in
            let b = buffers.floats(boxesID), s = buffers.floats(scoresID)
            // Element (box i, coordinate or class k) of batch n, in either layout.
            func box(_ n: Int, _ i: Int, _ k: Int) -> Float { boxesLast ? b[(n * count + i) * 4 + k] : b[(n * 4 + k) * count + i] }
            func score(_ n: Int, _ i: Int, _ k: Int) -> Float { boxesLast ? s[(n * count + i) * classes + k] : s[(n * classes + k) * count + i] }
            for n in 0..<batches {
                var best = [Float](repeating: -.infinity, count: count), label = [Int](repeating: 0, count: count)
                for i in 0..<count {
                    for k in 0..<classes where score(n, i, k) > best[i] { best[i] = score(n, i, k); label[i] = k }
                }
                let order = (0..<count).sorted { best[$0] != best[$1] ? best[$0] > best[$1] : $0 < $1 }
                var kept: [Int] = []
                for i in order where kept.count < limit {
                    if let threshold = scoreThreshold, !(best[i] > threshold) { continue }
                    let suppressed = kept.contains { j in (!perClass || label[j] == label[i]) && overlap(n, i, j, box) > iou }
                    if !suppressed { kept.append(i) }
                }
                if kept.isEmpty, limit > 0, let first = order.first { kept = [first] }
                for slot in 0..<limit {
                    let index = slot < kept.count ? kept[slot] : -1
                    for k in 0..<4 {
                        let value = index >= 0 ? box(n, index, k) : 0
                        buffers.floats(outBoxes)[boxesLast ? (n * limit + slot) * 4 + k : (n * 4 + k) * limit + slot] = value
                    }
                    for k in 0..<classes {
                        let value = index >= 0 ? score(n, index, k) : 0
                        buffers.floats(outScores)[boxesLast ? (n * limit + slot) * classes + k : (n * classes + k) * limit + slot] = value
                    }
                    buffers.ints(outIndices)[n * limit + slot] = Int32(index)
                }
                if let outCount { buffers.ints(outCount)[n] = Int32(kept.count) }
            }
        }
    }

    /// Intersection over union of boxes `i` and `j` (center x, center y,
    /// width, height), with the corners `x ∓ w/2`, `y ∓ h/2` as they come:
    /// a box of negative width or height intersects none (its IoU is 0, or
    /// NaN when the union is 0 too, which suppresses nothing). This is
    /// coremltools' own reference (test_nms_cpu's `_compute_iou_matrix`) and
    /// torchvision's `nms`, whose unordered corners the converter turns into
    /// such boxes; putting the corners in order would make them real boxes.
    private static func overlap(_ n: Int, _ i: Int, _ j: Int, _ box: (Int, Int, Int) -> Float) -> Float {
        func edges(_ index: Int) -> (left: Float, top: Float, right: Float, bottom: Float, area: Float) {
            let x = box(n, index, 0), y = box(n, index, 1), w = box(n, index, 2), h = box(n, index, 3)
            return (x - 0.5 * w, y - 0.5 * h, x + 0.5 * w, y + 0.5 * h, w * h)
        }
        let a = edges(i), c = edges(j)
        let width = max(0, min(a.right, c.right) - max(a.left, c.left)), height = max(0, min(a.bottom, c.bottom) - max(a.top, c.top))
        let intersection = width * height
        return intersection / (a.area + c.area - intersection)
    }
}

// MARK: Facts

extension DetectionOperations {
    /// `non_maximum_suppression`, `n` the kept boxes' count (`max_boxes`):
    /// with four outputs (iOS15) boxes `[B, n, 4]`, scores `[B, n, C]`, int32
    /// indices `[B, n]` and counts `[B]`; with three (iOS17, boxes last)
    /// `[B, 4, n]`, `[B, C, n]` and `[B, n]`.
    static let suppressionFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let boxes = try context.input("boxes"), scores = try context.input("scores")
        let batch = boxes.dimension(0) ?? scores.dimension(0)
        let kept = context.has("max_boxes") ? context.constant("max_boxes")?.scalar.map { Int($0) } : 1
        guard context.op.outputs.count == 4 else {
            return [ValueType(boxes.element, shape: [batch, 4, kept]), ValueType(scores.element, shape: [batch, scores.dimension(1), kept]),
                    ValueType(.int32, shape: [batch, kept])]
        }
        return [ValueType(boxes.element, shape: [batch, kept, 4]), ValueType(scores.element, shape: [batch, kept, scores.dimension(-1)]),
                ValueType(.int32, shape: [batch, kept]), ValueType(.int32, shape: [batch])]
    }
}
