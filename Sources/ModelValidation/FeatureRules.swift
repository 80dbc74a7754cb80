import CoreMLSchema
import ModelSpec

/// The role of a feature in a model's description.
enum FeatureRole: String {
    case input, output, state
    case trainingInput = "training input"
}

/// One feature of a model description, with its C message.
struct Feature {
    let role: FeatureRole
    let index: Int
    let name: String
    let type: UnsafeMutablePointer<CoreML__Specification__FeatureType>?

    /// `input "image"`, or `input 2` when the name is empty.
    var location: String {
        name.isEmpty ? "\(role.rawValue) \(index)" : "\(role.rawValue) \(quoted(name))"
    }

    var typeCase: CoreML__Specification__FeatureType__TypeCase {
        type?.pointee.type_case ?? CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE__NOT_SET
    }

    var isOptional: Bool { type?.pointee.isoptional ?? 0 != 0 }
}

/// The features of one role of a description.
func features(
    _ list: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__FeatureDescription>?>?,
    _ count: Int, role: FeatureRole
) -> [Feature] {
    elements(list, count).enumerated().map { index, feature in
        Feature(role: role, index: index, name: text(feature.pointee.name), type: feature.pointee.type)
    }
}

extension UnsafePointer<CoreML__Specification__Model> {
    var inputs: [Feature] {
        guard let description = pointee.description?.pointee else { return [] }
        return features(description.input, description.n_input, role: .input)
    }

    var outputs: [Feature] {
        guard let description = pointee.description?.pointee else { return [] }
        return features(description.output, description.n_output, role: .output)
    }

    var states: [Feature] {
        guard let description = pointee.description?.pointee else { return [] }
        return features(description.state, description.n_state, role: .state)
    }

    /// The interfaces the description declares: one per function of a
    /// multi-function description (specification 9), else the model's own
    /// (with an empty function name).
    var interfaces: [Interface] {
        guard let description = pointee.description?.pointee else { return [Interface(function: "", inputs: [], outputs: [], states: [])] }
        let functions = elements(description.functions, description.n_functions)
        guard !functions.isEmpty else { return [Interface(function: "", inputs: inputs, outputs: outputs, states: states)] }
        return functions.map { function in
            Interface(function: text(function.pointee.name),
                      inputs: features(function.pointee.input, function.pointee.n_input, role: .input),
                      outputs: features(function.pointee.output, function.pointee.n_output, role: .output),
                      states: features(function.pointee.state, function.pointee.n_state, role: .state))
        }
    }

    var trainingInputs: [Feature] {
        guard let description = pointee.description?.pointee else { return [] }
        return features(description.traininginput, description.n_traininginput, role: .trainingInput)
    }
}

/// The inputs, outputs and states of a model, or of one function of a
/// multi-function model (`function` names it; empty for the model's own).
struct Interface {
    var function: String
    var inputs: [Feature]
    var outputs: [Feature]
    var states: [Feature]
}

/// The schema name of a feature type case (`multiArrayType`, …).
func featureTypeName(_ type: CoreML__Specification__FeatureType__TypeCase) -> String {
    switch type {
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE: "int64"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE: "double"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE: "string"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_IMAGE_TYPE: "image"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE: "multi-array"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE: "dictionary"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_SEQUENCE_TYPE: "sequence"
    case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE: "state"
    default: "unset"
    }
}

/// Rules on a model's interface: its inputs, outputs and states.
enum FeatureRules {
    /// Model types whose inputs may all be absent.
    static let typesAllowingNoInputs: Set<CoreML__Specification__Model__TypeCase> = [
        CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM,
    ]

