import Foundation
import ModelFeatures
import ModelSpec

/// Scales a vector to unit L1, L2 or max norm; a zero vector stays zero.
struct NormalizerEngine: PredictionEngine {
    let interface: ModelInterface
    let norm: NormalizerParameters.Norm

    init(_ normalizer: NormalizerParameters, interface: ModelInterface) {
        self.interface = interface
        norm = normalizer.norm
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        let size = switch norm {
        case .l1: x.reduce(0) { $0 + abs($1) }
        case .l2: x.reduce(0) { $0 + $1 * $1 }.squareRoot()
        case .lMax: x.reduce(0) { max($0, abs($1)) }
        }
        let y = size > 0 ? x.map { $0 / size } : x
        return vectorOutput(y, interface)
    }
}

/// `(x + shift) × scale`, element by element.
struct ScalerEngine: PredictionEngine {
    let interface: ModelInterface
    let shift: [Double]
    let scale: [Double]

    init(_ scaler: ScalerParameters, interface: ModelInterface) {
        self.interface = interface
        shift = scaler.shiftValue
        scale = scaler.scaleValue
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        // One shift or scale value applies to every element.
        for (name, values) in [("shiftValue", shift), ("scaleValue", scale)] where values.count > 1 && values.count != x.count {
            throw .invalidValue(feature: interface.inputs.first?.name ?? "input",
                                detail: "\(x.count) values, the scaler's \(name) has \(values.count)")
        }
        let y = x.indices.map { index in
            let shifted = x[index] + (shift.isEmpty ? 0 : shift[shift.count == 1 ? 0 : index])
            return shifted * (scale.isEmpty ? 1 : scale[scale.count == 1 ? 0 : index])
        }
        return vectorOutput(y, interface)
    }
}

/// One-hot encoding of a string or int64 category, dense or sparse.
struct OneHotEncoderEngine: PredictionEngine {
    let interface: ModelInterface
    let categories: [ClassLabel: Int]
    let count: Int
    let sparse: Bool
    let ignoreUnknown: Bool

    init(_ encoder: OneHotEncoderParameters, interface: ModelInterface) {
        self.interface = interface
        let list = encoder.categories
        var categories: [ClassLabel: Int] = [:]
        for index in 0..<list.count where categories[list.label(at: index)] == nil {
            categories[list.label(at: index)] = index
        }
        self.categories = categories
        count = list.count
        sparse = encoder.outputSparse
        ignoreUnknown = encoder.ignoreUnknown
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard let description = interface.inputs.first, let value = inputs[description.name] else { return [:] }
        let keys: [ClassLabel]
        switch value {
        case .string(let string): keys = [.string(string)]
        case .int64(let number): keys = [.int64(number)]
        case .double(let number): keys = [.int64(Int64(exactly: number) ?? .min)]
        case .multiArray(let array): keys = array.doubles.map { .int64(Int64(exactly: $0) ?? .min) }
        default: throw .wrongType(feature: description.name, expected: "a string or an integer", got: value.kindText)
        }
        var dense = [Double](repeating: 0, count: count * keys.count)
        var hot: [Int64: Double] = [:]
        for (position, key) in keys.enumerated() {
            guard let index = categories[key] else {
                if ignoreUnknown { continue }
                throw .invalidValue(feature: description.name, detail: "unknown category \"\(key)\"; the encoder knows \(count)")
            }
            dense[position * count + index] = 1
            hot[Int64(position * count + index)] = 1
        }
        guard let name = interface.outputs.first?.name else { return [:] }
        if sparse { return [name: .dictionary(.int64s(hot))] }
        return [name: .multiArray(MultiArray(dense, shape: keys.count == 1 ? [count] : [keys.count, count]))]
    }
}

/// Replaces a missing value (NaN unless the model names another) with the
/// imputed one: a number, a string, an array element by element, or a
/// dictionary; an absent optional input becomes the imputed value whole.
struct ImputerEngine: PredictionEngine {
    let interface: ModelInterface
    let replaced: ImputerParameters.ReplaceValue
    let imputed: ImputerParameters.ImputedValue

