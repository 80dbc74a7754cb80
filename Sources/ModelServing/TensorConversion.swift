import Foundation
import ImageDecoding
import ModelFeatures
import ModelSpec

/// Maps protocol tensors to a model's feature values and back.
public enum TensorConversion {
    /// The protocol datatype and shape a feature is described with in model
    /// metadata; nil for features the protocol cannot carry (dictionary inputs).
    public static func metadata(for type: FeatureType, classLabelCount: Int) -> (TensorDataType, [Int])? {
        switch type {
        case .int64: (.int64, [1])
        case .double: (.fp64, [1])
        case .string: (.bytes, [1])
        case .image: (.bytes, [1])
        case .multiArray(let array), .state(let array):
            (datatype(forSchemaName: array.dataType) ?? .fp32, array.shape.isEmpty ? [-1] : array.shape.map { Int($0) })
        case .dictionary: (.fp64, [classLabelCount > 0 ? classLabelCount : -1])
        case .sequence(let sequence): (sequence.elementType == "stringType" ? .bytes : .int64, [-1])
        case .unset: nil
        }
    }

    /// The protocol datatype of a multi-array schema type.
    public static func datatype(forSchemaName name: String) -> TensorDataType? {
        switch name {
        case "FLOAT32": .fp32
        case "FLOAT16": .fp16
        case "DOUBLE": .fp64
        case "INT32": .int32
        case "INT8": .int8
        default: nil
        }
    }

