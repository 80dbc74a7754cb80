import Foundation
import ImageDecoding
import ModelFeatures
import ModelSpec

/// Turns what a person or a script writes into a model's input values:
/// `NAME=VALUE` arguments and JSON objects, as `modelc predict` takes them.
public struct PredictionInputs: Sendable {
    /// The model's inputs, by name.
    public let descriptions: [String: FeatureDescription]
    /// Where relative paths (`@file.npy`, image paths) are resolved.
    public let baseDirectory: String

    public init(model: Model, baseDirectory: String = FileManager.default.currentDirectoryPath) {
        descriptions = Dictionary(model.summary.inputs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.baseDirectory = baseDirectory
    }

    /// One `NAME=VALUE` argument. VALUE is JSON (a number, an array, an
    /// object, a quoted string), `@PATH` for a `.npy` file (or an image
    /// file for an image input), or plain text for a string input.
    ///
    /// - Throws: `RuntimeError` naming the input and what is wrong.
    public func parse(argument: String) throws(RuntimeError) -> (String, FeatureValue) {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
            throw .invalidValue(feature: argument, detail: "expected NAME=VALUE")
        }
        let name = String(argument[..<equals])
        let text = String(argument[argument.index(after: equals)...])
        let type = try declaredType(of: name)
        if text.hasPrefix("@") { return (name, try fileValue(String(text.dropFirst()), type: type, feature: name)) }
        if case .string = type, (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) as? String == nil {
            return (name, .string(text))
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed) else {
            throw .invalidValue(feature: name, detail: "\"\(text)\" is neither JSON nor @PATH")
        }
        return (name, try value(json: json, type: type, feature: name))
    }

    /// A JSON object mapping input names to values (one line of `--inputs`).
    public func parse(object: Any) throws(RuntimeError) -> [String: FeatureValue] {
        guard let object = object as? [String: Any] else {
            throw .invalidValue(feature: "inputs", detail: "expected a JSON object mapping input names to values")
        }
        var inputs: [String: FeatureValue] = [:]
        for (name, json) in object {
            let type = try declaredType(of: name)
            if let text = json as? String, text.hasPrefix("@"), !isString(type) {
                inputs[name] = try fileValue(String(text.dropFirst()), type: type, feature: name)
            } else {
                inputs[name] = try value(json: json, type: type, feature: name)
            }
        }
        return inputs
    }

    private func isString(_ type: FeatureType) -> Bool {
        if case .string = type { true } else { false }
    }

    private func declaredType(of name: String) throws(RuntimeError) -> FeatureType {
        guard let description = descriptions[name] else {
            let known = descriptions.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw .invalidValue(feature: name, detail: "the model has no such input (its inputs: \(known))")
        }
        return description.type
    }

    private func value(json: Any, type: FeatureType, feature: String) throws(RuntimeError) -> FeatureValue {
        try FeatureJSON.value(from: json, as: type, feature: feature, image: { path throws(RuntimeError) in
            guard case .image(let imageType) = type else {
                throw .invalidValue(feature: feature, detail: "\(path): not an image input")
            }
            return try decodeImage(path, type: imageType, feature: feature)
        })
    }

    /// The image file at `path`, upright, center-cropped and scaled to the
    /// input's declared size (as Vision's default), in its colour space.
    private func decodeImage(_ path: String, type: ImageType, feature: String) throws(RuntimeError) -> PixelBuffer {
        let resolved = path.hasPrefix("/") ? path : baseDirectory + "/" + path
        let decoder = ImageDecoder(pixelFormat: type.space.isGrayscale ? .gray : .rgb)
        let fitting = type.width > 0 && type.height > 0
            ? ImageFitting(width: Int(type.width), height: Int(type.height), cropAndScale: .centerCrop) : nil
        do {
            return try decoder.decode(file: resolved, fitting: fitting)
        } catch {
            throw .invalidValue(feature: feature, detail: error.description)
        }
    }

    private func fileValue(_ path: String, type: FeatureType, feature: String) throws(RuntimeError) -> FeatureValue {
        let resolved = path.hasPrefix("/") ? path : baseDirectory + "/" + path
        if case .image(let imageType) = type {
            return .image(try decodeImage(path, type: imageType, feature: feature))
        }
        guard let data = FileManager.default.contents(atPath: resolved) else {
            throw .invalidValue(feature: feature, detail: "\(path): cannot read the file")
        }
        if path.hasSuffix(".npy") {
            let array = try NumPyArray.read(data, source: path, feature: feature)
            if case .multiArray(let declared) = type, let wanted = MultiArray.DataType(schemaName: declared.dataType) {
                return .multiArray(array.converted(to: wanted))
            }
            return .multiArray(array)
        }
        guard let json = try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed) else {
            throw .invalidValue(feature: feature, detail: "\(path): neither a .npy file nor JSON")
        }
        return try value(json: json, type: type, feature: feature)
    }
}