    init(_ imputer: ImputerParameters, interface: ModelInterface) throws(RuntimeError) {
        self.interface = interface
        replaced = imputer.replaceValue ?? .double(.nan)
        guard let imputed = imputer.imputedValue else {
            throw .invalidParameters(model: interface.kind, detail: "no imputed value")
        }
        self.imputed = imputed
    }

    private func isMissing(_ number: Double) -> Bool {
        switch replaced {
        case .double(let value): value.isNaN ? number.isNaN : number == value
        case .int64(let value): number == Double(value)
        case .string: false
        }
    }

    private var whole: FeatureValue {
        switch imputed {
        case .double(let value): .double(value)
        case .int64(let value): .int64(value)
        case .string(let value): .string(value)
        case .doubles(let values): .multiArray(MultiArray(values, shape: [values.count]))
        case .int64s(let values): .multiArray(MultiArray(values.map(Double.init), shape: [values.count]))
        case .stringDictionary(let entries): .dictionary(.strings(entries))
        case .int64Dictionary(let entries): .dictionary(.int64s(entries))
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard let input = interface.inputs.first, let name = interface.outputs.first?.name else { return [:] }
        guard let value = inputs[input.name] else { return [name: whole] }
        let output: FeatureValue
        switch (value, imputed) {
        case (.double(let number), .double(let fill)): output = .double(isMissing(number) ? fill : number)
        case (.double(let number), .int64(let fill)): output = .double(isMissing(number) ? Double(fill) : number)
        case (.int64(let number), .int64(let fill)): output = .int64(isMissing(Double(number)) ? fill : number)
        case (.string(let string), .string(let fill)):
            if case .string(let missing) = replaced, string == missing { output = .string(fill) } else { output = value }
        case (.multiArray(let array), _):
            var result = array.converted(to: .float64)
            for index in 0..<result.count where isMissing(result[index]) {
                switch imputed {
                case .double(let fill): result[index] = fill
                case .int64(let fill): result[index] = Double(fill)
                case .doubles(let fills) where index < fills.count: result[index] = fills[index]
                case .int64s(let fills) where index < fills.count: result[index] = Double(fills[index])
                default:
                    throw .invalidValue(feature: input.name, detail: "element \(index) is missing and the imputer has no value for it")
                }
            }
            output = .multiArray(result)
        default:
            output = value
        }
        return [name: output]
    }
}

/// A dictionary to a dense array: each known key's value at its index.
struct DictVectorizerEngine: PredictionEngine {
    let interface: ModelInterface
    let stringIndex: [String: Int]
    let int64Index: [Int64: Int]
    let count: Int

