import Foundation

// The JSON form of a summary, printed by `modelc inspect --json`. Keys are the
// schema's own names; keys that do not apply to a model are left out.

extension ModelSummary: Encodable {
    private enum Key: String, CodingKey {
        case format, specificationVersion, modelType, isUpdatable, inputs, outputs, states, trainingInputs
        case predictedFeatureName, predictedProbabilitiesName, metadata, classLabels
        case layers, weights, parameterCount, pipeline, functions, operations, blobWeights, weightFileProblems
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encodeIfPresent(format, forKey: .format)
        try container.encode(specificationVersion, forKey: .specificationVersion)
        try container.encodeIfPresent(modelType, forKey: .modelType)
        try container.encode(isUpdatable, forKey: .isUpdatable)
        try container.encode(inputs, forKey: .inputs)
        try container.encode(outputs, forKey: .outputs)
        if !states.isEmpty { try container.encode(states, forKey: .states) }
        if !trainingInputs.isEmpty { try container.encode(trainingInputs, forKey: .trainingInputs) }
        try container.encodeIfPresent(predictedFeatureName, forKey: .predictedFeatureName)
        try container.encodeIfPresent(predictedProbabilitiesName, forKey: .predictedProbabilitiesName)
        try container.encodeIfPresent(metadata, forKey: .metadata)
        try container.encodeIfPresent(classLabels, forKey: .classLabels)
        try container.encodeIfPresent(layers, forKey: .layers)
        try container.encodeIfPresent(weights, forKey: .weights)
        try container.encodeIfPresent(parameterCount, forKey: .parameterCount)
        try container.encodeIfPresent(pipeline, forKey: .pipeline)
        try container.encodeIfPresent(functions, forKey: .functions)
        try container.encodeIfPresent(operations, forKey: .operations)
        try container.encodeIfPresent(blobWeights, forKey: .blobWeights)
        if blobWeights != nil, !weightFileProblems.isEmpty { try container.encode(weightFileProblems, forKey: .weightFileProblems) }
    }

    /// The summary as pretty-printed JSON with sorted keys, ending in a newline.
    public func jsonText() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding plain strings, numbers and containers cannot fail.
        guard let data = try? encoder.encode(self) else { return "{}\n" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

extension FeatureDescription: Encodable {
    private enum Key: String, CodingKey {
        case name, shortDescription, isOptional, type
        case dataType, shape, enumeratedShapes, shapeRange, defaultValue
        case width, height, colorSpace, enumeratedSizes, imageSizeRange
        case keyType, elementType, sizeRange
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(name, forKey: .name)
        if !shortDescription.isEmpty { try container.encode(shortDescription, forKey: .shortDescription) }
        if isOptional { try container.encode(true, forKey: .isOptional) }
        try container.encode(type.schemaName, forKey: .type)
        switch type {
        case .multiArray(let array), .state(let array):
            try container.encode(array.dataType, forKey: .dataType)
            try container.encode(array.shape, forKey: .shape)
            switch array.shapeFlexibility {
            case .enumerated(let shapes): try container.encode(shapes, forKey: .enumeratedShapes)
            case .ranges(let ranges): try container.encode(ranges, forKey: .shapeRange)
            case nil: break
            }
            try container.encodeIfPresent(array.defaultValue, forKey: .defaultValue)
        case .image(let image):
            try container.encode(image.width, forKey: .width)
            try container.encode(image.height, forKey: .height)
            try container.encode(image.space.schemaName, forKey: .colorSpace)
            switch image.sizeFlexibility {
            case .enumerated(let sizes):
                try container.encode(sizes.map { [$0.width, $0.height] }, forKey: .enumeratedSizes)
            case .ranges(let width, let height):
                try container.encode(["width": width, "height": height], forKey: .imageSizeRange)
            case nil: break
            }
        case .dictionary(let keyType):
            try container.encode(keyType, forKey: .keyType)
        case .sequence(let sequence):
            try container.encode(sequence.elementType, forKey: .elementType)
            try container.encodeIfPresent(sequence.sizeRange, forKey: .sizeRange)
        case .int64, .double, .string, .unset:
            break
        }
    }
}

extension SizeRange: Encodable {
    /// Encoded as `[lower, upper]`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(Int64(clamping: lowerBound))
        try container.encode(upperBound)
    }
}

extension Metadata: Encodable {
    private enum Key: String, CodingKey { case shortDescription, author, license, versionString, userDefined }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        let fields: [(Key, String)] = [(.shortDescription, shortDescription), (.author, author),
                                       (.license, license), (.versionString, versionString)]
        for (key, value) in fields where !value.isEmpty {
            try container.encode(value, forKey: key)
        }
        if !userDefined.isEmpty { try container.encode(userDefined, forKey: .userDefined) }
    }
}

extension ClassLabels: Encodable {
    private enum Key: String, CodingKey { case kind, count, labels }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(kind, forKey: .kind)
        try container.encode(count, forKey: .count)
        switch self {
        case .strings(let labels): try container.encode(labels, forKey: .labels)
        case .int64s(let labels): try container.encode(labels, forKey: .labels)
        }
    }
}

extension Layer: Encodable {
    private enum Key: String, CodingKey { case name, kind, inputs, outputs, isUpdatable }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(name, forKey: .name)
        try container.encode(kind, forKey: .kind)
        try container.encode(inputs, forKey: .inputs)
        try container.encode(outputs, forKey: .outputs)
        if isUpdatable { try container.encode(true, forKey: .isUpdatable) }
    }
}

extension WeightTensor: Encodable {
    private enum Key: String, CodingKey { case layer, role, storage, count, bytes, quantizationBits }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(layer, forKey: .layer)
        try container.encode(role, forKey: .role)
        try container.encode(storage.rawValue, forKey: .storage)
        try container.encode(count, forKey: .count)
        try container.encode(bytes, forKey: .bytes)
        try container.encodeIfPresent(quantizationBits, forKey: .quantizationBits)
    }
}
