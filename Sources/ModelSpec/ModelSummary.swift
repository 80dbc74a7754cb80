/// What a Core ML model is, as plain values: its type, interface, metadata,
/// and the structure and weights of neural networks and ML programs.
///
/// Built by `ModelSummary(_:)` from a `ModelFile`; encodes to the JSON that
/// `modelc inspect --json` prints (keys are the schema's names).
public struct ModelSummary: Equatable, Sendable {
    public var format: ModelFile.Format?
    public var specificationVersion: Int
    /// The schema name of the model type (`neuralNetworkClassifier`,
    /// `pipeline`, `mlProgram`, …), or `nil` when none is set.
    public var modelType: String?
    public var isUpdatable: Bool
    public var inputs: [FeatureDescription]
    public var outputs: [FeatureDescription]
    public var states: [FeatureDescription]
    public var trainingInputs: [FeatureDescription]
    public var predictedFeatureName: String?
    public var predictedProbabilitiesName: String?
    public var metadata: Metadata?
    public var classLabels: ClassLabels?
    /// Neural networks: the layers in order.
    public var layers: [Layer]?
    /// Neural networks: every weight tensor, in layer order.
    public var weights: [WeightTensor]?
    /// Pipelines: the stages in order.
    public var pipeline: [ModelSummary]?
    /// ML programs: the functions.
    public var functions: [ProgramFunction]?
    /// ML programs: how many operations of each type, nested blocks included.
    public var operations: [String: Int]?
    /// ML programs: the constants stored in the weight file.
    public var blobWeights: [BlobWeight]?
    /// Multi-function ML programs (specification 9): each function's interface, in the description's order.
    public var functionInterfaces: [FunctionInterface] = []
    /// Multi-function ML programs: the function run when none is named.
    public var defaultFunctionName: String?

    /// Neural networks: the number of weight values across all tensors.
    public var parameterCount: Int? { weights.map { $0.reduce(0) { $0 + $1.count } } }

    /// Every weight file reference that cannot be used, pipeline stages
    /// included, as `NAME: problem` (the weight file missing or too short, a
    /// record out of range, a blob that does not hold its tensor's values).
    public var weightFileProblems: [String] {
        (blobWeights ?? []).compactMap { weight in weight.problem.map { "\(weight.name): \($0)" } }
            + (pipeline ?? []).flatMap(\.weightFileProblems)
    }
}

/// One input, output, state or training input of a model.
public struct FeatureDescription: Equatable, Sendable {
    public var name: String
    public var shortDescription: String
    public var isOptional: Bool
    public var type: FeatureType

    package init(name: String, shortDescription: String, isOptional: Bool, type: FeatureType) {
        self.name = name
        self.shortDescription = shortDescription
        self.isOptional = isOptional
        self.type = type
    }
}

/// The type of a feature, with everything Core ML records about it.
public enum FeatureType: Equatable, Sendable {
    case int64
    case double
    case string
    case image(ImageType)
    case multiArray(MultiArrayType)
    /// A dictionary keyed by `keyType` (`int64KeyType` or `stringKeyType`).
    case dictionary(keyType: String)
    case sequence(SequenceType)
    case state(MultiArrayType)
    /// No type set (the validator reports it).
    case unset

    /// The schema name of the type (`imageType`, `multiArrayType`, …).
    public var schemaName: String {
        switch self {
        case .int64: "int64Type"
        case .double: "doubleType"
        case .string: "stringType"
        case .image: "imageType"
        case .multiArray: "multiArrayType"
        case .dictionary: "dictionaryType"
        case .sequence: "sequenceType"
        case .state: "stateType"
        case .unset: "unset"
        }
    }
}

/// An image feature.
public struct ImageType: Equatable, Sendable {
    public var width: Int64
    public var height: Int64
    public var space: ImageColorSpace
    public var sizeFlexibility: SizeFlexibility?

    /// An image type whose color space is named as the schema names it (`RGB`, …).
    package init(width: Int64, height: Int64, colorSpace: String, sizeFlexibility: SizeFlexibility?) {
        self.width = width
        self.height = height
        space = ImageColorSpace(schemaName: colorSpace)
        self.sizeFlexibility = sizeFlexibility
    }

    public enum SizeFlexibility: Equatable, Sendable {
        /// Any of these (width, height) pairs.
        case enumerated([ImageSize])
        /// Width and height each within a range; an upper bound of -1 is unbounded.
        case ranges(width: SizeRange, height: SizeRange)
    }
}

/// An image feature's color space (`ImageFeatureType.ColorSpace`).
public enum ImageColorSpace: Equatable, Sendable {
    case rgb, bgr, grayscale, grayscaleFloat16
    /// `INVALID_COLOR_SPACE`, or a value the schema does not define, by its
    /// schema name (`unknown(7)`); the validator refuses both.
    case invalid(String)

    /// The color space the schema names `name` (`RGB`, `GRAYSCALE_FLOAT16`, …).
    public init(schemaName name: String) {
        self = switch name {
        case "RGB": .rgb
        case "BGR": .bgr
        case "GRAYSCALE": .grayscale
        case "GRAYSCALE_FLOAT16": .grayscaleFloat16
        default: .invalid(name)
        }
    }

    /// `RGB`, `BGR`, `GRAYSCALE`, `GRAYSCALE_FLOAT16`, or the invalid value's name.
    public var schemaName: String {
        switch self {
        case .rgb: "RGB"
        case .bgr: "BGR"
        case .grayscale: "GRAYSCALE"
        case .grayscaleFloat16: "GRAYSCALE_FLOAT16"
        case .invalid(let name): name
        }
    }

