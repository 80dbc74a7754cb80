/// Hand-encoded MIL messages (MIL.proto field numbers), built on `Wire`.
public enum MILWire {
    public static func string(_ number: UInt64, _ value: String) -> [UInt8] {
        Wire.field(number, bytes: Array(value.utf8))
    }

    /// A map entry: key 1, value 2.
    public static func entry(_ number: UInt64, key: String, value: [UInt8]) -> [UInt8] {
        Wire.field(number, bytes: string(1, key) + Wire.field(2, bytes: value))
    }

    /// A `ValueType` holding a tensor type; `nil` dimensions are unknown.
    public static func tensorType(_ dataType: UInt64, _ dimensions: [UInt64?]) -> [UInt8] {
        let encoded = dimensions.map { size in
            Wire.field(3, bytes: size.map { Wire.field(1, bytes: Wire.field(1, varint: $0)) } ?? Wire.field(2, bytes: []))
        }
        // Canonical proto3: a rank of 0 (the default) is not written.
        let rank = dimensions.isEmpty ? [] : Wire.field(2, varint: UInt64(dimensions.count))
        let tensor = Wire.field(1, varint: dataType) + rank + encoded.flatMap { $0 }
        return Wire.field(1, bytes: tensor)
    }

    public static func named(_ name: String, _ type: [UInt8]) -> [UInt8] {
        string(1, name) + Wire.field(2, bytes: type)
    }

    /// A `Value` of `type` holding an immediate tensor value.
    public static func immediate(_ type: [UInt8], tensor: [UInt8]) -> [UInt8] {
        Wire.field(2, bytes: type) + Wire.field(3, bytes: Wire.field(1, bytes: tensor))
    }

    public static func stringValue(_ value: String) -> [UInt8] {
        immediate(tensorType(DataType.string, []), tensor: Wire.field(4, bytes: string(1, value)))
    }

    public static func boolValue(_ value: Bool) -> [UInt8] {
        immediate(tensorType(DataType.bool, []), tensor: Wire.field(3, bytes: Wire.field(1, bytes: [value ? 1 : 0])))
    }

    public static func int32Value(_ value: UInt64) -> [UInt8] {
        immediate(tensorType(DataType.int32, []), tensor: Wire.field(2, bytes: Wire.field(1, bytes: Wire.varint(value))))
    }

    public enum Binding {
        case name(String)
        case value([UInt8])
    }

    public static func operation(_ type: String, inputs: [(String, [Binding])] = [], outputs: [[UInt8]],
                          blocks: [[UInt8]] = [], attributes: [(String, [UInt8])]) -> [UInt8] {
        let arguments = inputs.map { key, bindings in
            entry(2, key: key, value: bindings.flatMap { binding in
                switch binding {
                case .name(let name): Wire.field(1, bytes: string(1, name))
                case .value(let value): Wire.field(1, bytes: Wire.field(2, bytes: value))
                }
            })
        }
        return string(1, type) + arguments.flatMap { $0 } + outputs.flatMap { Wire.field(3, bytes: $0) }
            + blocks.flatMap { Wire.field(4, bytes: $0) } + attributes.flatMap { entry(5, key: $0.0, value: $0.1) }
    }

    public static func block(outputs: [String], operations: [[UInt8]]) -> [UInt8] {
        outputs.flatMap { string(2, $0) } + operations.flatMap { Wire.field(3, bytes: $0) }
    }

    /// A model (specification version 8) whose ML program has one function.
    public static func model(opset: String, inputs: [[UInt8]], block: [UInt8], attributes: [(String, [UInt8])]) -> [UInt8] {
        let function = inputs.flatMap { Wire.field(1, bytes: $0) } + string(2, opset) + entry(3, key: opset, value: block)
        let program = Wire.field(1, varint: 1) + entry(2, key: "main", value: function)
            + attributes.flatMap { entry(4, key: $0.0, value: $0.1) }
        return Wire.field(1, varint: 8) + Wire.field(502, bytes: program)
    }

