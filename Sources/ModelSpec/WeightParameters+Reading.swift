import CoreMLSchema

extension WeightParameters {
    /// The values of `params`; `nil` when there is no message.
    package init?(_ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>?) {
        guard let weights = params?.pointee else { return nil }
        floatValue = scalars(weights.floatvalue, weights.n_floatvalue)
        float16Value = bytes(weights.float16value)
        rawValue = bytes(weights.rawvalue)
        int8RawValue = bytes(weights.int8rawvalue)
        quantization = weights.quantization.map { QuantizationParameters($0.pointee) }
    }
}

extension QuantizationParameters {
    init(_ quantization: CoreML__Specification__QuantizationParams) {
        numberOfBits = quantization.numberofbits
        switch quantization.quantization_type_case {
        case CORE_ML__SPECIFICATION__QUANTIZATION_PARAMS__QUANTIZATION_TYPE_LINEAR_QUANTIZATION:
            mapping = quantization.linearquantization.map {
                .linear(scale: scalars($0.pointee.scale, $0.pointee.n_scale), bias: scalars($0.pointee.bias, $0.pointee.n_bias))
            } ?? .unset
        case CORE_ML__SPECIFICATION__QUANTIZATION_PARAMS__QUANTIZATION_TYPE_LOOKUP_TABLE_QUANTIZATION:
            mapping = quantization.lookuptablequantization.map { .lookupTable(scalars($0.pointee.floatvalue, $0.pointee.n_floatvalue)) } ?? .unset
        default:
            mapping = .unset
        }
    }
}

/// The bytes of a protobuf-c `bytes` field.
private func bytes(_ data: ProtobufCBinaryData) -> [UInt8] {
    guard let base = data.data, data.len > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: base, count: data.len))
}
