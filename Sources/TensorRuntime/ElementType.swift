import CoreMLSchema

/// The data type of a tensor's elements, as MIL declares it.
///
/// How a value's elements lie in memory is its `ElementStorage`: values
/// operations compute are held in four bytes — floating-point types (fp16,
/// fp32, fp64) as `Float`, integer types and bool as `Int32` (bool as 0 or 1);
/// fp16 values are rounded to fp16 where they enter the program (inputs,
/// constants, `cast` to fp16) and computed in fp32 between. A state declared
/// fp16 is kept in its own two bytes (`persistentStorage`).
/// Strings exist only as constants (class labels, modes).
enum ElementType: String, Sendable, Equatable, Hashable, CaseIterable {
    case float16 = "fp16", float32 = "fp32", float64 = "fp64"
    case int8, uint8, int16, uint16, int32, uint32, int64
    case bool, string

    /// Whether the type is held as `Float`.
    var isFloat: Bool { self == .float16 || self == .float32 || self == .float64 }

    /// How operations' results of this type are held: `Float` or `Int32`.
    var computedStorage: ElementStorage { isFloat ? .float32 : .int32 }

    /// How a value of this type that persists between predictions (a state)
    /// is held: in its own width where kernels read and write that width
    /// (fp16), as computed otherwise.
    var persistentStorage: ElementStorage { self == .float16 ? .float16 : computedStorage }

    /// The type MIL's `dtype` strings name (`"fp16"`, `"int32"`, `"bool"`, …).
    init?(milName: String) {
        self.init(rawValue: milName)
    }

    /// The element type of a MIL data type; sub-byte integer types (only in
    /// constants) are widened to int32.
    init?(_ dataType: CoreML__Specification__MILSpec__DataType) {
        switch dataType {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16: self = .float16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32: self = .float32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT64: self = .float64
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: self = .int8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: self = .uint8
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16: self = .int16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16: self = .uint16
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32: self = .int32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32: self = .uint32
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT64: self = .int64
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL: self = .bool
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING: self = .string
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4,
             CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2,
             CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6:
            self = .int32
        default: return nil
        }
    }
}

/// How a value's elements lie in memory at run time, which decides its
/// bytes in the arena and which kernels may read it in place. A kernel that
/// reads only computed storage (`ElementType.computedStorage`) is given a
/// widened copy of a value held otherwise (`OperationContext.input`); those
/// that read a narrower storage in place ask for it (`storedInput`).
enum ElementStorage: String, Sendable, Hashable, CaseIterable {
    /// IEEE single floats, 4 bytes.
    case float32
    /// IEEE half floats, 2 bytes (little-endian).
    case float16
    /// Two's-complement 32-bit integers, 4 bytes.
    case int32

    /// Bytes one element takes.
    var byteWidth: Int {
        switch self {
        case .float32, .int32: 4
        case .float16: 2
        }
    }

    /// Bytes `count` elements take.
    func bytes(_ count: Int) -> Int { count * byteWidth }
}

/// The type of a value in the graph: a tensor whose dimensions may be
/// unknown until a plan fixes the input shapes (`nil` dimensions), or a
/// state wrapping such a tensor.
struct ValueType: Sendable, Equatable {
    var element: ElementType
    /// The dimensions; `nil` where unknown. `nil` rank: unknown rank.
    var shape: [Int?]?
    /// Whether this is a state (`read_state`/`coreml_update_state` operate on it).
    var isState = false
}