    /// Model types that accept optional inputs (others refuse them).
    static let typesAllowingOptionalInputs: Set<CoreML__Specification__Model__TypeCase> = [
        CORE_ML__SPECIFICATION__MODEL__TYPE_IMPUTER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR,
        CORE_ML__SPECIFICATION__MODEL__TYPE_SERIALIZED_MODEL,
        CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM,
        CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_REGRESSOR,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR,
        CORE_ML__SPECIFICATION__MODEL__TYPE_ITEM_SIMILARITY_RECOMMENDER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_IDENTITY,
    ]

    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        let version = model.pointee.specificationversion
        if let description = model.pointee.description?.pointee,
           description.n_functions > 0 || !text(description.defaultfunctionname).isEmpty, version < 9 {
            sink.error("spec.version.feature",
                       "multi-function descriptions need specification version 9, the model has \(version)")
        }
        let interfaces = model.interfaces
        if let description = model.pointee.description?.pointee, description.n_functions > 0 {
            let names = interfaces.map(\.function)
            let defaultName = text(description.defaultfunctionname)
            if !names.contains(defaultName) {
                sink.error("interface.functions.default",
                           "the default function \(quoted(defaultName)) is not one of the described functions (\(names.map(quoted).joined(separator: ", ")))")
            }
            if !model.inputs.isEmpty || !model.outputs.isEmpty || !model.states.isEmpty {
                sink.error("interface.functions.toplevel",
                           "a multi-function description declares inputs, outputs and states per function, not for the model")
            }
        }
        for interface in interfaces {
            if interface.function.isEmpty {
                checkInterface(interface, model: model, version: version, sink: &sink)
            } else {
                sink.at("function \(quoted(interface.function))") { sink in
                    checkInterface(interface, model: model, version: version, sink: &sink)
                }
            }
        }
    }

    /// Rules on one interface: the model's, or one function's.
    private static func checkInterface(
        _ interface: Interface, model: UnsafePointer<CoreML__Specification__Model>, version: Int32, sink: inout DiagnosticSink
    ) {
        let type = model.pointee.type_case
        let inputs = interface.inputs
        let outputs = interface.outputs
        let states = interface.states

        if inputs.isEmpty && !typesAllowingNoInputs.contains(type) {
            sink.error("interface.inputs.empty", "the model has no inputs; \(ModelRules.modelTypeName(model)) models need at least one")
        }
        if outputs.isEmpty {
            sink.error("interface.outputs.empty", "the model has no outputs; every model needs at least one")
        }

        for group in [inputs, outputs, states] {
            var firstIndex: [String: Int] = [:]
            for feature in group {
                sink.at(feature.location) { sink in
                    if feature.name.isEmpty {
                        sink.error("feature.name.empty", "the name is empty")
                    } else if let first = firstIndex[feature.name] {
                        sink.error("feature.name.duplicate",
                                   "the name is already used by \(feature.role.rawValue) \(first); \(feature.role.rawValue) names must be unique")
                    } else {
                        firstIndex[feature.name] = feature.index
                    }
                    checkType(feature, version: version, sink: &sink)
                    if feature.role == .output && feature.isOptional {
                        sink.error("feature.output.optional", "the output is marked optional; outputs never are")
                    }
                    if feature.role == .input && feature.isOptional
                        && feature.typeCase != CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE
                        && !typesAllowingOptionalInputs.contains(type) {
                        sink.error("feature.input.optional",
                                   "the input is marked optional, which \(ModelRules.modelTypeName(model)) models do not allow")
                    }
                }
            }
        }

        let requiresOneRequiredInput: Set<CoreML__Specification__Model__TypeCase> = [
            CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
            CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
            CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR,
            CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM,
        ]
        if requiresOneRequiredInput.contains(type), !inputs.isEmpty,
           inputs.allSatisfy({ $0.isOptional && $0.typeCase != CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE }) {
            sink.error("interface.inputs.allOptional",
                       "all \(counted(inputs.count, "input")) are optional; \(ModelRules.modelTypeName(model)) models need at least one required input")
        }
    }

    /// Rules on one feature's type.
    static func checkType(_ feature: Feature, version: Int32, sink: inout DiagnosticSink) {
        guard let type = feature.type?.pointee else {
            sink.error("feature.type.unset", "no type is set")
            return
        }
        let isState = type.type_case == CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE
        if isState && feature.role != .state && feature.role != .input {
            sink.error("feature.state.placement", "a state feature is declared as \(feature.role.rawValue); states belong among the states (or inputs)")
        }
        if !isState && feature.role == .state {
            sink.error("feature.state.placement", "a \(featureTypeName(type.type_case)) feature is declared among the states, which hold only state features")
        }
        switch type.type_case {
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE,
             CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE,
             CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE:
            break
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE:
            if let array = type.multiarraytype?.pointee {
                checkMultiArray(array, feature: feature, version: version, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_IMAGE_TYPE:
            if let image = type.imagetype?.pointee {
                checkImage(image, version: version, sink: &sink)
            }
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE:
            let key = type.dictionarytype?.pointee.key_type_case
            if key != CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_INT64_KEY_TYPE
                && key != CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE {
                sink.error("feature.dictionary.keyType", "the dictionary has no key type; it must be int64 or string")
            }
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_SEQUENCE_TYPE:
            if version < 3 {
                sink.error("spec.version.feature", "sequence features need specification version 3, the model has \(version)")
            }
            let sequence = type.sequencetype?.pointee
            if let range = sequence?.sizerange?.pointee, let problem = rangeProblem(range) {
                sink.error("feature.sequence.range.invalid", "the sequence length range \(problem)")
            }
            let element = sequence?.type_case
            if element != CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_INT64_TYPE
                && element != CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_STRING_TYPE {
                sink.error("feature.sequence.elementType", "the sequence has no element type; it must be int64 or string")
            }
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE:
            checkState(type, version: version, sink: &sink)
        default:
            sink.error("feature.type.unset", "no type is set")
        }
    }

    static func checkMultiArray(_ array: CoreML__Specification__ArrayFeatureType, feature: Feature, version: Int32, sink: inout DiagnosticSink) {
        let shape = scalars(array.shape, array.n_shape)
        let flexibility = array.shape_flexibility_case
        let isFlexible = flexibility != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY__NOT_SET
        if isFlexible && version < 3 {
            sink.error("spec.version.feature", "flexible multi-array shapes need specification version 3, the model has \(version)")
        }
        for (index, dimension) in shape.enumerated() where dimension < 0 {
            sink.error("feature.multiArray.shape.negative", "shape dimension \(index) is \(dimension); dimensions must be ≥ 0")
        }
        if feature.role == .input && shape.isEmpty && !(isFlexible && version >= 3) {
            sink.error("feature.multiArray.shape.missing", "the multi-array input has neither a shape nor a flexible shape")
        }
        if isFlexible && version >= 3 {
            if flexibility == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_ENUMERATED_SHAPES {
                let shapes = array.enumeratedshapes.map { elements($0.pointee.shapes, $0.pointee.n_shapes) } ?? []
                let lists = shapes.map { scalars($0.pointee.shape, $0.pointee.n_shape) }
                if lists.isEmpty {
                    sink.error("feature.multiArray.enumerated.empty", "the list of enumerated shapes is empty")
                }
                for (index, list) in lists.enumerated() where list.isEmpty {
                    sink.error("feature.multiArray.enumerated.empty", "enumerated shape \(index) has no dimensions")
                }
                if !shape.isEmpty && !lists.isEmpty && !lists.contains(shape) {
                    sink.error("feature.multiArray.default.outside",
                               "the default shape \(shapeText(shape)) is not among the enumerated shapes \(lists.map(shapeText).joined(separator: ", "))")
                }
            } else {
                let ranges = array.shaperange.map { elements($0.pointee.sizeranges, $0.pointee.n_sizeranges) } ?? []
                for (index, range) in ranges.enumerated() {
                    if let problem = rangeProblem(range.pointee) {
                        sink.error("feature.multiArray.range.invalid", "the range of dimension \(index) \(problem)")
                    }
                }
                if !shape.isEmpty {
                    if shape.count != ranges.count {
                        sink.error("feature.multiArray.default.outside",
                                   "the default shape \(shapeText(shape)) has \(counted(shape.count, "dimension")), the shape range \(ranges.count)")
                    } else {
                        for (index, (dimension, range)) in zip(shape, ranges).enumerated()
                        where !contains(range.pointee, dimension) {
                            sink.error("feature.multiArray.default.outside",
                                       "default dimension \(index) is \(dimension), outside its range \(rangeText(range.pointee))")
                        }
                    }
                }
            }
        }
        switch array.datatype {
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__DOUBLE,
             CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32,
             CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32:
            break
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16:
            if version < 7 {
                sink.error("spec.version.feature", "FLOAT16 multi-arrays need specification version 7, the model has \(version)")
            }
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT8:
            if version < 10 {
                sink.error("spec.version.feature", "INT8 multi-arrays need specification version 10, the model has \(version)")
            }
        default:
            sink.error("feature.multiArray.dataType",
                       "data type \(arrayDataTypeName(array.datatype)) is not one of DOUBLE, FLOAT32, FLOAT16, INT32, INT8")
        }
        let defaultValue = array.default_optional_value_case
        if defaultValue != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE__NOT_SET {
            if version < 5 {
                sink.error("spec.version.feature", "default values of optional inputs need specification version 5, the model has \(version)")
            }
            let expected: String? = switch defaultValue {
            case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_DOUBLE_DEFAULT_VALUE:
                array.datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__DOUBLE ? nil : "doubleDefaultValue"
            case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_FLOAT_DEFAULT_VALUE:
                array.datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32
                    || array.datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16 ? nil : "floatDefaultValue"
            default:
                array.datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32 ? nil : "intDefaultValue"
            }
            if let expected {
                sink.error("feature.multiArray.defaultValue",
                           "the default value is a \(expected), which does not fit data type \(arrayDataTypeName(array.datatype))")
            }
        }
    }

    static func checkImage(_ image: CoreML__Specification__ImageFeatureType, version: Int32, sink: inout DiagnosticSink) {
        var width = image.width
        var height = image.height
        let hasDefault = width > 0 && height > 0
        let flexibility = image.size_flexibility_case
        if flexibility != CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY__NOT_SET && version < 3 {
            sink.error("spec.version.feature", "flexible image sizes need specification version 3, the model has \(version)")
        }
        if version >= 3 {
            switch flexibility {
            case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_ENUMERATED_SIZES:
                let sizes = image.enumeratedsizes.map { elements($0.pointee.sizes, $0.pointee.n_sizes) } ?? []
                if sizes.isEmpty {
                    sink.error("feature.image.enumerated.empty", "the list of enumerated image sizes is empty")
                } else if !hasDefault {
                    width = Int64(clamping: sizes[0].pointee.width)
                    height = Int64(clamping: sizes[0].pointee.height)
                } else if !sizes.contains(where: { Int64(clamping: $0.pointee.width) == width && Int64(clamping: $0.pointee.height) == height }) {
                    let list = sizes.map { "\($0.pointee.width)×\($0.pointee.height)" }.joined(separator: ", ")
                    sink.error("feature.image.default.outside",
                               "the default size \(width)×\(height) is not among the enumerated sizes \(list)")
                }
            case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_IMAGE_SIZE_RANGE:
                let widthRange = image.imagesizerange?.pointee.widthrange?.pointee ?? emptyRange
                let heightRange = image.imagesizerange?.pointee.heightrange?.pointee ?? emptyRange
                for (axis, range) in [("width", widthRange), ("height", heightRange)] {
                    if let problem = rangeProblem(range) {
                        sink.error("feature.image.range.invalid", "the \(axis) range \(problem)")
                    }
                }
                if !hasDefault {
                    width = Int64(clamping: widthRange.lowerbound)
                    height = Int64(clamping: heightRange.lowerbound)
                } else {
                    for (axis, value, range) in [("width", width, widthRange), ("height", height, heightRange)]
                    where !contains(range, value) {
                        sink.error("feature.image.default.outside",
                                   "the default \(axis) \(value) is outside the flexible range \(rangeText(range))")
                    }
                }
            default:
                break
            }
        }
        if width <= 0 {
            sink.error("feature.image.size", "the width is \(width); it must be > 0 (or come from a flexible size)")
        }
        if height <= 0 {
            sink.error("feature.image.size", "the height is \(height); it must be > 0 (or come from a flexible size)")
        }
        switch image.colorspace {
        case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__COLOR_SPACE__RGB,
             CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__COLOR_SPACE__BGR,
             CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__COLOR_SPACE__GRAYSCALE:
            break
        case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__COLOR_SPACE__GRAYSCALE_FLOAT16:
            if version < 7 {
                sink.error("spec.version.feature", "GRAYSCALE_FLOAT16 images need specification version 7, the model has \(version)")
            }
        default:
            let name = enumValueName(
                core_ml__specification__image_feature_type__color_space__descriptor,
                Int32(bitPattern: image.colorspace.rawValue))
            sink.error("feature.image.colorSpace", "the color space is \(name); it must be RGB, BGR, GRAYSCALE or GRAYSCALE_FLOAT16")
        }
    }

    static func checkState(_ type: CoreML__Specification__FeatureType, version: Int32, sink: inout DiagnosticSink) {
        if version < 9 {
            sink.error("spec.version.feature", "state features need specification version 9, the model has \(version)")
        }
        if type.isoptional != 0 {
            sink.error("feature.state.optional", "the state is marked optional; states never are")
        }
        guard let state = type.statetype?.pointee,
              state.type_case == CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE,
              let array = state.arraytype?.pointee
        else {
            sink.error("feature.state.shape", "the state holds no multi-array type")
            return
        }
        let shape = scalars(array.shape, array.n_shape)
        if shape.isEmpty {
            sink.error("feature.state.shape", "the state multi-array has no shape; states need a fixed shape")
        }
        for (index, dimension) in shape.enumerated() where dimension < 0 {
            sink.error("feature.state.shape", "shape dimension \(index) is \(dimension); dimensions must be ≥ 0")
        }
        if array.shape_flexibility_case != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY__NOT_SET {
            sink.error("feature.state.shape", "the state multi-array has a flexible shape; states need a fixed shape")
        }
        if array.datatype != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16 {
            sink.error("feature.state.dataType", "the state data type is \(arrayDataTypeName(array.datatype)); states must be FLOAT16")
        }
        if array.default_optional_value_case != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE__NOT_SET {
            sink.error("feature.state.defaultValue", "the state has a default value; states cannot have one")
        }
    }

    private static var emptyRange: CoreML__Specification__SizeRange {
        CoreML__Specification__SizeRange(
        base: ProtobufCMessage(descriptor: nil, n_unknown_fields: 0, unknown_fields: nil), lowerbound: 0, upperbound: 0)
    }

    /// Why `range` is invalid (`"is 8...4: …"`), or `nil` when it is valid.
    /// An upper bound of -1 (or any negative value) means unbounded.
    static func rangeProblem(_ range: CoreML__Specification__SizeRange) -> String? {
        guard range.upperbound > 0, range.lowerbound > UInt64(range.upperbound) else { return nil }
        return "is \(rangeText(range)): the lower bound exceeds the upper bound"
    }

    static func contains(_ range: CoreML__Specification__SizeRange, _ value: Int64) -> Bool {
        if value < 0 || UInt64(value) < range.lowerbound { return false }
        return range.upperbound < 0 || value <= range.upperbound
    }

    static func rangeText(_ range: CoreML__Specification__SizeRange) -> String {
        "\(range.lowerbound)...\(range.upperbound < 0 ? "unbounded" : String(range.upperbound))"
    }
}

/// `[1, 3, 224, 224]`.
func shapeText<T: BinaryInteger>(_ shape: [T]) -> String {
    "[" + shape.map { String($0) }.joined(separator: ", ") + "]"
}

/// The schema name of a multi-array data type (`FLOAT32`, …).
func arrayDataTypeName(_ type: CoreML__Specification__ArrayFeatureType__ArrayDataType) -> String {
    enumValueName(
        core_ml__specification__array_feature_type__array_data_type__descriptor,
        Int32(bitPattern: type.rawValue))
}
