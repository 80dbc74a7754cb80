import ModelFeatures
import ModelLoader
import ModelSpec

/// Turns a layer's `WeightParams` into float32 values, whatever form they are
/// stored in: float32 or float16 values, linearly quantized (1–8 bits, one
/// scale and bias per output channel or for all), a lookup table, or int8.
///
/// In a compiled bundle the values live in the weight file and the
/// specification keeps only the quantization parameters; a source model holds
/// the values inline. Decoding happens once, when the network is lowered onto
/// the tensor engine (which reads no bundle itself: it gets these values
/// through a `NetworkWeightReader`).
struct WeightDecoder {
    /// The bundle the specification came from, if it came from one.
    let bundle: ModelBundle?

    init(bundle: ModelBundle?) {
        self.bundle = bundle
    }

    /// The values of `params` (of layer `layer`, at `role`), or `nil` when it
    /// holds none.
    ///
    /// - Parameter channels: the number of output channels, for per-channel
    ///   linear quantization (the values are grouped by channel, outermost).
    func floats(_ weights: WeightParameters?, layer: String, role: String,
                channels: Int = 1) throws(RuntimeError) -> [Float]? {
        guard let weights else { return nil }
        if !weights.floatValue.isEmpty { return weights.floatValue }
        if !weights.float16Value.isEmpty { return weights.float16Value.withUnsafeBytes(Self.halves) }
        if !weights.rawValue.isEmpty {
            return try dequantize(weights.rawValue, signed: false, quantization: weights.quantization, layer: layer, role: role, channels: channels)
        }
        if !weights.int8RawValue.isEmpty {
            return try dequantize(weights.int8RawValue, signed: true, quantization: weights.quantization, layer: layer, role: role, channels: channels)
        }
        guard let view = bundle?.weight(owner: layer, role: role) else { return nil }
        switch view.dataType {
        case .float32: return view.float32Values.map(Array.init)
        case .float16: return Self.halves(view.bytes)
        case .uint8: return try dequantize(view.bytes, signed: false, quantization: weights.quantization, layer: layer, role: role, channels: channels)
        case .int8: return try dequantize(view.bytes, signed: true, quantization: weights.quantization, layer: layer, role: role, channels: channels)
        default:
            throw .unsupportedLayer(layer: layer, kind: role, reason: "weights stored as \(view.dataType) are not a neural-network weight form")
        }
    }

    private static func halves(_ bytes: UnsafeRawBufferPointer) -> [Float] {
        (0..<(bytes.count / 2)).map { Float(Float16(bitPattern: bytes.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self))) }
    }

    /// Unpacks `bits`-wide values (most significant bit first, as Core ML
    /// packs them) and maps them through the linear parameters or the table.
    private func dequantize<Bytes: RandomAccessCollection<UInt8>>(
        _ bytes: Bytes, signed: Bool, quantization: QuantizationParameters?, layer: String, role: String, channels: Int
    ) throws(RuntimeError) -> [Float] where Bytes.Index == Int {
        let owner = "layer \"\(layer)\""
        guard let quantization else {
            if signed { return bytes.map { Float(Int8(bitPattern: $0)) } }
            throw .invalidParameters(model: owner, detail: "\(role) is quantized but has no quantization parameters")
        }
        let bits = signed ? 8 : Int(quantization.numberOfBits)
        guard (1...8).contains(bits) else {
            throw .invalidParameters(model: owner, detail: "\(role) has \(bits)-bit quantization; 1 to 8 bits are defined")
        }
        let count = bytes.count * 8 / bits
        var codes = [Int](repeating: 0, count: count)
        if bits == 8 {
            for index in 0..<count { codes[index] = signed ? Int(Int8(bitPattern: bytes[index])) : Int(bytes[index]) }
        } else {
            for index in 0..<count {
                var code = 0
                for bit in 0..<bits {
                    let position = index * bits + bit
                    let byte = bytes[position / 8]
                    code = code << 1 | Int(byte >> (7 - position % 8) & 1)
                }
                codes[index] = code
            }
        }
        switch quantization.mapping {
        case .linear(let scales, let biases):
            guard !scales.isEmpty, scales.count == 1 || scales.count == channels,
                  biases.count <= 1 || biases.count == scales.count, count % max(channels, 1) == 0 else {
                throw .invalidParameters(model: owner, detail: "\(role): \(scales.count) scales for \(channels) channels")
            }
            let perChannel = count / max(channels, 1)
            return codes.enumerated().map { index, code in
                let channel = scales.count == 1 ? 0 : index / perChannel
                let bias = biases.isEmpty ? 0 : biases[biases.count == 1 ? 0 : channel]
                return scales[channel] * Float(code) + bias
            }
        case .lookupTable(let values):
            guard values.count >= 1 << bits else {
                throw .invalidParameters(model: owner, detail: "\(role): a lookup table of \(values.count) values for \(bits)-bit codes")
            }
            return codes.map { values[$0] }
        case .unset:
            break
        }
        throw .invalidParameters(model: owner, detail: "\(role) is quantized without linear or lookup-table parameters")
    }
}
