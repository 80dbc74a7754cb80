/// Why a model could not be prepared or a prediction could not be made.
///
/// Each case names the feature, model or layer at fault; `description` reads
/// as one line for a person.
public enum RuntimeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A required input was not given.
    case missingInput(feature: String, expected: String)
    /// An input's value is of another type than the model takes.
    case wrongType(feature: String, expected: String, got: String)
    /// A multi-array input's shape is not one the model takes.
    case wrongShape(feature: String, expected: String, got: [Int])
    /// An image input's size is not one the model takes.
    case wrongImageSize(feature: String, expected: String, width: Int, height: Int)
    /// A value the model cannot use (an unknown category, a key of the wrong kind, NaN where none is allowed).
    case invalidValue(feature: String, detail: String)
    /// The model is of a kind modelc cannot run, refused when loading.
    case unsupportedModel(kind: String, reason: String)
    /// A network holds a layer or operation of a kind modelc does not run; refused when loading.
    case unsupportedLayer(layer: String, kind: String, reason: String)
    /// The model's parameters contradict each other (sizes, indices, labels).
    case invalidParameters(model: String, detail: String)
    /// The model could not be opened.
    case cannotOpen(path: String, detail: String)
    /// A function was named that the ML program does not have.
    case unknownFunction(name: String, available: [String])
    /// The prediction was stopped through its `PredictionCancellation` (its client gone, its deadline past).
    case cancelled

    public var description: String {
        switch self {
        case .missingInput(let feature, let expected):
            "input \"\(feature)\" is missing (expected \(expected))"
        case .wrongType(let feature, let expected, let got):
            "input \"\(feature)\" is \(got), expected \(expected)"
        case .wrongShape(let feature, let expected, let got):
            "input \"\(feature)\" has shape \(shapeText(got)), expected \(expected)"
        case .wrongImageSize(let feature, let expected, let width, let height):
            "input \"\(feature)\" is a \(width)×\(height) image, expected \(expected)"
        case .invalidValue(let feature, let detail):
            "feature \"\(feature)\": \(detail)"
        case .unsupportedModel(let kind, let reason):
            "cannot run \(kind) models: \(reason)"
        case .unsupportedLayer(let layer, let kind, let reason):
            "layer \"\(layer)\" (\(kind)): \(reason)"
        case .invalidParameters(let model, let detail):
            "\(model): \(detail)"
        case .cannotOpen(let path, let detail):
            "\(path): \(detail)"
        case .cancelled:
            "the prediction was cancelled"
        case .unknownFunction(let name, let available):
            available.isEmpty ? "the model has no function \"\(name)\" (it is not a multi-function program)"
                : "the model has no function \"\(name)\" (it has \(available.joined(separator: ", ")))"
        }
    }
}

/// `[1, 3, 224, 224]` as `1 × 3 × 224 × 224` (`scalar` for rank 0).
package func shapeText(_ shape: [Int]) -> String {
    shape.isEmpty ? "scalar" : shape.map(String.init).joined(separator: " × ")
}
