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
