import CoreMLSchema
import Glibc

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

    func feature(_ name: String, description: String, type: UnsafeMutablePointer<CoreML__Specification__FeatureType>)
        -> UnsafeMutablePointer<CoreML__Specification__FeatureDescription> {
        message(core_ml__specification__feature_description__init) { feature in
            feature.name = string(name)
            feature.shortdescription = string(description)
            feature.type = type
        }
    }

    /// A float32 or double vector of `count` elements.
    func vectorType(count: Int, dataType: CoreML__Specification__ArrayFeatureType__ArrayDataType)
        -> UnsafeMutablePointer<CoreML__Specification__FeatureType> {
        arrayType(shape: [Int64(count)], dataType: dataType)
    }

    /// A multi-array of a fixed `shape`.
    func arrayType(shape: [Int64], dataType: CoreML__Specification__ArrayFeatureType__ArrayDataType)
        -> UnsafeMutablePointer<CoreML__Specification__FeatureType> {
        let array: UnsafeMutablePointer<CoreML__Specification__ArrayFeatureType> = message(core_ml__specification__array_feature_type__init) { array in
            array.n_shape = shape.count
            array.shape = self.array(shape)
            array.datatype = dataType
        }
        return message(core_ml__specification__feature_type__init) { type in
            type.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE
            type.multiarraytype = array
        }
    }

    func stringType() -> UnsafeMutablePointer<CoreML__Specification__FeatureType> {
        let string: UnsafeMutablePointer<CoreML__Specification__StringFeatureType> = message(core_ml__specification__string_feature_type__init)
        return message(core_ml__specification__feature_type__init) { type in
            type.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE
            type.stringtype = string
        }
    }

    /// A dictionary from string keys to doubles (class probabilities).
    func stringDictionaryType() -> UnsafeMutablePointer<CoreML__Specification__FeatureType> {
        let key: UnsafeMutablePointer<CoreML__Specification__StringFeatureType> = message(core_ml__specification__string_feature_type__init)
        let dictionary: UnsafeMutablePointer<CoreML__Specification__DictionaryFeatureType> = message(core_ml__specification__dictionary_feature_type__init) { dictionary in
            dictionary.key_type_case = CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE
            dictionary.stringkeytype = key
        }
        return message(core_ml__specification__feature_type__init) { type in
            type.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE
            type.dictionarytype = dictionary
        }
    }
}

/// The elements of a protobuf-c repeated message field.
func elements<Element>(_ pointer: UnsafeMutablePointer<UnsafeMutablePointer<Element>?>?, _ count: Int) -> [UnsafeMutablePointer<Element>] {
    guard let pointer else { return [] }
    return (0..<count).compactMap { pointer[$0] }
}

/// A C string of the tree, `""` for none.
func text(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
    pointer.map { String(cString: $0) } ?? ""
}
