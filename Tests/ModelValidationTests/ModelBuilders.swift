import FixtureSupport
import Foundation

/// Builders for the Core ML messages the tests need; field numbers are the
/// schema's (Model.proto, FeatureTypes.proto, NeuralNetwork.proto).
enum Build {
    static let float32: UInt64 = 65568
    static let float16: UInt64 = 65552

    static func arrayType(shape: [Int64], dataType: UInt64 = float32) -> [UInt8] {
        var array = Wire.field(2, varint: dataType)
        if !shape.isEmpty { array = Wire.field(1, varints: shape.map(Wire.signed)) + array }
        return Wire.field(5, bytes: array)
    }

    static func imageType(width: UInt64, height: UInt64, colorSpace: UInt64 = 20) -> [UInt8] {
        Wire.field(4, bytes: Wire.field(1, varint: width) + Wire.field(2, varint: height) + Wire.field(3, varint: colorSpace))
    }

    static func feature(_ name: String, _ type: [UInt8], optional: Bool = false) -> [UInt8] {
        let typeBody = type + (optional ? Wire.field(1000, varint: 1) : [])
        return Wire.field(1, string: name) + Wire.field(3, bytes: typeBody)
    }

    static func description(inputs: [[UInt8]], outputs: [[UInt8]]) -> [UInt8] {
        inputs.flatMap { Wire.field(1, bytes: $0) } + outputs.flatMap { Wire.field(10, bytes: $0) }
    }

    static func model(version: UInt64 = 4, inputs: [[UInt8]], outputs: [[UInt8]], body: [UInt8]) -> [UInt8] {
        Wire.field(1, varint: version) + Wire.field(2, bytes: description(inputs: inputs, outputs: outputs)) + body
    }

    static func weights(_ values: [Float]) -> [UInt8] {
        Wire.field(1, floats: values)
    }

    static func innerProduct(_ name: String, input: String, output: String, inputs: UInt64, outputs: UInt64,
                             weights: [UInt8], bias: [UInt8]? = nil, hasBias: Bool = true) -> [UInt8] {
        var params = Wire.field(1, varint: inputs) + Wire.field(2, varint: outputs) + Wire.field(20, bytes: weights)
        if let bias { params += (hasBias ? Wire.field(10, varint: 1) : []) + Wire.field(21, bytes: bias) }
        return Wire.field(1, string: name) + Wire.field(2, string: input) + Wire.field(3, string: output)
            + Wire.field(140, bytes: params)
    }

    static func relu(_ name: String, input: String, output: String) -> [UInt8] {
        Wire.field(1, string: name) + Wire.field(2, string: input) + Wire.field(3, string: output)
            + Wire.field(130, bytes: Wire.field(10, bytes: []))
    }

    /// A `neuralNetwork` model field holding `layers`.
    static func network(_ layers: [[UInt8]]) -> [UInt8] {
        Wire.field(500, bytes: layers.flatMap { Wire.field(1, bytes: $0) })
    }

    /// A valid network: input x[4] → inner product 4→2 → y[2].
    static func dense(weights: [UInt8] = weights(Array(repeating: 0.5, count: 8)), bias: [UInt8]? = nil,
                      hasBias: Bool = true, version: UInt64 = 4) -> [UInt8] {
        model(version: version,
              inputs: [feature("x", arrayType(shape: [4]))], outputs: [feature("y", arrayType(shape: [2]))],
              body: network([innerProduct("fc", input: "x", output: "y", inputs: 4, outputs: 2, weights: weights,
                                          bias: bias, hasBias: hasBias)]))
    }
}
