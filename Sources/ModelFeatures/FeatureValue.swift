/// One input or output value of a model (Core ML's `MLFeatureValue`).
public enum FeatureValue: Sendable, Equatable {
    case double(Double)
    case int64(Int64)
    case string(String)
    case multiArray(MultiArray)
    case image(PixelBuffer)
    case dictionary(FeatureDictionary)
    case sequence(FeatureSequence)

    /// What kind of value this is, as the schema names feature types
    /// (`doubleType`, `multiArrayType`, …).
    public var typeName: String {
        switch self {
        case .double: "doubleType"
        case .int64: "int64Type"
        case .string: "stringType"
        case .multiArray: "multiArrayType"
        case .image: "imageType"
        case .dictionary: "dictionaryType"
        case .sequence: "sequenceType"
        }
    }

    /// The value as a double, for a double or an int64.
    public var doubleValue: Double? {
        switch self {
        case .double(let value): value
        case .int64(let value): Double(value)
        default: nil
        }
    }

    public var multiArrayValue: MultiArray? {
        if case .multiArray(let array) = self { array } else { nil }
    }

    public var stringValue: String? {
        if case .string(let string) = self { string } else { nil }
    }

    public var dictionaryValue: FeatureDictionary? {
        if case .dictionary(let dictionary) = self { dictionary } else { nil }
    }
}

/// A dictionary feature: string or int64 keys to doubles (class
/// probabilities, bags of words).
public enum FeatureDictionary: Sendable, Equatable {
    case strings([String: Double])
    case int64s([Int64: Double])

    public var count: Int {
        switch self {
        case .strings(let entries): entries.count
        case .int64s(let entries): entries.count
        }
    }

    /// `string` or `int64`.
    public var keyKind: String {
        switch self {
        case .strings: "string"
        case .int64s: "int64"
        }
    }
}

/// A sequence feature: strings or int64s.
public enum FeatureSequence: Sendable, Equatable {
    case strings([String])
    case int64s([Int64])

    public var count: Int {
        switch self {
        case .strings(let values): values.count
        case .int64s(let values): values.count
        }
    }
}

/// A class label: the string or int64 a classifier predicts.
public enum ClassLabel: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case int64(Int64)

    /// The label as a feature value.
    public var featureValue: FeatureValue {
        switch self {
        case .string(let label): .string(label)
        case .int64(let label): .int64(label)
        }
    }

    public var description: String {
        switch self {
        case .string(let label): label
        case .int64(let label): String(label)
        }
    }
}
