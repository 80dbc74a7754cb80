import ImageDecoding

extension NormalizedRect {
    /// The area of the intersection over the area of the union with `other`; 0 when either is empty.
    public func intersectionOverUnion(_ other: NormalizedRect) -> Double {
        let overlapWidth = max(0, min(x + width, other.x + other.width) - max(x, other.x))
        let overlapHeight = max(0, min(y + height, other.y + other.height) - max(y, other.y))
        let overlap = overlapWidth * overlapHeight
        let union = width * height + other.width * other.height - overlap
        return union > 0 ? overlap / union : 0
    }
}

extension RecognizedObjectObservation {
    /// Objects left after suppressing, across labels, every one that
    /// overlaps a more confident one kept with an IoU greater than
    /// `iouThreshold` (equal confidences in their given order). For a
    /// detector that takes no IoU threshold input: its own stage has already
    /// suppressed at its threshold, so this can only remove more.
    public static func suppressing(_ objects: [RecognizedObjectObservation], iouThreshold: Double) -> [RecognizedObjectObservation] {
        let order = objects.indices.sorted {
            objects[$0].confidence != objects[$1].confidence ? objects[$0].confidence > objects[$1].confidence : $0 < $1
        }
        var kept: [Int] = []
        for index in order where !kept.contains(where: {
            objects[$0].boundingBox.intersectionOverUnion(objects[index].boundingBox) > iouThreshold
        }) {
            kept.append(index)
        }
        return kept.map { objects[$0] }
    }
}

extension ImageModel {
    /// The names of the detector's threshold inputs, when it takes them
    /// (Create ML's `iouThreshold` and `confidenceThreshold`, doubles).
    public var thresholdInputs: (iou: String?, confidence: String?) {
        func input(_ name: String) -> String? {
            summary.inputs.first { $0.name == name && $0.type == .double }?.name
        }
        return (input("iouThreshold"), input("confidenceThreshold"))
    }
}
