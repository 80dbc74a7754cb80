import Foundation
import ModelFeatures
import ModelSpec

/// Non-maximum suppression of axis-aligned boxes, the last stage of object
/// detection pipelines.
///
/// A box's score is its largest class confidence (its class the first with
/// that confidence). Boxes scoring below the confidence threshold are
/// dropped; the rest are visited by descending score, and a box is kept
/// unless its intersection over union with a box already kept (of the same
/// class, when suppressing per class) is greater than the IoU threshold.
/// Boxes are (centre x, centre y, width, height). The outputs are the kept
/// rows of both inputs, in visiting order, padded with zero rows when the
/// model declares a fixed number of rows. Threshold inputs, when the model
/// names them and they are given, override the model's parameters.
struct NonMaximumSuppressionEngine: PredictionEngine {
    let interface: ModelInterface
    let iouThreshold: Double
    let confidenceThreshold: Double
    let perClass: Bool
    let names: (confidence: String, coordinates: String, iou: String, threshold: String,
                confidenceOut: String, coordinatesOut: String)
    /// Rows to pad the outputs to, when the model declares a fixed shape.
    let fixedRows: Int?

    init(_ nms: NonMaximumSuppressionParameters, interface: ModelInterface) throws(RuntimeError) {
        self.interface = interface
        iouThreshold = nms.iouThreshold
        confidenceThreshold = nms.confidenceThreshold
        perClass = nms.perClass
        names = (nms.confidenceInputFeatureName, nms.coordinatesInputFeatureName,
                 nms.iouThresholdInputFeatureName, nms.confidenceThresholdInputFeatureName,
                 nms.confidenceOutputFeatureName, nms.coordinatesOutputFeatureName)
        for (role, name) in [("confidence input", names.confidence), ("coordinates input", names.coordinates),
                             ("confidence output", names.confidenceOut), ("coordinates output", names.coordinatesOut)]
        where name.isEmpty {
            throw .invalidParameters(model: interface.kind, detail: "the \(role) feature is not named")
        }
        let declared = interface.outputs.first { $0.name == nms.coordinatesOutputFeatureName }
        if case .multiArray(let type)? = declared?.type, type.shapeFlexibility == nil, let rows = type.shape.first, rows > 0 {
            fixedRows = Int(rows)
        } else {
            fixedRows = nil
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard case .multiArray(let confidence)? = inputs[names.confidence] else {
            throw .missingInput(feature: names.confidence, expected: "a boxes × classes multi-array")
        }
        guard case .multiArray(let coordinates)? = inputs[names.coordinates] else {
            throw .missingInput(feature: names.coordinates, expected: "a boxes × 4 multi-array")
        }
        let classes = confidence.shape.last ?? 0
        let boxes = classes > 0 ? confidence.count / classes : 0
        guard coordinates.count == boxes * 4 else {
            throw .invalidValue(feature: names.coordinates, detail: "\(coordinates.count / 4) boxes, \(names.confidence) has \(boxes)")
        }
        let iouLimit = names.iou.isEmpty ? iouThreshold : (inputs[names.iou]?.doubleValue ?? iouThreshold)
        let scoreLimit = names.threshold.isEmpty ? confidenceThreshold : (inputs[names.threshold]?.doubleValue ?? confidenceThreshold)
        let scores = confidence.doubles
        let boxValues = coordinates.doubles

        var candidates: [(index: Int, score: Double, label: Int)] = []
        for box in 0..<boxes {
            var label = 0
            for cls in 1..<max(classes, 1) where scores[box * classes + cls] > scores[box * classes + label] { label = cls }
            let score = scores[box * classes + label]
            if score >= scoreLimit { candidates.append((box, score, label)) }
        }
        candidates.sort { $0.score > $1.score || ($0.score == $1.score && $0.index < $1.index) }
        var kept: [(index: Int, label: Int)] = []
        for candidate in candidates {
            let suppressed = kept.contains { other in
                (!perClass || other.label == candidate.label)
                    && Self.iou(boxValues, candidate.index, other.index) > iouLimit
            }
            if !suppressed { kept.append((candidate.index, candidate.label)) }
        }
        if let fixedRows, kept.count > fixedRows { kept.removeLast(kept.count - fixedRows) }
        let rows = fixedRows ?? kept.count
        var keptScores = [Double](repeating: 0, count: rows * classes)
        var keptBoxes = [Double](repeating: 0, count: rows * 4)
        for (row, box) in kept.enumerated() {
            for cls in 0..<classes { keptScores[row * classes + cls] = scores[box.index * classes + cls] }
            for axis in 0..<4 { keptBoxes[row * 4 + axis] = boxValues[box.index * 4 + axis] }
        }
        return [
            names.confidenceOut: .multiArray(MultiArray(keptScores, shape: [rows, classes])),
            names.coordinatesOut: .multiArray(MultiArray(keptBoxes, shape: [rows, 4])),
        ]
    }

    /// Intersection over union of boxes `a` and `b` given as centre and size.
    static func iou(_ boxes: [Double], _ a: Int, _ b: Int) -> Double {
        func edges(_ box: Int) -> (Double, Double, Double, Double) {
            let x = boxes[box * 4], y = boxes[box * 4 + 1], width = boxes[box * 4 + 2], height = boxes[box * 4 + 3]
            return (x - width / 2, y - height / 2, x + width / 2, y + height / 2)
        }
        let (ax0, ay0, ax1, ay1) = edges(a)
        let (bx0, by0, bx1, by1) = edges(b)
        let overlap = max(0, min(ax1, bx1) - max(ax0, bx0)) * max(0, min(ay1, by1) - max(ay0, by0))
        let union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - overlap
        return union > 0 ? overlap / union : 0
    }
}
