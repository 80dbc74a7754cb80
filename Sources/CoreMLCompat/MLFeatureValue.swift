import Foundation
import ImageDecoding
import ModelFeatures

/// Core ML's pixel buffer type: on Linux, modelc's 8-bit `PixelBuffer`
/// (BGRA, RGBA, ARGB, RGB or gray, any bytes per row).
public typealias CVPixelBuffer = PixelBuffer

/// The kind of a feature, with Apple's raw values.
public enum MLFeatureType: Int, Sendable {
    case invalid = 0, int64, double, string, image, multiArray, dictionary, sequence, state
}

/// One value of a model's input or output (Core ML's `MLFeatureValue`).
public final class MLFeatureValue: Sendable, CustomStringConvertible {
    /// The value in modelc's terms; `nil` for an undefined value.
    public let value: FeatureValue?

    public init(int64: Int64) { value = .int64(int64) }
    public init(double: Double) { value = .double(double) }
    public init(string: String) { value = .string(string) }
    public init(multiArray: MLMultiArray) { value = .multiArray(multiArray.multiArray) }
    public init(pixelBuffer: CVPixelBuffer) { value = .image(pixelBuffer) }

    /// A dictionary of `String` or `Int64` keys to numbers.
    ///
    /// - Throws: `MLModelError` (`.featureType`) for other keys.
    public init(dictionary: [AnyHashable: NSNumber]) throws {
        let strings = dictionary.compactMap { entry in (entry.key.base as? String).map { ($0, entry.value.doubleValue) } }
        let integers = dictionary.compactMap { entry in Self.integer(entry.key.base).map { ($0, entry.value.doubleValue) } }
        if strings.count == dictionary.count {
            value = .dictionary(.strings(Dictionary(strings, uniquingKeysWith: { first, _ in first })))
        } else if integers.count == dictionary.count {
            value = .dictionary(.int64s(Dictionary(integers, uniquingKeysWith: { first, _ in first })))
        } else {
            throw MLModelError(.featureType, "dictionary keys must be all strings or all integers")
        }
    }

    /// An undefined value of `type` (an optional input left out).
    public init(undefined type: MLFeatureType) { value = nil }

    /// Wraps a value in modelc's terms.
    public init(_ value: FeatureValue) { self.value = value }

    private static func integer(_ key: Any) -> Int64? {
        switch key {
        case let number as Int64: number
        case let number as Int: Int64(number)
        case let number as Int32: Int64(number)
        default: nil
        }
    }

    public var type: MLFeatureType {
        switch value {
        case nil: .invalid
        case .int64: .int64
        case .double: .double
        case .string: .string
        case .image: .image
        case .multiArray: .multiArray
        case .dictionary: .dictionary
        case .sequence: .sequence
        }
    }

    public var isUndefined: Bool { value == nil }

    /// The number (an int64 is converted; other kinds give 0, as Core ML).
    public var int64Value: Int64 {
        switch value {
        case .int64(let number): number
        case .double(let number): Int64(exactly: number.rounded(.towardZero)) ?? 0
        default: 0
        }
    }

    public var doubleValue: Double { value?.doubleValue ?? 0 }
    public var stringValue: String { value?.stringValue ?? "" }

    public var multiArrayValue: MLMultiArray? { value?.multiArrayValue.map(MLMultiArray.init) }

    public var imageBufferValue: CVPixelBuffer? {
        if case .image(let buffer)? = value { buffer } else { nil }
    }

    /// A dictionary's entries (keys `String` or `Int64`).
    public var dictionaryValue: [AnyHashable: NSNumber] {
        switch value?.dictionaryValue {
        case .strings(let entries)?:
            Dictionary(uniqueKeysWithValues: entries.map { (AnyHashable($0.key), NSNumber(value: $0.value)) })
        case .int64s(let entries)?:
            Dictionary(uniqueKeysWithValues: entries.map { (AnyHashable($0.key), NSNumber(value: $0.value)) })
        case nil:
            [:]
        }
    }

    public var description: String {
        guard let value else { return "MLFeatureValue(undefined)" }
        return "MLFeatureValue(\(FeatureJSON.text(value)))"
    }
}

/// Named feature values: a model's inputs or outputs (Core ML's `MLFeatureProvider`).
public protocol MLFeatureProvider {
    var featureNames: Set<String> { get }
    func featureValue(for featureName: String) -> MLFeatureValue?
}

/// Feature values held in a dictionary (Core ML's `MLDictionaryFeatureProvider`).
public final class MLDictionaryFeatureProvider: MLFeatureProvider, Sendable {
    public let dictionary: [String: MLFeatureValue]

    /// Values as `MLFeatureValue`s, or numbers, strings, `MLMultiArray`s,
    /// pixel buffers and `[String or Int: NSNumber]` dictionaries, converted.
    ///
    /// - Throws: `MLModelError` (`.featureType`) naming a value of another kind.
    public init(dictionary: [String: Any]) throws {
        var values: [String: MLFeatureValue] = [:]
        for (name, value) in dictionary {
            values[name] = try Self.featureValue(value, name: name)
        }
        self.dictionary = values
    }

    init(values: [String: MLFeatureValue]) {
        dictionary = values
    }

    public var featureNames: Set<String> { Set(dictionary.keys) }

    public func featureValue(for featureName: String) -> MLFeatureValue? { dictionary[featureName] }

    public subscript(featureName: String) -> MLFeatureValue? { dictionary[featureName] }

    private static func featureValue(_ value: Any, name: String) throws -> MLFeatureValue {
        switch value {
        case let feature as MLFeatureValue: return feature
        case let array as MLMultiArray: return MLFeatureValue(multiArray: array)
        case let buffer as CVPixelBuffer: return MLFeatureValue(pixelBuffer: buffer)
        case let text as String: return MLFeatureValue(string: text)
        case let number as Int: return MLFeatureValue(int64: Int64(number))
        case let number as Int64: return MLFeatureValue(int64: number)
        case let number as Double: return MLFeatureValue(double: number)
        case let number as Float: return MLFeatureValue(double: Double(number))
        case let number as NSNumber: return MLFeatureValue(double: number.doubleValue)
        case let entries as [AnyHashable: NSNumber]: return try MLFeatureValue(dictionary: entries)
        default:
            throw MLModelError(.featureType, "feature \"\(name)\": \(type(of: value)) is not a feature value")
        }
    }
}
