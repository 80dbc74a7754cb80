/// Hand-encoded protobuf bytes, for tests that need models coremltools would
/// not write (hostile bytes, invalid or unusual models).
public enum Wire {
    public static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        repeat {
            var byte = UInt8(value & 0x7F)
            value >>= 7
            if value != 0 { byte |= 0x80 }
            bytes.append(byte)
        } while value != 0
        return bytes
    }

    public static func field(_ number: UInt64, varint value: UInt64) -> [UInt8] {
        varint(number << 3) + varint(value)
    }

    public static func field(_ number: UInt64, bytes body: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(body.count)) + body
    }

    // Field numbers of the Core ML schema used below (Model.proto, FeatureTypes.proto).
    public static let specificationVersion: UInt64 = 1
    public static let description: UInt64 = 2
    public static let descriptionInput: UInt64 = 1
    public static let featureName: UInt64 = 1
    public static let pipeline: UInt64 = 202
    public static let pipelineModels: UInt64 = 1

    /// A model whose pipeline nests `depth` pipelines.
    public static func nestedPipelines(depth: Int) -> [UInt8] {
        var model = field(specificationVersion, varint: 4)
        for _ in 0..<depth {
            let pipeline = field(pipelineModels, bytes: model)
            model = field(specificationVersion, varint: 4) + field(Wire.pipeline, bytes: pipeline)
        }
        return model
    }
}


extension Wire {
    public static func field(_ number: UInt64, string: String) -> [UInt8] {
        field(number, bytes: Array(string.utf8))
    }

    /// A packed repeated varint field (int64 / uint64 with non-negative values).
    public static func field(_ number: UInt64, varints: [UInt64]) -> [UInt8] {
        field(number, bytes: varints.flatMap(varint))
    }

    /// A negative int64 as protobuf encodes it (ten bytes, two's complement).
    public static func signed(_ value: Int64) -> UInt64 { UInt64(bitPattern: value) }

    /// A packed repeated float field.
    public static func field(_ number: UInt64, floats: [Float]) -> [UInt8] {
        field(number, bytes: floats.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) })
    }

    /// A multi-array feature description: `name`, float32, shape `[size]`.
    public static func arrayFeature(_ name: String, size: UInt64) -> [UInt8] {
        arrayFeatureWithShape(name, shape: [size])
    }

    /// A multi-array feature description: `name`, float32, `shape`.
    public static func arrayFeatureWithShape(_ name: String, shape: [UInt64]) -> [UInt8] {
        let arrayType = field(1, bytes: shape.flatMap(varint)) + field(2, varint: 65568)  // shape (packed), dataType FLOAT32
        return field(1, bytes: Array(name.utf8)) + field(3, bytes: field(5, bytes: arrayType))
    }

    /// A neural network (spec version 1) of inner-product layers `x → … → y`
    /// with the given weight matrices (each `outputs × inputs`, row-major).
    public static func innerProductNetwork(layers weights: [(inputs: UInt64, outputs: UInt64, values: [Float])]) -> [UInt8] {
        let first = weights.first?.inputs ?? 1
        let last = weights.last?.outputs ?? 1
        let description = field(1, bytes: arrayFeature("x", size: first)) + field(10, bytes: arrayFeature("y", size: last))
        var layers: [UInt8] = []
        for (index, layer) in weights.enumerated() {
            let input = index == 0 ? "x" : "h\(index)"
            let output = index == weights.count - 1 ? "y" : "h\(index + 1)"
            let parameters = field(1, varint: layer.inputs) + field(2, varint: layer.outputs)
                + field(20, bytes: field(1, floats: layer.values))
            let body = field(1, bytes: Array("dense\(index)".utf8)) + field(2, bytes: Array(input.utf8))
                + field(3, bytes: Array(output.utf8)) + field(140, bytes: parameters)
            layers += field(1, bytes: body)
        }
        return field(1, varint: 1) + field(2, bytes: description) + field(500, bytes: layers)
    }
}
