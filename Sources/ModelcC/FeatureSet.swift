#if canImport(Glibc)
import Glibc
#endif
import ImageDecoding
import ModelFeatures
import ModelSpec

/// The element types of arrays crossing the interface (`MODELC_FLOAT32`, …).
enum ElementType: Int32 {
    case float32 = 1, float16 = 2, float64 = 3, int32 = 4, int64 = 5

    init?(_ type: MultiArray.DataType) {
        switch type {
        case .float32: self = .float32
        case .float16: self = .float16
        case .float64: self = .float64
        case .int32: self = .int32
        }
    }

    /// The multi-array type; `nil` for int64, which Core ML's multi-arrays do not hold.
    var dataType: MultiArray.DataType? {
        switch self {
        case .float32: .float32
        case .float16: .float16
        case .float64: .float64
        case .int32: .int32
        case .int64: nil
        }
    }
}

/// The kinds of values crossing the interface (`MODELC_KIND_DOUBLE`, …).
enum ValueKind: Int32 {
    case double = 1, int64 = 2, string = 3, array = 4, image = 5
    case stringDictionary = 6, int64Dictionary = 7, stringSequence = 8, int64Sequence = 9, strings = 10
}

/// Pixel layouts crossing the interface (`MODELC_PIXELS_RGB`, …).
enum PixelLayout: Int32 {
    case rgb = 1, rgba = 2, bgra = 3, argb = 4, gray = 5

    init(_ format: PixelBuffer.PixelFormat) {
        switch format {
        case .rgb: self = .rgb
        case .rgba: self = .rgba
        case .bgra: self = .bgra
        case .argb: self = .argb
        case .gray: self = .gray
        }
    }

    var format: PixelBuffer.PixelFormat {
        switch self {
        case .rgb: .rgb
        case .rgba: .rgba
        case .bgra: .bgra
        case .argb: .argb
        case .gray: .gray
        }
    }
}

/// A set of named values behind a `modelc_features` handle: inputs a caller
/// adds, or outputs (or one row's error) the interface hands back, each
/// output kept in C memory the caller reads through pointers until it frees
/// the set.
final class FeatureSet {
    /// What an input entry holds before a model reads it.
    enum Input {
        case value(FeatureValue)
        /// An encoded image file (JPEG, PNG, …), decoded for the model's declared size.
        case encodedImage([UInt8])
    }

    private(set) var inputs: [(name: String, value: Input)] = []
    private(set) var outputs: [ExportedValue] = []
    /// For one row of a batch that failed: its status and message.
    private(set) var failure: Failure?
    private(set) var failureMessage: UnsafeMutablePointer<CChar>?

    init() {}

    init(outputs values: [String: FeatureValue]) {
        outputs = values.sorted { $0.key < $1.key }.map { ExportedValue(name: $0.key, value: $0.value) }
    }

    init(columns: [String: FeatureColumn]) {
        outputs = columns.sorted { $0.key < $1.key }.map { ExportedValue(name: $0.key, column: $0.value) }
    }

    init(failure: Failure) {
        self.failure = failure
        failureMessage = strdup(failure.message)
    }

    deinit { free(failureMessage) }

    /// Adds an input; a name given twice keeps the last value.
    func add(_ name: String, _ value: Input) {
        inputs.removeAll { $0.name == name }
        inputs.append((name, value))
    }

    /// The inputs as a model reads them: encoded images decoded, upright,
    /// center-cropped and scaled to the input's declared size (as Vision's default).
    func values(for model: ModelDescriptions) throws(Failure) -> [String: FeatureValue] {
        var values: [String: FeatureValue] = [:]
        for (name, input) in inputs {
            switch input {
            case .value(let value):
                values[name] = value
            case .encodedImage(let bytes):
                guard case .image(let type)? = model.inputs[name]?.type else {
                    throw Failure(.badInput, "input \"\(name)\" is an encoded image, but the model has no image input of that name")
                }
                let decoder = ImageDecoder(pixelFormat: type.space.isGrayscale ? .gray : .rgb)
                let fitting = type.width > 0 && type.height > 0
                    ? ImageFitting(width: Int(type.width), height: Int(type.height), cropAndScale: .centerCrop) : nil
                do {
                    values[name] = .image(try decoder.decode(bytes: bytes, name: "input \"\(name)\"", fitting: fitting))
                } catch {
                    throw Failure(.badImage, error.description)
                }
            }
        }
        return values
    }
}

/// The inputs of a model by name, for reading a `FeatureSet`.
struct ModelDescriptions: Sendable {
    let inputs: [String: FeatureDescription]

