/// `weights/index.json`: where each weight of `model.spec` lives in
/// `weights/weight.bin`, and how the source model stored it.
public struct WeightIndex: Codable, Equatable, Sendable {
    public struct Entry: Codable, Equatable, Sendable {
        /// The field path of the weight in the specification, from the root
        /// `Model` message: field names, `[i]` for repeated elements, `[key]`
        /// for map entries (e.g. `neuralNetworkClassifier.layers[0].convolution.weights`).
        public var path: String
        /// The layer name (neural networks) or the operation's output name (ML programs).
        public var owner: String
        /// The weight's role within its owner: the field path inside the
        /// layer's parameters (`weights`, `bias`), or the attribute name (`val`).
        public var role: String
        /// How the source stored the values: `floatValue`, `float16Value`,
        /// `rawValue`, `int8RawValue` (neural networks), `blobFileValue` or
        /// `immediateValue` (ML programs).
        public var source: String
        /// The data type of the stored blob (`float32`, `float16`, `uint8`,
        /// `int8`, `int32`, …; see MILBlobFile.DataType).
        public var dataType: String
        /// The number of values.
        public var count: Int
        /// The tensor's shape as its layer or operation declares it (whose
        /// product is `count`); absent when nothing declares one.
        public var shape: [Int]?
        /// Bits per value when `source` is `rawValue` (quantized).
        public var quantizationBits: Int?
        /// The offset of the blob's metadata record in the weight file.
        public var blobOffset: UInt64
        /// The offset of the blob's data in the weight file.
        public var dataOffset: UInt64
        /// The size of the blob's data in bytes.
        public var bytes: UInt64

        public init(path: String, owner: String, role: String, source: String, dataType: String, count: Int,
                    shape: [Int]?, quantizationBits: Int?, blobOffset: UInt64, dataOffset: UInt64, bytes: UInt64) {
            self.path = path
            self.owner = owner
            self.role = role
            self.source = source
            self.dataType = dataType
            self.count = count
            self.shape = shape
            self.quantizationBits = quantizationBits
            self.blobOffset = blobOffset
            self.dataOffset = dataOffset
            self.bytes = bytes
        }
    }

    /// In the order the specification holds them.
    public var weights: [Entry]

    public init(weights: [Entry]) {
        self.weights = weights
    }
}

extension WeightIndex {
    /// Reads `weights/index.json` with the bundle's own JSON reader; `nil`
    /// when it is not a valid index (a key missing, a value of the wrong type).
    static func read(_ bytes: UnsafeRawBufferPointer) -> WeightIndex? {
        guard let document = try? JSONScanner.parse(bytes), let list = document["weights"]?.array else { return nil }
        var entries: [Entry] = []
        entries.reserveCapacity(list.count)
        for item in list {
            guard let path = item["path"]?.string, let owner = item["owner"]?.string, let role = item["role"]?.string,
                  let source = item["source"]?.string, let dataType = item["dataType"]?.string,
                  let count = item["count"]?.integer, count >= 0,
                  let blobOffset = item["blobOffset"]?.integer, blobOffset >= 0,
                  let dataOffset = item["dataOffset"]?.integer, dataOffset >= 0,
                  let bytes = item["bytes"]?.integer, bytes >= 0
            else { return nil }
            var shape: [Int]?
            if let dimensions = item["shape"] {
                guard let values = dimensions.array?.compactMap({ $0.integer }), values.count == dimensions.array?.count,
                      values.allSatisfy({ $0 >= 0 })
                else { return nil }
                shape = values.map { Int($0) }
            }
            var bits: Int?
            if let value = item["quantizationBits"] {
                guard let number = value.integer else { return nil }
                bits = Int(number)
            }
            entries.append(Entry(path: path, owner: owner, role: role, source: source, dataType: dataType,
                                 count: Int(count), shape: shape, quantizationBits: bits,
                                 blobOffset: UInt64(blobOffset), dataOffset: UInt64(dataOffset), bytes: UInt64(bytes)))
        }
        return WeightIndex(weights: entries)
    }
}
