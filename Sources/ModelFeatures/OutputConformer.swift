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