    init(_ vectorizer: DictVectorizerParameters, interface: ModelInterface) {
        self.interface = interface
        switch vectorizer.keys {
        case .strings(let names):
            stringIndex = Dictionary(names.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
            int64Index = [:]
            count = names.count
        case .int64s(let keys):
            int64Index = Dictionary(keys.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
            stringIndex = [:]
            count = keys.count
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard let input = interface.inputs.first, let value = inputs[input.name] else { return [:] }
        var y = [Double](repeating: 0, count: count)
        // A vectorizer of int64 keys behind a string-keyed input (what coremltools writes for
        // scikit-learn's DictVectorizer fitted on int keys) reads each key as the integer it spells;
        // the other way round, an int64 key as its decimal text.
        switch value {
        case .dictionary(.strings(let entries)):
            for (key, number) in entries {
                if let index = stringIndex[key] ?? Int64(key).flatMap({ int64Index[$0] }) { y[index] = number }
            }
        case .dictionary(.int64s(let entries)):
            for (key, number) in entries { if let index = int64Index[key] ?? stringIndex[String(key)] { y[index] = number } }
        default:
            throw .wrongType(feature: input.name, expected: "a dictionary", got: value.kindText)
        }
        return vectorOutput(y, interface)
    }
}

/// Concatenates named inputs (numbers, arrays, int64-keyed dictionaries as
/// sparse vectors) into one array.
struct FeatureVectorizerEngine: PredictionEngine {
    let interface: ModelInterface
    let columns: [(name: String, dimensions: Int)]

    init(_ vectorizer: FeatureVectorizerParameters, interface: ModelInterface) {
        self.interface = interface
        columns = vectorizer.inputList.map { ($0.inputColumn, Int(clamping: $0.inputDimensions)) }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        var y: [Double] = []
        for column in columns {
            guard let value = inputs[column.name] else {
                throw .missingInput(feature: column.name, expected: "\(column.dimensions) values")
            }
            var part: [Double]
            switch value {
            case .double(let number): part = [number]
            case .int64(let number): part = [Double(number)]
            case .multiArray(let array): part = array.doubles
            case .dictionary(.int64s(let entries)):
                part = [Double](repeating: 0, count: column.dimensions)
                for (key, number) in entries where key >= 0 && key < Int64(column.dimensions) { part[Int(key)] = number }
            default:
                throw .wrongType(feature: column.name, expected: "numbers", got: value.kindText)
            }
            guard part.count == column.dimensions else {
                throw .invalidValue(feature: column.name, detail: "\(part.count) values, the vectorizer takes \(column.dimensions)")
            }
            y += part
        }
        return vectorOutput(y, interface)
    }
}

/// Picks elements of an array by index.
struct ArrayFeatureExtractorEngine: PredictionEngine {
    let interface: ModelInterface
    let indices: [Int]

    init(_ extractor: ArrayFeatureExtractorParameters, interface: ModelInterface) {
        self.interface = interface
        indices = extractor.extractIndex.map { Int(clamping: $0) }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        if let bad = indices.first(where: { $0 >= x.count }) {
            throw .invalidValue(feature: interface.inputs.first?.name ?? "input", detail: "index \(bad) is past the \(x.count) elements")
        }
        let y = indices.map { x[$0] }
        guard let name = interface.outputs.first?.name else { return [:] }
        return [name: y.count == 1 ? .double(y[0]) : .multiArray(MultiArray(y, shape: [y.count]))]
    }
}

/// Maps a string to an int64 or an int64 to a string, with a default for
/// values the map does not hold.
struct CategoricalMappingEngine: PredictionEngine {
    let interface: ModelInterface
    let toInt64: [String: Int64]
    let toString: [Int64: String]
    let defaultValue: FeatureValue?

    init(_ mapping: CategoricalMappingParameters, interface: ModelInterface) {
        self.interface = interface
        switch mapping.mapping {
        case .stringToInt64(let map)?: (toInt64, toString) = (map, [:])
        case .int64ToString(let map)?: (toInt64, toString) = ([:], map)
        case nil: (toInt64, toString) = ([:], [:])
        }
        defaultValue = mapping.valueOnUnknown.map { ClassLabel($0).featureValue }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard let input = interface.inputs.first, let value = inputs[input.name],
              let name = interface.outputs.first?.name else { return [:] }
        let mapped: FeatureValue?
        switch value {
        case .string(let key): mapped = toInt64[key].map(FeatureValue.int64)
        case .int64(let key): mapped = toString[key].map(FeatureValue.string)
        case .double(let number): mapped = Int64(exactly: number).flatMap { toString[$0] }.map(FeatureValue.string)
        default: throw .wrongType(feature: input.name, expected: "a string or an int64", got: value.kindText)
        }
        guard let result = mapped ?? defaultValue else {
            throw .invalidValue(feature: input.name, detail: "\(value.kindText) that the mapping does not hold, and it has no default")
        }
        return [name: result]
    }
}

/// Gives each input back as the output in the same position.
struct IdentityEngine: PredictionEngine {
    let interface: ModelInterface

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        var outputs: [String: FeatureValue] = [:]
        for (input, output) in zip(interface.inputs, interface.outputs) {
            if let value = inputs[input.name] { outputs[output.name] = value }
        }
        return outputs
    }
}

/// One array under the model's first output name.
func vectorOutput(_ values: [Double], _ interface: ModelInterface) -> [String: FeatureValue] {
    guard let name = interface.outputs.first?.name else { return [:] }
    return [name: .multiArray(MultiArray(values, shape: [values.count]))]
}

extension ClassLabel {
    /// A default label or value on unknown as the label it names.
    init(_ value: CategoryValue) {
        switch value {
        case .string(let label): self = .string(label)
        case .int64(let label): self = .int64(label)
        }
    }
}
