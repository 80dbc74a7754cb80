import JSONText

/// The bundle's own documents read with `JSONText`, much faster than
/// Foundation's readers on Linux (opening a bundle must not cost more for a
/// model with more tensors than the checks themselves do).
///
/// Reads objects, arrays, strings (with all escapes), integers, `true`,
/// `false` and `null`; fractions, exponents and integers outside `Int64`, which
/// bundle documents never hold, are refused, as are keys named twice. Nesting is bounded.
enum JSONScanner {
    typealias Value = JSONNode

    struct Failure: Error, Equatable {
        let offset: Int
        let reason: String
    }

    static let maximumDepth = 32

    static func parse(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> Value {
        let options = JSONParser.Options(maximumDepth: maximumDepth, refusesDuplicateKeys: true, integersOnly: true)
        do {
            return try JSONParser.parse(bytes, options: options)
        } catch {
            throw Failure(offset: error.offset, reason: error.reason)
        }
    }
}

extension JSONNode {
    /// An integer as the scanner reads it.
    static func integer(_ value: Int64) -> JSONNode { .number(JSONNumber(double: Double(value), int64: value)) }

    var string: String? { if case .string(let value) = self { value } else { nil } }
    /// With `integersOnly` every number has its `Int64`.
    var integer: Int64? { if case .number(let value) = self { value.int64 } else { nil } }
    var array: [JSONNode]? { elements }
}