    public enum DataType {
        public static let bool: UInt64 = 1
        public static let string: UInt64 = 2
        public static let float16: UInt64 = 10
        public static let float32: UInt64 = 11
        public static let int32: UInt64 = 23
    }
}


extension MILWire {
    public static let int8: UInt64 = 21

    /// A multi-array feature (FLOAT32) for a model description.
    public static func arrayFeature(_ name: String, shape: [UInt64]) -> [UInt8] {
        Wire.arrayFeatureWithShape(name, shape: shape)
    }

    /// A model (specification version 8) with a description and an ML program
    /// whose main function has one block.
    public static func describedModel(
        inputs: [(String, [UInt64])], outputs: [(String, [UInt64])], opset: String, block: [UInt8]
    ) -> [UInt8] {
        let description = inputs.flatMap { Wire.field(1, bytes: arrayFeature($0.0, shape: $0.1)) }
            + outputs.flatMap { Wire.field(10, bytes: arrayFeature($0.0, shape: $0.1)) }
        let functionInputs = inputs.map { named($0.0, tensorType(DataType.float32, $0.1.map { Optional($0) })) }
        let function = functionInputs.flatMap { Wire.field(1, bytes: $0) } + string(2, opset) + entry(3, key: opset, value: block)
        let program = Wire.field(1, varint: 1) + entry(2, key: "main", value: function)
        return Wire.field(1, varint: 8) + Wire.field(2, bytes: description) + Wire.field(502, bytes: program)
    }
}

extension MILWire {
    /// A `Value` of `type` held in the weight file `file` at the record `offset`.
    public static func blobValue(_ type: [UInt8], offset: UInt64, file: String = "@model_path/weights/weight.bin") -> [UInt8] {
        Wire.field(2, bytes: type) + Wire.field(5, bytes: string(1, file) + Wire.field(2, varint: offset))
    }

    /// Sub-byte MIL data type codes (MIL.proto).
    public enum SubByte {
        public static let int4: UInt64 = 25
        public static let uint4: UInt64 = 35
        public static let uint2: UInt64 = 36
        public static let uint1: UInt64 = 37
        public static let uint6: UInt64 = 38
        public static let uint3: UInt64 = 39
    }
}

/// Writes MIL blob storage files (version 2) for tests: a 64-byte header,
/// then each blob's 64-byte record and data on 64-byte boundaries.
public enum MILBlobFileBuilder {
    public struct Blob {
        public var dataType: UInt32
        public var data: [UInt8]
        public var paddingBits: UInt64

        public init(dataType: UInt32, data: [UInt8], paddingBits: UInt64 = 0) {
            self.dataType = dataType
            self.data = data
            self.paddingBits = paddingBits
        }
    }

    /// The file's bytes and the record offset of each blob.
    public static func make(_ blobs: [Blob]) -> (bytes: [UInt8], offsets: [UInt64]) {
        var bytes = [UInt8](repeating: 0, count: 64)
        put(UInt32(blobs.count), into: &bytes, at: 0)
        put(UInt32(2), into: &bytes, at: 4)
        var offsets: [UInt64] = []
        for blob in blobs {
            while bytes.count % 64 != 0 { bytes.append(0) }
            let record = bytes.count
            offsets.append(UInt64(record))
            bytes += [UInt8](repeating: 0, count: 64)
            put(UInt32(0xDEAD_BEEF), into: &bytes, at: record)
            put(blob.dataType, into: &bytes, at: record + 4)
            put(UInt64(blob.data.count), into: &bytes, at: record + 8)
            put(UInt64(record + 64), into: &bytes, at: record + 16)
            put(blob.paddingBits, into: &bytes, at: record + 24)
            bytes += blob.data
        }
        return (bytes, offsets)
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
        }
    }
}
