import CoreMLSchema
import Glibc
import ModelSpec

/// Owns the C memory of specification messages built by hand for protobuf-c
/// to pack: every message, string and array allocated through it is freed
/// with it. Messages may also point into another tree (a base model's
/// layers) that outlives the arena's use; those are never freed here.
final class MessageArena {
    private var blocks: [UnsafeMutableRawPointer] = []

    deinit {
        for block in blocks { free(block) }
    }

    private func allocate(_ bytes: Int) -> UnsafeMutableRawPointer {
        guard let block = calloc(1, max(bytes, 1)) else { fatalError("out of memory") }
        blocks.append(block)
        return block
    }

    /// A message, initialized by its protobuf-c `__init` function, then by `fill`.
    func message<Message>(_ initialize: (UnsafeMutablePointer<Message>) -> Void,
                          _ fill: (inout Message) -> Void = { _ in }) -> UnsafeMutablePointer<Message> {
        let pointer = allocate(MemoryLayout<Message>.stride).bindMemory(to: Message.self, capacity: 1)
        initialize(pointer)
        fill(&pointer.pointee)
        return pointer
    }

    /// A NUL-terminated copy of `text`.
    func string(_ text: String) -> UnsafeMutablePointer<CChar> {
        let utf8 = Array(text.utf8CString)
        let pointer = allocate(utf8.count).bindMemory(to: CChar.self, capacity: utf8.count)
        pointer.initialize(from: utf8, count: utf8.count)
        return pointer
    }

    /// A C array holding `values` (count it separately); `nil` when empty.
    func array<Element>(_ values: [Element]) -> UnsafeMutablePointer<Element>? {
        guard !values.isEmpty else { return nil }
        let pointer = allocate(MemoryLayout<Element>.stride * values.count).bindMemory(to: Element.self, capacity: values.count)
        pointer.initialize(from: values, count: values.count)
        return pointer
    }

    /// A C array of pointers to `messages`.
    func pointers<Message>(_ messages: [UnsafeMutablePointer<Message>]) -> UnsafeMutablePointer<UnsafeMutablePointer<Message>?>? {
        array(messages.map { Optional($0) })
    }

    /// A C array of NUL-terminated copies of `texts`.
    func strings(_ texts: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        array(texts.map { Optional(string($0)) })
    }

    // MARK: Feature descriptions

    /// A `FeatureDescription` message for `description`. Writes the types a
    /// trained model's features have: int64, double, string, multi-arrays (data
    /// type and fixed shape) and dictionaries; any other type is left unset,
    /// which validation refuses.
    func feature(_ description: FeatureDescription) -> UnsafeMutablePointer<CoreML__Specification__FeatureDescription> {
        let type = featureType(description.type, isOptional: description.isOptional)
        return message(core_ml__specification__feature_description__init) { feature in
            feature.name = string(description.name)
            feature.shortdescription = string(description.shortDescription)
            feature.type = type
        }
    }

    private func featureType(_ type: FeatureType, isOptional: Bool) -> UnsafeMutablePointer<CoreML__Specification__FeatureType> {
        message(core_ml__specification__feature_type__init) { message in
            message.isoptional = isOptional ? 1 : 0
            switch type {
            case .int64:
                message.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE
                message.int64type = self.message(core_ml__specification__int64_feature_type__init)
            case .double:
                message.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE
                message.doubletype = self.message(core_ml__specification__double_feature_type__init)
            case .string:
                message.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE
                message.stringtype = self.message(core_ml__specification__string_feature_type__init)
            case .multiArray(let array):
                message.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE
                message.multiarraytype = self.message(core_ml__specification__array_feature_type__init) { message in
                    message.n_shape = array.shape.count
                    message.shape = self.array(array.shape)
                    let value = enumValue(core_ml__specification__array_feature_type__array_data_type__descriptor, named: array.dataType)
                    message.datatype = CoreML__Specification__ArrayFeatureType__ArrayDataType(rawValue: UInt32(bitPattern: value ?? 0))
                }
            case .dictionary(let keyType):
                message.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE
                message.dictionarytype = self.message(core_ml__specification__dictionary_feature_type__init) { message in
                    if keyType == "stringKeyType" {
                        message.key_type_case = CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE
                        message.stringkeytype = self.message(core_ml__specification__string_feature_type__init)
                    } else if keyType == "int64KeyType" {
                        message.key_type_case = CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_INT64_KEY_TYPE
                        message.int64keytype = self.message(core_ml__specification__int64_feature_type__init)
                    }
                }
            case .image, .sequence, .state, .unset:
                break
            }
        }
    }
}
