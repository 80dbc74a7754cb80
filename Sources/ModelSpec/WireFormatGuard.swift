import CoreMLSchema


/// Walks raw protobuf bytes with the schema's descriptors before protobuf-c
/// unpacks them, so hostile input is refused with a reason instead of
/// crashing the process.
///
/// protobuf-c 1.4 recurses once per nested message with no limit (a file of
/// a few hundred kilobytes can overflow the stack) and copies string fields
/// without checking that they are UTF-8. The guard bounds the nesting depth,
/// validates every string, checks each known field's wire type, and tells a
/// file cut short (a length running past the end) from bytes that are not a
/// model at all.
struct WireFormatGuard {
    /// Deepest message nesting accepted. Real models stay far below it: the
    /// deepest path in the fixtures (an ML program's nested tensor values) is
    /// under 20 levels.
    static let maximumDepth = 100

    enum Finding: Error, Equatable {
        /// A length or value runs past the end of the file.
        case truncated(String)
        /// The structure is invalid, or breaks a limit, at a known place.
        case malformed(String)
        /// The bytes are not protobuf, or not a Core ML model.
        case notCoreML(String)
    }

    /// A large value field of a `WeightParams` message: where its payload
    /// lies in the input, and which field it is.
    struct LargeWeightField: Equatable {
        let payload: Range<Int>
        let fieldNumber: UInt32
    }

    /// Payloads at least this large are worth unpacking without a copy of
    /// the whole input in memory (see `SkeletonUnpacker`).
    static let largeFieldThreshold = 4096
    /// The `WeightParams` fields that hold values: floatValue, float16Value,
    /// rawValue, int8RawValue.
    static let weightValueFields: Set<UInt32> = [1, 2, 30, 31]

    private let bytes: UnsafeRawBufferPointer
    private var path: [String] = []
    private var recognizedTopLevelFields = 0
    private let weightParams = messageDescriptor(core_ml__specification__weight_params__init,
                                                 CoreML__Specification__WeightParams())
    private var largeWeightFields: [LargeWeightField] = []

