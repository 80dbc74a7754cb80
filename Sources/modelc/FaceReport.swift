import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures

/// What `detect --faces` and `classify --regions faces` found in one image.
struct FacesFound: Sendable {
    var imageWidth: Int
    var imageHeight: Int
    /// Each face, with the classifier's result on it for `classify --regions faces`.
    var faces: [(face: FaceObservation, classified: ImageRequestResult?)]

    /// Finds the faces in `path` and, given `classify`, runs it on each face's
    /// region (the image decoded once, upright).
    static func find(in path: String, request: FaceRectanglesRequest, minimumConfidence: Float,
                     classify: ImageRequest?) throws(ImageRequestError) -> FacesFound {
        let upright = try ImageRequestHandler(file: path).uprightImage()
        let handler = ImageRequestHandler(pixelBuffer: upright)
        let faces = try handler.perform(request).filter { $0.confidence >= minimumConfidence }
        guard var template = classify else {
            return FacesFound(imageWidth: upright.width, imageHeight: upright.height, faces: faces.map { ($0, nil) })
        }
        let requests = faces.map { face in
            template.regionOfInterest = face.regionOfInterest
            return template
        }
        let results = requests.isEmpty ? [] : try handler.perform(requests)
        return FacesFound(imageWidth: upright.width, imageHeight: upright.height,
                          faces: zip(faces, results).map { ($0, $1) })
    }

    func pixels(_ rect: NormalizedRect) -> (x: Double, y: Double, width: Double, height: Double) {
        rect.topLeftPixels(width: imageWidth, height: imageHeight)
    }

    /// Draws each face's box, labelled with the classifier's top label when there is one.
    func drawn(image path: String, into directory: String) throws(ImageRequestError) {
        let boxes = faces.enumerated().map { index, found in
            let top = found.classified?.classifications.first
            let label = top.map { "\($0.identifier) \(String(format: "%.2f", $0.confidence))" }
                ?? "face \(String(format: "%.2f", found.face.confidence))"
            return DrawnBox(rect: found.face.boundingBox, label: label, color: DrawnBox.color(index))
        }
        try DetectCommand.drawBoxes(boxes, image: path, into: directory)
    }

    /// One block (or JSON line) for the image.
    func text(image: String, json: Bool, top: Int?, report: ClassificationReport?) -> String {
        json ? jsonLine(image: image, top: top, minimumConfidence: report?.options.minimumConfidence ?? 0) + "\n"
            : plain(image: image, top: top ?? 5, report: report)
    }

    private func jsonLine(image: String, top: Int?, minimumConfidence: Float) -> String {
        let items = faces.map { found in
            var fields = [
                "\"confidence\": \(ImageOptions.number(found.face.confidence))",
                "\"boundingBox\": \(ImageOptions.json(found.face.boundingBox))",
                "\"pixels\": \(ImageOptions.json(pixels(found.face.boundingBox)))",
                "\"roll\": \(found.face.roll.map { ImageOptions.number($0) } ?? "null")",
                "\"yaw\": \(found.face.yaw.map { ImageOptions.number($0) } ?? "null")",
            ]
            if let classified = found.classified {
                let observations: [String] = switch classified.observations {
                case .classifications(let all):
                    all.filter { $0.confidence >= minimumConfidence }.prefix(top ?? all.count).map {
                        "{\"identifier\": \(FeatureJSON.quoted($0.identifier)), \"confidence\": \(ImageOptions.number($0.confidence))}"
                    }
                case .featureValues(let values):
                    values.map { "{\"featureName\": \(FeatureJSON.quoted($0.featureName)), \"featureValue\": \(FeatureJSON.text($0.featureValue))}" }
                case .recognizedObjects(let objects):
                    objects.map {
                        "{\"label\": \(FeatureJSON.quoted($0.labels.first?.identifier ?? "")), \"confidence\": \(ImageOptions.number($0.confidence)), "
                            + "\"boundingBox\": \(ImageOptions.json($0.boundingBox))}"
                    }
                }
                fields.append("\"observations\": [\(observations.joined(separator: ", "))]")
            }
            return "{" + fields.joined(separator: ", ") + "}"
        }
        return "{\"image\": \(FeatureJSON.quoted(image)), \"width\": \(imageWidth), \"height\": \(imageHeight), "
            + "\"faces\": [\(items.joined(separator: ", "))]}"
    }

    private func plain(image: String, top: Int, report: ClassificationReport?) -> String {
        let count = faces.count == 1 ? "1 face" : "\(faces.count) faces"
        var lines = ["\(image) (\(imageWidth)×\(imageHeight)): \(count)"]
        for (number, found) in faces.enumerated() {
            let box = found.face.boundingBox
            var line = "  face \(number + 1)  " + String(format: "%.4f", found.face.confidence) + "  "
                + ImageOptions.text(pixels(box), digits: 1) + " px  (normalized "
                + ImageOptions.text((box.x, box.y, box.width, box.height), digits: 4) + ")"
            if let roll = found.face.roll, let yaw = found.face.yaw {
                line += "  roll \(String(format: "%.2f", roll)) yaw \(String(format: "%.2f", yaw))"
            }
            lines.append(line)
            if let classified = found.classified, let report {
                let shown = report.text(image: "", classified).split(separator: "\n", omittingEmptySubsequences: false)
                lines += shown.dropFirst().filter { !$0.isEmpty }.map { "  " + $0 }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
