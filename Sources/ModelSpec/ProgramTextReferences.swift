/// One weight file reference in MIL text:
/// `tensor<int4, [32, 64]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(384)))`.
package struct ProgramTextReference: Equatable, Sendable {
    /// The value's type as written (`tensor<int4, [32, 64]>`, `fp32`).
    package var type: String
    /// The blob storage type of the tensor's data type; `nil` when the text
    /// names one a weight file cannot store.
    package var dataType: MILBlobFile.DataType?
    /// The number of elements; `nil` when a dimension is unknown.
    package var count: Int?
    /// The weight file as the text names it.
    package var file: String
    /// The offset of the blob's record.
    package var offset: UInt64
    /// The 1-based line of the reference.
    package var line: Int
}

/// Finds the weight file references of MIL text as `ProgramTextPrinter`
/// writes it (a compiled bundle's `model.mil`).
package enum ProgramTextReferences {
    private static let marker = Array("BLOBFILE(path = string(\"".utf8)
    private static let offsetMarker = Array("), offset = uint64(".utf8)

    /// Every `BLOBFILE(…)` reference in `text`, in order, or the line of the
    /// first one whose path, offset or type cannot be read.
    package static func scan(_ text: [UInt8]) -> Result<[ProgramTextReference], MalformedReference> {
        var references: [ProgramTextReference] = []
        var line = 1
        var position = 0
        var lineCounted = 0
        while let start = find(marker, in: text, from: position) {
            line += text[lineCounted..<start].reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            lineCounted = start
            guard let (file, afterPath) = quotedString(text, from: start + marker.count),
                  matches(offsetMarker, in: text, at: afterPath),
                  let (offset, afterOffset) = number(text, from: afterPath + offsetMarker.count),
                  afterOffset + 1 < text.count, text[afterOffset] == UInt8(ascii: ")"), text[afterOffset + 1] == UInt8(ascii: ")"),
                  let type = typeText(before: start, in: text)
            else { return .failure(MalformedReference(line: line)) }
            let (dataType, count) = parse(type)
            references.append(ProgramTextReference(type: type, dataType: dataType, count: count, file: file, offset: offset, line: line))
            position = afterOffset + 2
        }
        return .success(references)
    }

    /// A `BLOBFILE(…)` reference that cannot be read.
    package struct MalformedReference: Error, Equatable, Sendable {
        package var line: Int
    }

    private static func find(_ needle: [UInt8], in text: [UInt8], from start: Int) -> Int? {
        guard needle.count <= text.count else { return nil }
        var index = start
        while index + needle.count <= text.count {
            if matches(needle, in: text, at: index) { return index }
            index += 1
        }
        return nil
    }

    private static func matches(_ needle: [UInt8], in text: [UInt8], at index: Int) -> Bool {
        guard index >= 0, index + needle.count <= text.count else { return false }
        for (offset, byte) in needle.enumerated() where text[index + offset] != byte { return false }
        return true
    }

    /// The string up to the closing quote, with `\"` and `\\` unescaped (the
    /// escapes `quoted` writes), and the index after the quote.
    private static func quotedString(_ text: [UInt8], from start: Int) -> (String, Int)? {
        var bytes: [UInt8] = []
        var index = start
        while index < text.count {
            let byte = text[index]
            if byte == UInt8(ascii: "\"") { return (String(decoding: bytes, as: UTF8.self), index + 1) }
            if byte == UInt8(ascii: "\n") { return nil }
            if byte == UInt8(ascii: "\\"), index + 1 < text.count {
                bytes.append(text[index + 1])
                index += 2
                continue
            }
            bytes.append(byte)
            index += 1
        }
        return nil
    }

    private static func number(_ text: [UInt8], from start: Int) -> (UInt64, Int)? {
        var value: UInt64 = 0
        var index = start
        while index < text.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[index]) {
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(UInt64(text[index] - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            value = sum
            index += 1
        }
        return index > start ? (value, index) : nil
    }

    /// The type written right before `(BLOBFILE(`: `tensor<…>` or a scalar type name.
    private static func typeText(before start: Int, in text: [UInt8]) -> String? {
        let open = start - 1
        guard open > 0, text[open] == UInt8(ascii: "(") else { return nil }
        var index = open - 1
        if text[index] == UInt8(ascii: ">") {
            var depth = 0
            while index >= 0 {
                if text[index] == UInt8(ascii: ">") { depth += 1 }
                if text[index] == UInt8(ascii: "<") {
                    depth -= 1
                    if depth == 0 { break }
                }
                index -= 1
            }
            let prefix = Array("tensor".utf8)
            guard index >= prefix.count, matches(prefix, in: text, at: index - prefix.count) else { return nil }
            return String(decoding: text[(index - prefix.count)..<open], as: UTF8.self)
        }
        while index >= 0, isNameByte(text[index]) { index -= 1 }
        guard index + 1 < open else { return nil }
        return String(decoding: text[(index + 1)..<open], as: UTF8.self)
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The data type and element count of `tensor<name, [d, …]>` or `name`.
    private static func parse(_ type: String) -> (MILBlobFile.DataType?, Int?) {
        guard type.hasPrefix("tensor<"), type.hasSuffix("]>"), let comma = type.firstIndex(of: ",") else {
            return (dataType(named: type), 1)
        }
        let name = String(type[type.index(type.startIndex, offsetBy: "tensor<".count)..<comma])
        guard let open = type.firstIndex(of: "[") else { return (dataType(named: name), nil) }
        let inner = type[type.index(after: open)..<type.index(type.endIndex, offsetBy: -2)]
        var count = 1
        for dimension in inner.split(separator: ",") {
            guard let size = Int(dimension.trimmingCharacters(in: " ")) else { return (dataType(named: name), nil) }
            let (product, overflow) = count.multipliedReportingOverflow(by: size)
            guard !overflow else { return (dataType(named: name), nil) }
            count = product
        }
        return (dataType(named: name), count)
    }

    private static func dataType(named name: String) -> MILBlobFile.DataType? {
        MILBlobFile.DataType.allCases.first { $0.milTextName == name }
    }
}

extension MILBlobFile.DataType {
    /// The name MIL text gives the data type (`fp32`, `int4`, …).
    package var milTextName: String {
        switch self {
        case .float16: "fp16"
        case .float32: "fp32"
        case .bfloat16: "bf16"
        case .float8E4M3FN: "fp8e4m3fn"
        case .float8E5M2: "fp8e5m2"
        default: name
        }
    }
}

private extension Substring {
    func trimmingCharacters(in characters: String) -> Substring {
        var result = self
        while let first = result.first, characters.contains(first) { result = result.dropFirst() }
        while let last = result.last, characters.contains(last) { result = result.dropLast() }
        return result
    }
}
