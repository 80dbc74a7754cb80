import ModelSpec

/// Rough sizes of what engines keep in memory, for a cache's budget: element
/// storage only, without the few bytes of headers Swift adds to each
/// collection, and with each distinct array buffer counted once.
public struct ResidentBytes: Sendable {
    /// The addresses of the buffers added.
    private var seen: Set<Int> = []
    /// The bytes added so far.
    public private(set) var total = 0

    public init() {}

    /// Adds the elements of `array`, unless its buffer was added before (a
    /// plan's step often shares its weights with the graph's layer).
    public mutating func add<Element>(_ array: [Element]?) {
        guard let array, !array.isEmpty,
              let base = array.withUnsafeBytes({ $0.baseAddress }), seen.insert(Int(bitPattern: base)).inserted
        else { return }
        total += Self.of(array)
    }

    /// Adds a number of bytes counted elsewhere.
    public mutating func add(bytes: Int) {
        total += bytes
    }

    /// The bytes of an array's elements (strings by their UTF-8 bytes too).
    public static func of<Element>(_ array: [Element]) -> Int {
        array.count * MemoryLayout<Element>.stride + stringBytes(array)
    }

    /// The bytes of a dictionary's keys and values (strings by their UTF-8
    /// bytes too), ignoring the hash table's spare capacity.
    public static func of<Key, Value>(_ dictionary: [Key: Value]) -> Int {
        dictionary.count * (MemoryLayout<Key>.stride + MemoryLayout<Value>.stride)
            + stringBytes(dictionary.keys) + stringBytes(dictionary.values)
    }

    /// The bytes of class labels.
    public static func of(_ labels: ClassLabels?) -> Int {
        switch labels {
        case .strings(let strings): of(strings)
        case .int64s(let numbers): of(numbers)
        case nil: 0
        }
    }

    /// The characters of strings and string labels (short ones are stored
    /// inline, but are counted all the same: this is a rough size); 0 for
    /// other elements, without looking at them.
    private static func stringBytes<Values: Sequence>(_ values: Values) -> Int {
        if Values.Element.self == String.self {
            return values.reduce(0) { $0 + (($1 as? String)?.utf8.count ?? 0) }
        }
        if Values.Element.self == ClassLabel.self {
            return values.reduce(0) { bytes, value in
                if case .string(let string) = value as? ClassLabel { bytes + string.utf8.count } else { bytes }
            }
        }
        return 0
    }
}