    /// One gray channel (`GRAYSCALE` or `GRAYSCALE_FLOAT16`), not three.
    public var isGrayscale: Bool { self == .grayscale || self == .grayscaleFloat16 }
}

public struct ImageSize: Equatable, Sendable {
    public var width: UInt64
    public var height: UInt64
}

/// An inclusive range of sizes; `upperBound == -1` means unbounded.
public struct SizeRange: Equatable, Sendable {
    public var lowerBound: UInt64
    public var upperBound: Int64
}

/// A multi-array (tensor) feature.
public struct MultiArrayType: Equatable, Sendable {
    /// `FLOAT32`, `DOUBLE`, `FLOAT16`, `INT32`, `INT8`, or `INVALID_ARRAY_DATA_TYPE`.
    public var dataType: String
    public var shape: [Int64]
    public var shapeFlexibility: ShapeFlexibility?
    /// The value every element of an optional input takes when a prediction leaves it out
    /// (`defaultOptionalValue`: an int, float or double), if the model gives one.
    public var defaultValue: Double? = nil

    package init(dataType: String, shape: [Int64], shapeFlexibility: ShapeFlexibility? = nil, defaultValue: Double? = nil) {
        self.dataType = dataType
        self.shape = shape
        self.shapeFlexibility = shapeFlexibility
        self.defaultValue = defaultValue
    }

    public enum ShapeFlexibility: Equatable, Sendable {
        /// Any of these shapes.
        case enumerated([[Int64]])
        /// Each dimension within a range.
        case ranges([SizeRange])
    }
}

/// A sequence feature.
public struct SequenceType: Equatable, Sendable {
    /// `int64Type` or `stringType`, or `unset`.
    public var elementType: String
    public var sizeRange: SizeRange?
}

/// The human metadata of a model.
public struct Metadata: Equatable, Sendable {
    public var shortDescription: String
    public var author: String
    public var license: String
    public var versionString: String
    public var userDefined: [String: String]

    package init(shortDescription: String, author: String, license: String, versionString: String,
                 userDefined: [String: String]) {
        self.shortDescription = shortDescription
        self.author = author
        self.license = license
        self.versionString = versionString
        self.userDefined = userDefined
    }

    var isEmpty: Bool {
        shortDescription.isEmpty && author.isEmpty && license.isEmpty && versionString.isEmpty && userDefined.isEmpty
    }
}

/// The class labels of a classifier.
public enum ClassLabels: Equatable, Sendable {
    case strings([String])
    case int64s([Int64])

    public var count: Int {
        switch self {
        case .strings(let labels): labels.count
        case .int64s(let labels): labels.count
        }
    }

    /// `string` or `int64`.
    public var kind: String {
        switch self {
        case .strings: "string"
        case .int64s: "int64"
        }
    }
}

/// One neural-network layer.
public struct Layer: Equatable, Sendable {
    public var name: String
    /// The schema name of the layer type (`convolution`, `innerProduct`, …).
    public var kind: String
    public var inputs: [String]
    public var outputs: [String]
    public var isUpdatable: Bool
}

/// One weight tensor (`WeightParams`) of a neural-network layer.
public struct WeightTensor: Equatable, Sendable {
    /// How the values are stored.
    public enum Storage: String, Equatable, Sendable {
        /// `floatValue`: 32-bit floats.
        case float32
        /// `float16Value`: IEEE half floats, little-endian.
        case float16
        /// `rawValue` with quantization parameters.
        case quantized
        /// `int8RawValue`: signed 8-bit values.
        case int8
        /// More than one storage form is set (invalid).
        case mixed
    }

    /// The name of the layer holding the tensor.
    public var layer: String
    /// The field path of the tensor in the layer's parameters (`weights`,
    /// `bias`, `weightParams.inputGateWeightMatrix`).
    public var role: String
    public var storage: Storage
    /// The number of values.
    public var count: Int
    /// The bytes the values take in the specification.
    public var bytes: Int
    /// Bits per value for quantized storage.
    public var quantizationBits: Int?
}

/// A function of an ML program.
public struct ProgramFunction: Equatable, Sendable, Encodable {
    public var name: String
    public var opset: String
    public var inputs: [String]
    public var outputs: [String]
}

/// A value of an ML program stored in its weight file: a constant, or an
/// operation input (the data, scales, lookup tables of iOS 18's `constexpr_…`
/// operations).
public struct BlobWeight: Equatable, Sendable, Encodable {
    /// The name of the value: the `const` operation's output, else the
    /// operation's first output and the attribute or input name
    /// (`dense1_weight_quantized.data`).
    public var name: String
    /// The MIL data type name (`FLOAT32`, `FLOAT16`, `INT8`, …).
    public var dataType: String
    /// The number of elements its tensor type declares.
    public var count: Int
    /// The weight file as the program names it (`@model_path/weights/weight.bin`).
    public var file: String
    /// The offset of the blob's metadata record in that file.
    public var offset: UInt64
    /// The size of the data, from the blob's metadata record; `nil` when the
    /// weight file could not be read.
    public var bytes: UInt64?
    /// Why the blob cannot be used, if it cannot: its record could not be
    /// read, or does not hold the values of the tensor type.
    public var problem: String?
}
