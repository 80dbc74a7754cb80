import FaceDetection
import ImageDecoding
import ModelFeatures
import ModelRuntime

/// Why an image request could not be made or performed. Each case names the
/// model, image, input or label at fault; `description` is one line.
public enum ImageRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The model has no image input.
    case notAnImageModel(model: String, inputs: [String])
    /// The image input asked for is not one of the model's image inputs.
    case noSuchImageInput(model: String, name: String, imageInputs: [String])
    /// The model needs inputs other than the image, and none were given.
    case missingOtherInputs(model: String, inputs: [String])
    /// The image could not be read, decoded, cropped or scaled.
    case image(ImageError)
    /// The model could not be opened (through the cache) or the prediction failed.
    case model(ModelError)
    /// A synchronous `perform` was asked of a model that comes through a cache.
    case cachedModelNeedsAsync(model: String)
    /// A label the classifier does not have.
    case unknownLabel(label: String, model: String, labels: [String])
    /// The face detector could not be opened, or failed.
    case faces(FaceDetectionError)

    public var description: String {
        switch self {
        case .notAnImageModel(let model, let inputs):
            "\(model): the model takes no image (its inputs: \(Self.list(inputs)))"
        case .noSuchImageInput(let model, let name, let imageInputs):
            "\(model): no image input \"\(name)\" (its image inputs: \(Self.list(imageInputs)))"
        case .missingOtherInputs(let model, let inputs):
            "\(model): the model also needs \(Self.list(inputs)); give them as additional inputs"
        case .image(let error):
            error.description
        case .model(let error):
            error.description
        case .cachedModelNeedsAsync(let model):
            "\(model): the model comes through a cache; perform its requests with the async perform"
        case .unknownLabel(let label, let model, let labels):
            "\(model): no label \"\(label)\" (its labels: \(Self.list(labels)))"
        case .faces(let error):
            error.description
        }
    }

    private static func list(_ names: [String]) -> String {
        names.isEmpty ? "none" : names.map { "\"\($0)\"" }.joined(separator: ", ")
    }
}
