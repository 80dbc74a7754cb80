import Foundation
import ModelSpec

/// Feature values to and from JSON, as `modelc predict` reads and prints them
/// and as the parity fixtures store them.
///
/// Reading: a number for a double or int64; a nested array of numbers for a
/// multi-array (the nesting gives the shape; `null` is NaN); `null` for a
/// double is NaN; a string; an object for a dictionary (keys are strings,
/// decimal ones for int64 keys); an array of strings or integers for a
/// sequence. Writing is the same, with multi-arrays in their shape and
/// non-finite numbers as `null`.
public enum FeatureJSON {
    /// Reads `json` (as `JSONSerialization` gives it) as a value of `type`.
    ///
    /// - Parameter image: turns a string given for an image input (a path)
    ///   into pixels; without it, image inputs are refused.
    /// - Throws: `RuntimeError.wrongType` / `.invalidValue` naming `feature`.
    public static func value(
        from json: Any, as type: FeatureType, feature: String,
        image: ((String) throws(RuntimeError) -> PixelBuffer)? = nil
    ) throws(RuntimeError) -> FeatureValue {
        func mismatch() -> RuntimeError {
            .wrongType(feature: feature, expected: type.expectation, got: jsonKind(json))
        }
        switch type {
        case .double:
            if json is NSNull { return .double(.nan) }
            guard let number = number(json) else { throw mismatch() }
            return .double(number)
        case .int64:
            guard let exact = integer(json) else { throw mismatch() }
            return .int64(exact)
        case .string:
            guard let string = json as? String else { throw mismatch() }
            return .string(string)
        case .multiArray(let array), .state(let array):
            if let number = number(json) { return .double(number) }
            guard json is [Any] else { throw mismatch() }
            let dataType = MultiArray.DataType(schemaName: array.dataType) ?? .float64
            return .multiArray(try multiArray(json, dataType: dataType, feature: feature))
        case .dictionary(let keyType):
            guard let object = json as? [String: Any] else { throw mismatch() }
            return .dictionary(try dictionary(object, int64Keys: keyType == "int64KeyType", feature: feature))
        case .sequence(let sequence):
            guard let array = json as? [Any] else { throw mismatch() }
            if sequence.elementType == "int64Type" {
                let values = array.compactMap(integer)
                guard values.count == array.count else { throw mismatch() }
                return .sequence(.int64s(values))
            }
            let values = array.compactMap { $0 as? String }
            guard values.count == array.count else { throw mismatch() }
            return .sequence(.strings(values))
        case .image:
            if let object = json as? [String: Any] { return .image(try pixels(object, feature: feature)) }
            guard let path = json as? String, let image else { throw mismatch() }
            return .image(try image(path))
        case .unset:
            return try inferredValue(from: json, feature: feature)
        }
    }

    /// Reads `json` with no declared type to go by: numbers are doubles,
    /// arrays multi-arrays of doubles, objects dictionaries with string keys.
    public static func inferredValue(from json: Any, feature: String) throws(RuntimeError) -> FeatureValue {
        if let string = json as? String { return .string(string) }
        if let number = number(json) { return .double(number) }
        if json is [Any] { return .multiArray(try multiArray(json, dataType: .float64, feature: feature)) }
        if let object = json as? [String: Any] {
            return .dictionary(try dictionary(object, int64Keys: false, feature: feature))
        }
        throw .invalidValue(feature: feature, detail: "\(jsonKind(json)) is not a feature value")
    }

    /// A JSON integer read exactly (not through a double, which holds only
    /// 53 bits), or an integral JSON number.
    private static func integer(_ json: Any) -> Int64? {
        guard let number = json as? NSNumber, !isBoolean(number) else { return nil }
        switch UInt8(bitPattern: number.objCType.pointee) {
        case UInt8(ascii: "q"), UInt8(ascii: "l"), UInt8(ascii: "i"), UInt8(ascii: "s"):
            return number.int64Value
        case UInt8(ascii: "Q"), UInt8(ascii: "L"), UInt8(ascii: "I"), UInt8(ascii: "S"):
            let unsigned = number.uint64Value
            return unsigned <= UInt64(Int64.max) ? Int64(unsigned) : nil
        default:
            return Int64(exactly: number.doubleValue)
        }
    }