    init(_ summary: ModelSummary) {
        inputs = Dictionary(summary.inputs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

/// One output copied into C memory: what `modelc_features_get_*` point into.
final class ExportedValue {
    let name: UnsafeMutablePointer<CChar>?
    let kind: ValueKind
    var number: Double = 0
    var integer: Int64 = 0
    var elementType: ElementType = .float64
    var pixelLayout: PixelLayout = .rgb
    var width: Int64 = 0
    var height: Int64 = 0
    var bytesPerRow: Int64 = 0
    /// Array dimensions.
    var shape: UnsafeMutableBufferPointer<Int64> = .allocate(capacity: 0)
    /// Array elements, image pixels.
    var bytes: UnsafeMutableRawBufferPointer = .allocate(byteCount: 0, alignment: 64)
    /// A string, string keys or elements, string column.
    var strings: UnsafeMutableBufferPointer<UnsafePointer<CChar>?> = .allocate(capacity: 0)
    /// Int64 keys or elements.
    var int64s: UnsafeMutableBufferPointer<Int64> = .allocate(capacity: 0)
    /// Dictionary values.
    var doubles: UnsafeMutableBufferPointer<Double> = .allocate(capacity: 0)

    init(name: String, value: FeatureValue) {
        self.name = strdup(name)
        switch value {
        case .double(let number):
            kind = .double
            self.number = number
        case .int64(let number):
            kind = .int64
            integer = number
        case .string(let string):
            kind = .string
            setStrings([string])
        case .multiArray(let array):
            kind = .array
            setArray(array)
        case .image(let image):
            kind = .image
            pixelLayout = PixelLayout(image.pixelFormat)
            width = Int64(image.width)
            height = Int64(image.height)
            bytesPerRow = Int64(image.bytesPerRow)
            setBytes(image.bytes)
        case .dictionary(.strings(let entries)):
            kind = .stringDictionary
            let sorted = entries.sorted { $0.key < $1.key }
            setStrings(sorted.map(\.key))
            setDoubles(sorted.map(\.value))
        case .dictionary(.int64s(let entries)):
            kind = .int64Dictionary
            let sorted = entries.sorted { $0.key < $1.key }
            setInt64s(sorted.map(\.key))
            setDoubles(sorted.map(\.value))
        case .sequence(.strings(let values)):
            kind = .stringSequence
            setStrings(values)
        case .sequence(.int64s(let values)):
            kind = .int64Sequence
            setInt64s(values)
        }
    }

    init(name: String, column: FeatureColumn) {
        self.name = strdup(name)
        switch column {
        case .array(let array):
            kind = .array
            setArray(array)
        case .int64s(let values):
            kind = .array
            elementType = .int64
            shape = .allocate(capacity: 1)
            shape[0] = Int64(values.count)
            bytes = .allocate(byteCount: max(1, values.count * 8), alignment: 64)
            values.withUnsafeBytes { bytes.copyMemory(from: $0) }
        case .strings(let values):
            kind = .strings
            setStrings(values)
        }
    }

    private func setArray(_ array: MultiArray) {
        elementType = ElementType(array.dataType) ?? .float64
        shape = .allocate(capacity: array.shape.count)
        for (index, dimension) in array.shape.enumerated() { shape[index] = Int64(dimension) }
        array.withUnsafeBytes { source in
            bytes = .allocate(byteCount: max(1, source.count), alignment: 64)
            bytes.copyMemory(from: source)
        }
    }

    private func setBytes(_ source: [UInt8]) {
        bytes = .allocate(byteCount: max(1, source.count), alignment: 64)
        source.withUnsafeBytes { bytes.copyMemory(from: $0) }
    }

    private func setStrings(_ values: [String]) {
        strings = .allocate(capacity: values.count)
        for (index, value) in values.enumerated() { strings[index] = UnsafePointer(strdup(value)) }
    }

    private func setInt64s(_ values: [Int64]) {
        int64s = .allocate(capacity: values.count)
        _ = int64s.initialize(from: values)
    }

    private func setDoubles(_ values: [Double]) {
        doubles = .allocate(capacity: values.count)
        _ = doubles.initialize(from: values)
    }

    /// Entries of a dictionary, elements of a sequence or rows of a string column.
    var entryCount: Int { max(strings.count, int64s.count) }

    deinit {
        free(name)
        for string in strings { free(UnsafeMutablePointer(mutating: string)) }
        strings.deallocate()
        shape.deallocate()
        bytes.deallocate()
        int64s.deallocate()
        doubles.deallocate()
    }
}
