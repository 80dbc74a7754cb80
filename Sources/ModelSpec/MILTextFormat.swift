import CoreMLSchema

typealias MILValueType = CoreML__Specification__MILSpec__ValueType
typealias MILTensorType = CoreML__Specification__MILSpec__TensorType
typealias MILDimension = CoreML__Specification__MILSpec__Dimension
typealias MILTensorValue = CoreML__Specification__MILSpec__TensorValue
typealias MILDataType = CoreML__Specification__MILSpec__DataType

/// How MIL text writes types and values: `tensor<fp32, [1, ?]>`, `int32`,
/// `string("a")`, `tensor<fp16, [2]>([0.5, 1])`, `BLOBFILE(…)`.
enum MILTextFormat {
    // MARK: Types

    /// A value type: a tensor (rank 0 as its bare data type), `list<T, n>`,
    /// `tuple<…>`, `dict<K, V>` or `state<T>`; `unknown` when unset.
    static func type(_ type: UnsafeMutablePointer<MILValueType>?) -> String {
        guard let type else { return "unknown" }
        switch type.pointee.type_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE:
            return tensorType(type.pointee.tensortype)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_LIST_TYPE:
            let list = type.pointee.listtype?.pointee
            return "list<\(self.type(list?.type)), \(dimension(list?.length))>"
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TUPLE_TYPE:
            let tuple = type.pointee.tupletype?.pointee
            let members = tuple.map { elements($0.types, $0.n_types) } ?? []
            return "tuple<\(members.map { self.type($0) }.joined(separator: ", "))>"
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_DICTIONARY_TYPE:
            let dictionary = type.pointee.dictionarytype?.pointee
            return "dict<\(self.type(dictionary?.keytype)), \(self.type(dictionary?.valuetype))>"
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE:
            return "state<\(self.type(type.pointee.statetype?.pointee.wrappedtype))>"
        default:
            return "unknown"
        }
    }

    /// The tensor type if `type` is one.
    static func tensorType(of type: UnsafeMutablePointer<MILValueType>?) -> UnsafeMutablePointer<MILTensorType>? {
        guard let type, type.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE else { return nil }
        return type.pointee.tensortype
    }

    /// Whether a tensor type is a scalar: rank 0 and no dimensions.
    static func isScalar(_ tensor: UnsafeMutablePointer<MILTensorType>) -> Bool {
        tensor.pointee.rank == 0 && tensor.pointee.n_dimensions == 0
    }

    private static func tensorType(_ tensor: UnsafeMutablePointer<MILTensorType>?) -> String {
        guard let tensor else { return "tensor<unknown, []>" }
        let name = dataType(tensor.pointee.datatype)
        if isScalar(tensor) { return name }
        let dimensions = elements(tensor.pointee.dimensions, tensor.pointee.n_dimensions).map { dimension($0) }
        return "tensor<\(name), [\(dimensions.joined(separator: ", "))]>"
    }

    /// A size, `?` when unknown, `?...` when unknown and variadic.
    private static func dimension(_ dimension: UnsafeMutablePointer<MILDimension>?) -> String {
        guard let dimension else { return "?" }
        switch dimension.pointee.dimension_case {
        case CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT:
            return "\(dimension.pointee.constant?.pointee.size ?? 0)"
        case CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_UNKNOWN:
            return dimension.pointee.unknown?.pointee.variadic != 0 ? "?..." : "?"
        default:
            return "?"
        }
    }

    /// The MIL text name of a data type (`fp32`, `uint4`, …); the schema name
    /// in lower case for anything else.
    static func dataType(_ type: MILDataType) -> String {
        switch type {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL: "bool"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING: "string"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E4M3FN: "fp8e4m3fn"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E5M2: "fp8e5m2"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16: "fp16"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32: "fp32"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT64: "fp64"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16: "bf16"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: "int4"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: "int8"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16: "int16"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32: "int32"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT64: "int64"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: "uint1"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: "uint2"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: "uint3"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: "uint4"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: "uint6"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: "uint8"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16: "uint16"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32: "uint32"
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT64: "uint64"
        default: milDataTypeName(type).lowercased()
        }
    }

    // MARK: Values

    /// A value with its type: `int32(1)`, `tensor<fp32, [2]>([1.5, 2.0])`,
    /// `tensor<fp32, [4]>(BLOBFILE(path = string("…"), offset = uint64(64)))`.
    static func value(_ value: UnsafeMutablePointer<MILValue>?) -> String {
        guard let value else { return "unknown()" }
        return "\(type(value.pointee.type))(\(literal(value)))"
    }

    /// A value without its type, as it appears inside a typed value: `1`,
    /// `"a"`, `[1, 2]`, `(1, "a")`, `{{"k", "v"}}`, or the `BLOBFILE(…)` reference.
    static func literal(_ value: UnsafeMutablePointer<MILValue>?) -> String {
        guard let value else { return "" }
        switch value.pointee.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            let blob = value.pointee.blobfilevalue?.pointee
            return "BLOBFILE(path = string(\(quoted(text(blob?.filename)))), offset = uint64(\(blob?.offset ?? 0)))"
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            guard let immediate = value.pointee.immediatevalue?.pointee else { return "" }
            switch immediate.value_case {
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR:
                return tensorLiteral(immediate.tensor, type: tensorType(of: value.pointee.type))
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TUPLE:
                let members = immediate.tuple.map { elements($0.pointee.values, $0.pointee.n_values) } ?? []
                return "(\(members.map { literal($0) }.joined(separator: ", ")))"
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST:
                let members = immediate.list.map { elements($0.pointee.values, $0.pointee.n_values) } ?? []
                return "[\(members.map { literal($0) }.joined(separator: ", "))]"
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_DICTIONARY:
                let pairs = immediate.dictionary.map { elements($0.pointee.values, $0.pointee.n_values) } ?? []
                let entries = pairs.map { "{\(literal($0.pointee.key)), \(literal($0.pointee.value))}" }
                return "{\(entries.sorted().joined(separator: ", "))}"
            default:
                return ""
            }
        default:
            return ""
        }
    }

    /// A tensor's elements: a scalar alone, otherwise `[a, b, …]` in storage order.
    private static func tensorLiteral(_ tensor: UnsafeMutablePointer<MILTensorValue>?,
                                      type: UnsafeMutablePointer<MILTensorType>?) -> String {
        let items = tensor.map { tensorElements($0, type: type) } ?? []
        if let type, isScalar(type), items.count == 1 { return items[0] }
        return "[\(items.joined(separator: ", "))]"
    }

    private static func tensorElements(_ tensor: UnsafeMutablePointer<MILTensorValue>,
                                       type: UnsafeMutablePointer<MILTensorType>?) -> [String] {
        let dataType = type?.pointee.datatype ?? CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UNUSED_TYPE
        let value = tensor.pointee
        switch value.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS:
            return value.floats.map { scalars($0.pointee.values, $0.pointee.n_values) }?.map(\.description) ?? []
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_DOUBLES:
            return value.doubles.map { scalars($0.pointee.values, $0.pointee.n_values) }?.map(\.description) ?? []
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS:
            let ints = value.ints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []
            return dataType == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32
                ? ints.map { UInt32(bitPattern: $0).description } : ints.map(\.description)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_LONG_INTS:
            let longs = value.longints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []
            return dataType == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT64
                ? longs.map { UInt64(bitPattern: $0).description } : longs.map(\.description)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS:
            return value.bools.map { scalars($0.pointee.values, $0.pointee.n_values) }?.map { $0 != 0 ? "true" : "false" } ?? []
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS:
            return value.strings.map { strings($0.pointee.values, $0.pointee.n_values) }?.map(quoted) ?? []
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES:
            guard let data = value.bytes?.pointee.values, let base = data.data, data.len > 0 else { return [] }
            let bytes = UnsafeBufferPointer(start: base, count: data.len)
            let declared = type.map { elementCount($0.pointee) } ?? 0
            return TensorBytes.elements(bytes, dataType: dataType, declaredCount: declared)
        default:
            return []
        }
    }

    /// `text` in double quotes, with `"`, `\` and control characters escaped.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                result += "\\u{\(String(scalar.value, radix: 16))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
