/// A neural-network layer's `WeightParams` as plain values: the values in the
/// form the file stores them, and how quantized codes map to floats.
///
/// A compiled bundle keeps the values in its weight file: there every form is
/// empty and only `quantization` comes from the specification.
public struct WeightParameters: Sendable, Equatable {
    /// `floatValue`.
    public var floatValue: [Float]
    /// `float16Value`: IEEE half floats, little-endian.
    public var float16Value: [UInt8]
    /// `rawValue`: unsigned codes of `quantization.numberOfBits` bits, most significant bit first.
    public var rawValue: [UInt8]
    /// `int8RawValue`: signed 8-bit codes.
    public var int8RawValue: [UInt8]
    /// `nil` when the message is left out.
    public var quantization: QuantizationParameters?
}

/// `QuantizationParams`: how quantized codes map to floats.
public struct QuantizationParameters: Sendable, Equatable {
    /// The mapping from code to value.
    public enum Mapping: Sendable, Equatable {
        /// `scale × code + bias`: one scale (and at most one bias) for all, or one per output channel.
        case linear(scale: [Float], bias: [Float])
        /// `floatValue[code]`.
        case lookupTable([Float])
        /// No mapping set, or its message left out.
        case unset
    }

    public var numberOfBits: UInt64
    public var mapping: Mapping
}