    /// The feature value a tensor gives an input.
    ///
    /// - Throws: `RequestError.badRequest` naming the input and what does not
    ///   fit (the datatype, the element count, an image that cannot be decoded).
    public static func featureValue(_ tensor: InferTensor, for description: FeatureDescription) throws(RequestError) -> FeatureValue {
        let name = tensor.name
        func wrongType(_ expected: String) -> RequestError {
            .badRequest("input '\(name)': datatype \(tensor.datatype.rawValue), the model takes \(expected)")
        }
        func single() throws(RequestError) {
            guard tensor.elementCount == 1 else {
                throw .badRequest("input '\(name)': shape \(tensor.shape) holds \(tensor.elementCount) elements, the model takes one")
            }
        }
        switch description.type {
        case .int64:
            guard [.int64, .int32, .int16, .int8, .uint8, .uint16, .uint32].contains(tensor.datatype) else { throw wrongType("INT64") }
            try single()
            return .int64(tensor.int64(at: 0))
        case .double:
            guard [.fp64, .fp32, .fp16].contains(tensor.datatype) else { throw wrongType("FP64") }
            try single()
            return .double(tensor.double(at: 0))
        case .string:
            guard tensor.datatype == .bytes, case .bytes(let elements) = tensor.data else { throw wrongType("BYTES") }
            try single()
            return .string(String(decoding: elements[0], as: UTF8.self))
        case .image(let image):
            return .image(try pixelBuffer(tensor, image: image))
        case .multiArray(let declared):
            guard let wanted = datatype(forSchemaName: declared.dataType), let arrayType = MultiArray.DataType(schemaName: declared.dataType) else {
                throw .badRequest("input '\(name)': the model's \(declared.dataType) arrays cannot be given over the protocol")
            }
            guard tensor.datatype == wanted, case .raw(let bytes) = tensor.data else { throw wrongType(wanted.rawValue) }
            var array = MultiArray(shape: tensor.shape, dataType: arrayType)
            array.withUnsafeMutableBytes { target in
                bytes.withUnsafeBytes { source in target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(target.count))) }
            }
            return .multiArray(array)
        case .dictionary, .sequence, .state, .unset:
            throw .badRequest("input '\(name)': \(description.type.schemaName) inputs cannot be given over the protocol")
        }
    }

    /// An image input from an encoded image (BYTES: JPEG, PNG, …; base64 text
    /// in JSON) or from UINT8 pixels of shape [height, width, channels].
    static func pixelBuffer(_ tensor: InferTensor, image: ImageType) throws(RequestError) -> PixelBuffer {
        let name = tensor.name
        let gray = image.space.isGrayscale
        switch (tensor.datatype, tensor.data) {
        case (.bytes, .bytes(let elements)):
            guard elements.count == 1 else {
                throw .badRequest("input '\(name)': \(elements.count) BYTES elements, the model takes one encoded image")
            }
            var encoded = elements[0]
            if let text = String(validating: encoded, as: UTF8.self),
               let decoded = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                encoded = Array(decoded)
            }
            let decoder = ImageDecoder(pixelFormat: gray ? .gray : .rgb)
            let fitting = image.width > 0 && image.height > 0
                ? ImageFitting(width: Int(image.width), height: Int(image.height), cropAndScale: .centerCrop) : nil
            do {
                return try decoder.decode(bytes: encoded, name: name, fitting: fitting)
            } catch {
                throw .badRequest("input '\(name)': \(error.description)")
            }
        case (.uint8, .raw(let bytes)):
            let channels = gray ? 1 : 3
            guard tensor.shape.count == 3, tensor.shape[2] == channels,
                  let buffer = PixelBuffer(width: tensor.shape[1], height: tensor.shape[0], pixelFormat: gray ? .gray : .rgb, bytes: bytes)
            else {
                throw .badRequest("input '\(name)': UINT8 pixels need shape [height, width, \(channels)], got \(tensor.shape)")
            }
            return buffer
        default:
            throw .badRequest("input '\(name)': datatype \(tensor.datatype.rawValue), the model takes an image as BYTES (encoded) or UINT8 [height, width, channels]")
        }
    }

    /// The tensor an output value goes out as. Dictionaries (class
    /// probabilities) become FP64 in the order of `labels` (the model's class
    /// labels), or of their sorted keys when it has none.
    public static func tensor(name: String, value: FeatureValue, labels: [String]) -> InferTensor {
        switch value {
        case .double(let number):
            return numbers(name, .fp64, [1], [number])
        case .int64(let number):
            var writer = RawTensorWriter(datatype: .int64, capacity: 1)
            writer.appendInteger(number)
            return InferTensor(name: name, datatype: .int64, shape: [1], data: .raw(writer.bytes))
        case .string(let text):
            return InferTensor(name: name, datatype: .bytes, shape: [1], data: .bytes([Array(text.utf8)]))
        case .multiArray(let array):
            let datatype = datatype(forSchemaName: array.dataType.schemaName) ?? .fp32
            var bytes = [UInt8](repeating: 0, count: array.count * array.dataType.size)
            array.withUnsafeBytes { source in bytes.withUnsafeMutableBytes { $0.copyMemory(from: source) } }
            return InferTensor(name: name, datatype: datatype, shape: array.shape, data: .raw(bytes))
        case .image(let image):
            let channels = image.pixelFormat.bytesPerPixel
            var bytes: [UInt8] = []
            bytes.reserveCapacity(image.width * image.height * channels)
            for row in 0..<image.height {
                let start = row * image.bytesPerRow
                bytes.append(contentsOf: image.bytes[start..<(start + image.width * channels)])
            }
            return InferTensor(name: name, datatype: .uint8, shape: [image.height, image.width, channels], data: .raw(bytes))
        case .dictionary(let dictionary):
            let entries = dictionaryEntries(dictionary, labels: labels)
            return numbers(name, .fp64, [entries.count], entries.map(\.score))
        case .sequence(.strings(let strings)):
            return InferTensor(name: name, datatype: .bytes, shape: [strings.count], data: .bytes(strings.map { Array($0.utf8) }))
        case .sequence(.int64s(let values)):
            var writer = RawTensorWriter(datatype: .int64, capacity: values.count)
            for value in values { writer.appendInteger(value) }
            return InferTensor(name: name, datatype: .int64, shape: [values.count], data: .raw(writer.bytes))
        }
    }

    /// The top `count` classes of an output as Triton's classification
    /// extension gives them: BYTES `"score:index:label"` (`"score:index"`
    /// when there is no label), highest score first.
    public static func classification(name: String, value: FeatureValue, labels: [String], count: Int) -> InferTensor? {
        var entries: [(score: Double, index: Int, label: String?)]
        switch value {
        case .dictionary(let dictionary):
            entries = dictionaryEntries(dictionary, labels: labels).enumerated().map { ($0.element.score, $0.offset, $0.element.label) }
        case .multiArray(let array):
            let scores = array.doubles
            entries = scores.enumerated().map { ($0.element, $0.offset, scores.count == labels.count ? labels[$0.offset] : nil) }
        case .double(let number):
            entries = [(number, 0, labels.first)]
        default:
            return nil
        }
        entries.sort { $0.score > $1.score || ($0.score == $1.score && $0.index < $1.index) }
        let top = entries.prefix(count).map { entry in
            Array((String(format: "%f:%d", entry.score, entry.index) + (entry.label.map { ":" + $0 } ?? "")).utf8)
        }
        return InferTensor(name: name, datatype: .bytes, shape: [top.count], data: .bytes(top))
    }

    /// A dictionary's entries in the model's label order (labels missing from
    /// it after, sorted), or sorted by key when the model has no labels.
    static func dictionaryEntries(_ dictionary: FeatureDictionary, labels: [String]) -> [(label: String, score: Double)] {
        let pairs: [(String, Double)] = switch dictionary {
        case .strings(let entries): entries.map { ($0.key, $0.value) }
        case .int64s(let entries): entries.sorted { $0.key < $1.key }.map { (String($0.key), $0.value) }
        }
        let scores = Dictionary(pairs, uniquingKeysWith: { first, _ in first })
        var ordered: [(label: String, score: Double)] = labels.compactMap { label in scores[label].map { (label, $0) } }
        let known = Set(labels)
        let rest = pairs.filter { !known.contains($0.0) }
        ordered += (labels.isEmpty && isIntegerKeyed(dictionary) ? rest : rest.sorted { $0.0 < $1.0 }).map { (label: $0.0, score: $0.1) }
        return ordered
    }

    private static func isIntegerKeyed(_ dictionary: FeatureDictionary) -> Bool {
        if case .int64s = dictionary { true } else { false }
    }

    private static func numbers(_ name: String, _ datatype: TensorDataType, _ shape: [Int], _ values: [Double]) -> InferTensor {
        var writer = RawTensorWriter(datatype: datatype, capacity: values.count)
        for value in values { _ = writer.append(value) }
        return InferTensor(name: name, datatype: datatype, shape: shape, data: .raw(writer.bytes))
    }
}