    private init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Checks `bytes` as a message of type `descriptor`; returns the large
    /// weight value fields found, in input order.
    @discardableResult
    static func check(
        _ bytes: UnsafeRawBufferPointer, as descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(Finding) -> [LargeWeightField] {
        var walker = WireFormatGuard(bytes: bytes)
        do {
            try walker.scan(from: 0, to: bytes.count, descriptor: descriptor, depth: 1)
        } catch {
            // Bytes that fail before any field of the model was recognized are
            // not a model with a defect, they are not a model.
            if walker.recognizedTopLevelFields == 0 {
                throw .notCoreML("the bytes do not form a Core ML specification")
            }
            throw error
        }
        if walker.recognizedTopLevelFields == 0 {
            throw .notCoreML("no field of a Core ML specification found")
        }
        return walker.largeWeightFields
    }

    /// Where the walk is, for messages: the field path, shortened when deep.
    private var location: String {
        if path.isEmpty { return "at the top level" }
        if path.count <= 8 { return "in \(path.joined(separator: "."))" }
        return "in \(path.prefix(4).joined(separator: "."))…\(path.suffix(2).joined(separator: ".")) "
            + "(\(path.count) levels down)"
    }

    private mutating func scan(
        from start: Int, to end: Int,
        descriptor: UnsafePointer<ProtobufCMessageDescriptor>, depth: Int
    ) throws(Finding) {
        var index = start
        while index < end {
            let tagOffset = index
            let tag = try readVarint(&index, end: end)
            let number = tag >> 3
            let wireType = Int(tag & 7)
            guard number >= 1, number <= 536_870_911 else {
                throw .malformed("invalid field number \(number) at byte \(tagOffset) \(location)")
            }
            let field = protobuf_c_message_descriptor_get_field(descriptor, UInt32(number))
            if depth == 1, field != nil { recognizedTopLevelFields += 1 }
            if let field {
                try checkWireType(wireType, of: field.pointee, at: tagOffset)
            }
            switch wireType {
            case 0:
                _ = try readVarint(&index, end: end)
            case 1:
                try skip(8, &index, end: end)
            case 5:
                try skip(4, &index, end: end)
            case 2:
                let length = try readVarint(&index, end: end)
                guard length <= UInt64(end - index) else {
                    if length > UInt64(bytes.count - index) {
                        throw .truncated("field \(fieldLabel(field, number)) \(location) declares \(length) bytes "
                            + "at byte \(index) but the file ends after \(bytes.count - index)")
                    }
                    throw .malformed("field \(fieldLabel(field, number)) \(location) declares \(length) bytes, "
                        + "more than its enclosing message holds")
                }
                let bodyEnd = index + Int(length)
                if let field {
                    try checkContents(of: field.pointee, from: index, to: bodyEnd, depth: depth)
                    if descriptor == weightParams, Self.weightValueFields.contains(UInt32(number)),
                       Int(length) >= Self.largeFieldThreshold {
                        largeWeightFields.append(LargeWeightField(payload: index..<bodyEnd, fieldNumber: UInt32(number)))
                    }
                }
                index = bodyEnd
            default:
                throw .malformed("field \(number) \(location) uses wire type \(wireType), which Core ML never writes")
            }
        }
    }

    private mutating func checkContents(
        of field: ProtobufCFieldDescriptor, from start: Int, to end: Int, depth: Int
    ) throws(Finding) {
        let name = String(cString: field.name)
        switch field.type {
        case PROTOBUF_C_TYPE_MESSAGE:
            guard depth < Self.maximumDepth else {
                throw .malformed("messages nest deeper than \(Self.maximumDepth) levels \(location)")
            }
            guard let nested = field.descriptor?.assumingMemoryBound(to: ProtobufCMessageDescriptor.self) else { return }
            path.append(name)
            try scan(from: start, to: end, descriptor: nested, depth: depth + 1)
            path.removeLast()
        case PROTOBUF_C_TYPE_STRING:
            let body = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            guard String(validating: body, as: UTF8.self) != nil else {
                throw .malformed("string field \(name) \(location) is not valid UTF-8 (bytes \(start)..<\(end))")
            }
        default:
            break
        }
    }

    private func checkWireType(_ wireType: Int, of field: ProtobufCFieldDescriptor, at offset: Int) throws(Finding) {
        let expected: Int
        switch field.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_UINT64,
             PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_BOOL, PROTOBUF_C_TYPE_ENUM:
            expected = 0
        case PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_SFIXED64, PROTOBUF_C_TYPE_DOUBLE:
            expected = 1
        case PROTOBUF_C_TYPE_FIXED32, PROTOBUF_C_TYPE_SFIXED32, PROTOBUF_C_TYPE_FLOAT:
            expected = 5
        default:
            expected = 2
        }
        let packedRepeated = field.label == PROTOBUF_C_LABEL_REPEATED && expected != 2 && wireType == 2
        guard wireType == expected || packedRepeated else {
            throw .malformed("field \(String(cString: field.name)) \(location) has wire type \(wireType) "
                + "at byte \(offset), expected \(expected)")
        }
    }

    private func fieldLabel(_ field: UnsafePointer<ProtobufCFieldDescriptor>?, _ number: UInt64) -> String {
        field.map { String(cString: $0.pointee.name) } ?? String(number)
    }

    private func readVarint(_ index: inout Int, end: Int) throws(Finding) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < end else {
                if end == bytes.count {
                    throw .truncated("the file ends inside a number at byte \(index) \(location)")
                }
                throw .malformed("a number runs past the end of its message at byte \(index) \(location)")
            }
            let byte = bytes[index]
            index += 1
            guard shift < 64 else {
                throw .malformed("a number longer than 10 bytes at byte \(index - 1) \(location)")
            }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    private func skip(_ count: Int, _ index: inout Int, end: Int) throws(Finding) {
        guard count <= end - index else {
            if end == bytes.count {
                throw .truncated("the file ends inside a \(count)-byte value at byte \(index) \(location)")
            }
            throw .malformed("a \(count)-byte value runs past the end of its message at byte \(index) \(location)")
        }
        index += count
    }
}
