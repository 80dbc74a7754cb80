import Foundation

/// The JSON encoding every bundle file uses: sorted keys, two-space indent,
/// no escaped slashes, a final newline — the same bytes on every machine.
public enum BundleJSON {
    /// The bytes of `value` as a bundle file.
    public static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value)) + [0x0A]
    }

    /// Decodes a bundle file with Foundation (for tools and tests; opening a
    /// bundle uses the faster `JSONScanner`).
    public static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try JSONDecoder().decode(type, from: data)
    }
}