    private static func number(_ json: Any) -> Double? {
        guard let number = json as? NSNumber, !isBoolean(number) else { return nil }
        return number.doubleValue
    }

    /// An image written out as its pixels: `{"width": W, "height": H,
    /// "pixelFormat": "rgb" | "rgba" | "bgra" | "argb" | "gray", "pixels":
    /// [bytes, row by row, no padding]}`.
    private static func pixels(_ object: [String: Any], feature: String) throws(RuntimeError) -> PixelBuffer {
        guard let width = object["width"].flatMap(number).flatMap({ Int(exactly: $0) }),
              let height = object["height"].flatMap(number).flatMap({ Int(exactly: $0) }),
              let formatName = object["pixelFormat"] as? String,
              let values = object["pixels"] as? [Any]
        else {
            throw .invalidValue(feature: feature, detail: "an image object needs width, height, pixelFormat and pixels")
        }
        guard let format = PixelBuffer.PixelFormat(rawValue: formatName) else {
            throw .invalidValue(feature: feature, detail: "pixel format \"\(formatName)\" is not one of "
                + PixelBuffer.PixelFormat.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let bytes = values.compactMap { number($0).flatMap { UInt8(exactly: $0) } }
        guard bytes.count == values.count,
              let image = PixelBuffer(width: width, height: height, pixelFormat: format, bytes: bytes),
              bytes.count == width * height * format.bytesPerPixel
        else {
            throw .invalidValue(feature: feature, detail: "a \(width)×\(height) \(formatName) image needs \(max(0, width * height * format.bytesPerPixel)) pixel bytes of 0–255, got \(values.count)")
        }
        return image
    }

    /// JSON `true`/`false`, which Foundation hands over as numbers of the C type `char`.
    private static func isBoolean(_ number: NSNumber) -> Bool {
        number.objCType.pointee == booleanType
    }

    private static let booleanType = CChar(bitPattern: UInt8(ascii: "c"))

    private static func multiArray(_ json: Any, dataType: MultiArray.DataType, feature: String) throws(RuntimeError) -> MultiArray {
        var shape: [Int] = []
        var probe: Any = json
        while let array = probe as? [Any] {
            shape.append(array.count)
            guard let first = array.first else { break }
            probe = first
        }
        var values: [Double] = []
        values.reserveCapacity(shape.reduce(1, *))
        func collect(_ element: Any, depth: Int) throws(RuntimeError) {
            if depth == shape.count {
                if element is NSNull { values.append(.nan); return }
                guard let value = number(element) else {
                    throw .invalidValue(feature: feature, detail: "\(jsonKind(element)) inside a numeric array")
                }
                values.append(value)
                return
            }
            guard let array = element as? [Any], array.count == shape[depth] else {
                throw .invalidValue(feature: feature, detail: "a ragged array: every row at depth \(depth + 1) must hold \(shape[depth]) elements")
            }
            for item in array { try collect(item, depth: depth + 1) }
        }
        try collect(json, depth: 0)
        return MultiArray(values, shape: shape, dataType: dataType)
    }

    private static func dictionary(_ object: [String: Any], int64Keys: Bool, feature: String) throws(RuntimeError) -> FeatureDictionary {
        var strings: [String: Double] = [:]
        var int64s: [Int64: Double] = [:]
        for (key, json) in object {
            guard let value = number(json) else {
                throw .invalidValue(feature: feature, detail: "the value of key \"\(key)\" is \(jsonKind(json)), expected a number")
            }
            if int64Keys {
                guard let integer = Int64(key) else {
                    throw .invalidValue(feature: feature, detail: "key \"\(key)\" is not an integer")
                }
                int64s[integer] = value
            } else {
                strings[key] = value
            }
        }
        return int64Keys ? .int64s(int64s) : .strings(strings)
    }

    private static func jsonKind(_ json: Any) -> String {
        switch json {
        case is NSNull: "null"
        case is String: "a string"
        case is [Any]: "an array"
        case is [String: Any]: "an object"
        case let number as NSNumber where isBoolean(number): "a boolean"
        case is NSNumber: "a number"
        default: "an unknown JSON value"
        }
    }

    // MARK: Writing

    /// `value` as JSON text.
    ///
    /// - Parameter keyOrder: the order to write a dictionary's keys in (a
    ///   classifier's labels); keys not listed follow, sorted.
    public static func text(_ value: FeatureValue, keyOrder: [String] = []) -> String {
        var output = ""
        write(value, keyOrder: keyOrder, to: &output)
        return output
    }

    /// Outputs as one JSON object, keys sorted.
    public static func text(_ outputs: [String: FeatureValue], keyOrder: [String] = []) -> String {
        var output = "{"
        for (position, name) in outputs.keys.sorted().enumerated() {
            if position > 0 { output += ", " }
            output += quoted(name) + ": "
            if let value = outputs[name] { write(value, keyOrder: keyOrder, to: &output) }
        }
        return output + "}"
    }

    private static func write(_ value: FeatureValue, keyOrder: [String], to output: inout String) {
        switch value {
        case .double(let number): output += numberText(number)
        case .int64(let number): output += String(number)
        case .string(let string): output += quoted(string)
        case .multiArray(let array): writeArray(array, to: &output)
        case .image(let image):
            // The same object reading takes: rows without their padding.
            let rowBytes = image.width * image.pixelFormat.bytesPerPixel
            var pixels: [String] = []
            pixels.reserveCapacity(rowBytes * image.height)
            for row in 0..<image.height {
                let start = row * image.bytesPerRow
                pixels += image.bytes[start..<(start + rowBytes)].map { String($0) }
            }
            output += "{\"width\": \(image.width), \"height\": \(image.height), \"pixelFormat\": \(quoted(image.pixelFormat.rawValue)), "
                + "\"pixels\": [" + pixels.joined(separator: ", ") + "]}"
        case .dictionary(.strings(let entries)):
            writeObject(entries.map { ($0.key, $0.value) }, keyOrder: keyOrder, to: &output)
        case .dictionary(.int64s(let entries)):
            writeObject(entries.map { (String($0.key), $0.value) }, keyOrder: keyOrder, numericKeys: true, to: &output)
        case .sequence(.strings(let values)): output += "[" + values.map(quoted).joined(separator: ", ") + "]"
        case .sequence(.int64s(let values)): output += "[" + values.map(String.init).joined(separator: ", ") + "]"
        }
    }

    private static func writeObject(_ entries: [(String, Double)], keyOrder: [String], numericKeys: Bool = false, to output: inout String) {
        let rank = Dictionary(keyOrder.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
        let sorted = entries.sorted { left, right in
            switch (rank[left.0], rank[right.0]) {
            case let (l?, r?): return l < r
            case (.some, nil): return true
            case (nil, .some): return false
            case (nil, nil):
                if numericKeys, let l = Int64(left.0), let r = Int64(right.0) { return l < r }
                return left.0 < right.0
            }
        }
        output += "{" + sorted.map { quoted($0.0) + ": " + numberText($0.1) }.joined(separator: ", ") + "}"
    }

    private static func writeArray(_ array: MultiArray, to output: inout String) {
        let values = array.doubles
        let element: (Double) -> String
        switch array.dataType {
        case .float32, .float16: element = { value in value.isFinite ? Float(value).description : "null" }
        case .int32: element = { value in Int64(value).description }
        case .float64: element = numberText
        }
        guard !array.shape.isEmpty else {
            output += values.first.map(element) ?? "null"
            return
        }
        var index = 0
        func nest(_ axis: Int) {
            output += "["
            for position in 0..<array.shape[axis] {
                if position > 0 { output += ", " }
                if axis == array.shape.count - 1 {
                    output += element(values[index])
                    index += 1
                } else {
                    nest(axis + 1)
                }
            }
            output += "]"
        }
        nest(0)
    }

    /// A double as JSON: the shortest text that reads back the same, `null` when not finite.
    public static func numberText(_ number: Double) -> String {
        guard number.isFinite else { return "null" }
        if number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
        return "\(number)"
    }

    /// A string as a JSON string literal.
    public static func quoted(_ string: String) -> String {
        var output = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20: output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }
}
