import ModelSpec

/// Gives an engine's output the type its description declares, as Core ML
/// does: a one-element array as a double, a double as a one-element array,
/// multi-arrays in the declared element type and shape.
public enum OutputConformer {
    /// `value` as the output `description` declares it; unchanged when no
    /// lossless conversion applies.
    public static func conform(_ value: FeatureValue, to description: FeatureDescription) -> FeatureValue {
        switch (description.type, value) {
        case (.double, .multiArray(let array)) where array.count == 1:
            return .double(array[0])
        case (.double, .int64(let number)):
            return .double(Double(number))
        case (.int64, .double(let number)):
            return Int64(exactly: number).map(FeatureValue.int64) ?? value
        case (.multiArray(let type), .double(let number)):
            let dataType = MultiArray.DataType(schemaName: type.dataType) ?? .float64
            let shape = type.shapeFlexibility == nil && type.shape.reduce(1, *) == 1 && !type.shape.isEmpty
                ? type.shape.map(Int.init) : [1]
            return .multiArray(MultiArray([number], shape: shape, dataType: dataType))
        case (.dictionary("int64KeyType"), .multiArray(let array)):
            // A vector given where a sparse one is declared: its non-zero elements by index.
            var entries: [Int64: Double] = [:]
            for index in 0..<array.count where array[index] != 0 { entries[Int64(index)] = array[index] }
            return .dictionary(.int64s(entries))
        case (.image(let type), .multiArray(let array)):
            return image(array, type).map(FeatureValue.image) ?? value
        case (.multiArray(let type), .multiArray(let array)):
            var result = array
            if let dataType = MultiArray.DataType(schemaName: type.dataType), dataType != array.dataType {
                result = result.converted(to: dataType)
            }
            let declared = type.shape.map(Int.init)
            if type.shapeFlexibility == nil, !declared.isEmpty, declared != result.shape,
               let reshaped = result.reshaped(declared) {
                result = reshaped
            }
            return .multiArray(result)
        default:
            return value
        }
    }

    /// An image output computed as channels × height × width values (leading
    /// ones allowed): 8-bit pixels, values rounded and clamped to 0…255, RGB
    /// (from BGR when declared so) or gray; `nil` when the shape does not fit.
    /// A `GRAYSCALE_FLOAT16` output is not 8-bit: Core ML gives its values as
    /// half-float pixels, unrounded and unclamped, so it stays the array the
    /// engine computed (`nil` here).
    static func image(_ array: MultiArray, _ type: ImageType) -> PixelBuffer? {
        guard type.space != .grayscaleFloat16 else { return nil }
        let gray = type.space.isGrayscale
        let shape = array.shape.drop { $0 == 1 }.count >= 2 ? Array(array.shape.drop { $0 == 1 }) : array.shape
        let channels = shape.count >= 3 ? shape[shape.count - 3] : 1
        guard shape.count >= 2, channels == (gray ? 1 : 3) else { return nil }
        let height = shape[shape.count - 2], width = shape[shape.count - 1]
        guard width > 0, height > 0, array.count == channels * height * width else { return nil }
        let values = array.doubles
        let plane = width * height
        var bytes = [UInt8](repeating: 0, count: plane * channels)
        let order = type.space == .bgr ? [2, 1, 0] : [0, 1, 2]
        for pixel in 0..<plane {
            for channel in 0..<channels {
                let value = values[order[channel] * plane + pixel]
                bytes[pixel * channels + channel] = value.isNaN ? 0 : UInt8(max(0, min(255, value.rounded())))
            }
        }
        return PixelBuffer(width: width, height: height, pixelFormat: gray ? .gray : .rgb, bytes: bytes)
    }

    /// Every output named in `descriptions` conformed; other values dropped.
    public static func conform(_ outputs: [String: FeatureValue], to descriptions: [FeatureDescription]) -> [String: FeatureValue] {
        var result: [String: FeatureValue] = [:]
        for description in descriptions {
            if let value = outputs[description.name] {
                result[description.name] = conform(value, to: description)
            }
        }
        return result
    }
}
