import CoreMLSchema

/// A read-only view of one unpacked protobuf-c message, driven by its
/// descriptor rather than by its generated C struct.
///
/// The generated structs give typed access where code knows which message it
/// holds; this view serves code that must treat every message alike: naming a
/// oneof case, finding every `WeightParams` inside any of the 158 layer kinds,
/// walking a tree. It borrows memory owned by a `Specification`.
package struct MessageView {
    package let pointer: UnsafeRawPointer

    package init(_ message: UnsafeRawPointer) {
        pointer = message
    }

    package init<Message>(_ message: UnsafePointer<Message>) {
        pointer = UnsafeRawPointer(message)
    }

    package var descriptor: UnsafePointer<ProtobufCMessageDescriptor> {
        pointer.assumingMemoryBound(to: ProtobufCMessage.self).pointee.descriptor
    }

    /// The full protobuf name, e.g. `CoreML.Specification.WeightParams`.
    package var typeName: String { String(cString: descriptor.pointee.name) }

    package var fields: UnsafeBufferPointer<ProtobufCFieldDescriptor> {
        UnsafeBufferPointer(start: descriptor.pointee.fields, count: Int(descriptor.pointee.n_fields))
    }

    /// The schema name of field `number` of this message, if the schema has one.
    package func fieldName(number: UInt32) -> String? {
        guard let field = protobuf_c_message_descriptor_get_field(descriptor, UInt32(number)) else { return nil }
        return String(cString: field.pointee.name)
    }

    package func field(named name: String) -> UnsafePointer<ProtobufCFieldDescriptor>? {
        protobuf_c_message_descriptor_get_field_by_name(descriptor, name)
    }

    /// The messages held by `field`: none, one, or each element of a repeated field.
    ///
    /// A oneof member counts only when it is the case that is set.
    package func messages(in field: ProtobufCFieldDescriptor) -> [MessageView] {
        guard field.type == PROTOBUF_C_TYPE_MESSAGE else { return [] }
        let slot = pointer + Int(field.offset)
        if field.label == PROTOBUF_C_LABEL_REPEATED {
            let count = (pointer + Int(field.quantifier_offset)).load(as: Int.self)
            guard count > 0, let array = slot.load(as: UnsafeRawPointer?.self) else { return [] }
            return (0..<count).compactMap { index in
                array.load(fromByteOffset: index * MemoryLayout<UnsafeRawPointer>.stride, as: UnsafeRawPointer?.self)
                    .map(MessageView.init)
            }
        }
        if field.flags & UInt32(PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue) != 0 {
            let activeCase = (pointer + Int(field.quantifier_offset)).load(as: UInt32.self)
            guard activeCase == field.id else { return [] }
        }
        return slot.load(as: UnsafeRawPointer?.self).map { [MessageView($0)] } ?? []
    }

    /// The message held by the singular field `name`, if set.
    package func message(named name: String) -> MessageView? {
        guard let field = field(named: name) else { return nil }
        return messages(in: field.pointee).first
    }

    /// Unknown fields the parser kept, by field number.
    package var unknownFieldNumbers: [UInt32] {
        let base = pointer.assumingMemoryBound(to: ProtobufCMessage.self).pointee
        guard base.n_unknown_fields > 0, let unknown = base.unknown_fields else { return [] }
        return (0..<Int(base.n_unknown_fields)).map { unknown[$0].tag }
    }
}

/// The schema name of `value` in a protobuf-c enum, e.g. `FLOAT32`, or
/// `"unknown(7)"` for a value the schema does not define.
///
/// Takes the generated descriptor global itself (`core_ml__…__descriptor`).
/// The pointer to it is used only during the lookup: Swift may hand a C
/// global to `withUnsafePointer` as a temporary copy, which must not escape.
/// The returned name lives in the descriptor's static value table.
package func enumValueName(_ descriptor: ProtobufCEnumDescriptor, _ value: Int32) -> String {
    withUnsafePointer(to: descriptor) { pointer in
        guard let entry = protobuf_c_enum_descriptor_get_value(pointer, value) else { return "unknown(\(value))" }
        return String(cString: entry.pointee.name)
    }
}

/// The value named `name` (e.g. `FLOAT32`) in a protobuf-c enum, or `nil`
/// when the schema defines no such name; the inverse of `enumValueName`.
package func enumValue(_ descriptor: ProtobufCEnumDescriptor, named name: String) -> Int32? {
    withUnsafePointer(to: descriptor) { pointer in
        protobuf_c_enum_descriptor_get_value_by_name(pointer, name).map { $0.pointee.value }
    }
}

/// The address of a generated message descriptor, read from a message its
/// `init` function filled in; protobuf-c keeps this address in every message
/// it unpacks, so it must be the C global's own.
package func messageDescriptor<Message>(
    _ initialize: (UnsafeMutablePointer<Message>) -> Void, _ empty: Message
) -> UnsafePointer<ProtobufCMessageDescriptor> {
    var message = empty
    initialize(&message)
    return withUnsafeBytes(of: &message) { raw in raw.load(as: ProtobufCMessage.self).descriptor }
}

/// A C string from protobuf-c as Swift text; empty for `NULL`.
///
/// Strings were checked to be UTF-8 before unpacking (`WireFormatGuard`).
package func text(_ pointer: UnsafePointer<CChar>?) -> String {
    guard let pointer else { return "" }
    return String(cString: pointer)
}

/// The elements of a protobuf-c repeated message field (`n_x`, `x`).
package func elements<Element>(_ base: UnsafeMutablePointer<UnsafeMutablePointer<Element>?>?, _ count: Int) -> [UnsafeMutablePointer<Element>] {
    guard let base, count > 0 else { return [] }
    return (0..<count).compactMap { base[$0] }
}

/// The elements of a protobuf-c repeated string field.
package func strings(_ base: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ count: Int) -> [String] {
    guard let base, count > 0 else { return [] }
    return (0..<count).map { text(base[$0]) }
}

/// The elements of a protobuf-c repeated scalar field.
package func scalars<Element>(_ base: UnsafeMutablePointer<Element>?, _ count: Int) -> [Element] {
    guard let base, count > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: base, count: count))
}
