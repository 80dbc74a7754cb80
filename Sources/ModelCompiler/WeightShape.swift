import CoreMLSchema
import ModelSpec

/// The shape of a weight tensor as its layer or operation declares it, for
/// the weight index; `nil` when nothing declares one that matches the values.
enum WeightShape {
    static func of(_ site: WeightLocation, count: Int) -> [Int]? {
        let shape: [UInt64]? = switch site.holder {
        case .weightParams:
            site.layer.flatMap { layerShape($0.pointee, role: site.role) }
        case .programValue(let value):
            programShape(value.pointee)
        }
        guard let shape, shape.allSatisfy({ $0 <= UInt64(Int.max) }) else { return nil }
        let dimensions = shape.map { Int($0) }
        var product = 1
        for dimension in dimensions {
            let (next, overflow) = product.multipliedReportingOverflow(by: dimension)
            guard !overflow else { return nil }
            product = next
        }
        return product == count ? dimensions : nil
    }

    private static func layerShape(_ layer: CoreML__Specification__NeuralNetworkLayer, role: String) -> [UInt64]? {
        switch layer.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION:
            guard let conv = layer.convolution?.pointee else { return nil }
            if role == "bias" { return [conv.outputchannels] }
            let kernel = scalars(conv.kernelsize, conv.n_kernelsize)
            guard role == "weights", kernel.count == 2 else { return nil }
            return conv.isdeconvolution != 0
                ? [conv.kernelchannels, conv.outputchannels / max(conv.ngroups, 1)] + kernel
                : [conv.outputchannels, conv.kernelchannels] + kernel
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT:
            guard let params = layer.innerproduct?.pointee else { return nil }
            return role == "bias" ? [params.outputchannels] : [params.outputchannels, params.inputchannels]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM:
            return layer.batchnorm.map { [$0.pointee.channels] }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING:
            guard let params = layer.embedding?.pointee else { return nil }
            return role == "bias" ? [params.outputchannels] : [params.outputchannels, params.inputdim]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING_ND:
            guard let params = layer.embeddingnd?.pointee else { return nil }
            return role == "bias" ? [params.embeddingsize] : [params.embeddingsize, params.vocabsize]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHED_MATMUL:
            guard let params = layer.batchedmatmul?.pointee else { return nil }
            return role == "bias"
                ? [params.weightmatrixseconddimension]
                : [params.weightmatrixfirstdimension, params.weightmatrixseconddimension]
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCALE:
            guard let params = layer.scale?.pointee else { return nil }
            return role == "bias" ? scalars(params.shapebias, params.n_shapebias) : scalars(params.shapescale, params.n_shapescale)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BIAS:
            return layer.bias.map { scalars($0.pointee.shape, $0.pointee.n_shape) }
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT:
            return layer.loadconstant.map { scalars($0.pointee.shape, $0.pointee.n_shape) }
        default:
            return nil
        }
    }

    private static func programShape(_ value: CoreML__Specification__MILSpec__Value) -> [UInt64]? {
        guard value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE,
              let tensor = value.type?.pointee.tensortype?.pointee
        else { return nil }
        var shape: [UInt64] = []
        for dimension in elements(tensor.dimensions, tensor.n_dimensions) {
            guard dimension.pointee.dimension_case == CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT,
                  let size = dimension.pointee.constant?.pointee.size
            else { return nil }
            shape.append(size)
        }
        return shape
    }
}
