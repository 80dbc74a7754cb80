import CDNNL
import Foundation
import ModelFeatures
import SystemIO

/// The tensor engine's oneDNN products, activations, softmax and layer
/// norm, made at plan time as `DNNLPrimitive`s with their slots (the run
/// arguments their kernels pass pointers for). They are prepared for one
/// OpenMP thread each: Debian's oneDNN threads through OpenMP, whose
/// barriers spin and stall when the cores are shared (BERT at 2 threads took
/// 8× longer than at 1 on a loaded machine), so a product's threads are
/// Dispatch's, each with its own block of rows (`LinearAlgebraOperations`).
enum DNNLKernels {
    /// A tensor operand: dimensions and element strides (transposes are strides).
    struct Operand {
        var dims: [Int]
        var strides: [Int]

        /// Row-major `dims`.
        init(_ dims: [Int]) {
            self.dims = dims
            strides = Shapes.strides(dims)
        }

        init(dims: [Int], strides: [Int]) {
            self.dims = dims
            self.strides = strides
        }

        var descriptor: DNNLDescriptor {
            get throws(RuntimeError) { try DNNLDescriptor(dims, strides: strides) }
        }
    }

    /// An activation oneDNN computes after a product, or on its own.
    enum Activation: Equatable {
        case geluExact, geluTanh, relu

        var algorithm: dnnl_alg_kind_t {
            switch self {
            case .geluExact: dnnl_eltwise_gelu_erf
            case .geluTanh: dnnl_eltwise_gelu_tanh
            case .relu: dnnl_eltwise_relu
            }
        }
    }

    // MARK: Matrix products

    /// `source · weights (+ bias) → activation (+ residual)`. Slots: source,
    /// then weights unless constant, destination, then the residual if any.
    ///
    /// - Parameters:
    ///   - constantWeights: the weights' values laid out as `weights` says;
    ///     reordered now into the layout oneDNN's kernel reads (the caller may
    ///     drop its copy), so nothing is packed per run.
    ///   - bias: one value per column, added to every row.
    ///   - residual: a row-major tensor of the destination's dims added to the result.
    ///   - scale: a factor every result is multiplied by first (attention's 1/√d).
    ///   - sharingWeightsWith: a product over the same constant weights (other
    ///     rows, another plan): its packed weights are read when oneDNN wants the same layout.
    /// - Throws: when oneDNN is unavailable or refuses the shapes.
    static func matmul(source sourceOperand: Operand, weights weightsOperand: Operand, destination destinationOperand: Operand,
                       constantWeights: UnsafeBufferPointer<Float>?, bias biasValues: [Float]?, activation: Activation?,
                       residual: Operand?, threads: Int, sharingWeightsWith other: DNNLPrimitive? = nil,
                       scale: Float? = nil) throws(RuntimeError) -> DNNLPrimitive {
        let source = try sourceOperand.descriptor, destination = try destinationOperand.descriptor
        let givenWeights = try weightsOperand.descriptor
        let weights = constantWeights == nil ? givenWeights : try DNNLDescriptor(weightsOperand.dims, dnnl_format_tag_any)
        let rank = destinationOperand.dims.count
        let bias = try biasValues.map { values throws(RuntimeError) in
            try Operand(Array(repeating: 1, count: rank - 1) + [values.count]).descriptor
        }
        var post = DNNLPostOperations()
        if let scale { post.steps.append(.eltwise(dnnl_eltwise_linear.rawValue, alpha: scale, beta: 0)) }
        if let activation { post.steps.append(.eltwise(activation.algorithm.rawValue, alpha: 0, beta: 0)) }
        if let residual { post.steps.append(.binary(dnnl_binary_add.rawValue, dims: residual.dims, channelsLast: false)) }
        var slots = [Int32(DNNL_ARG_SRC)] + (constantWeights == nil ? [Int32(DNNL_ARG_WEIGHTS)] : []) + [Int32(DNNL_ARG_DST)]
        if residual != nil { slots.append(DNNL.postOperationSource(post.steps.count - 1)) }
        func product(weights: DNNLDescriptor) throws(RuntimeError) -> DNNLPrimitive {
            try Self.product(source: source, weights: weights, bias: bias, destination: destination, post: post, slots: slots, threads: threads)
        }
        var primitive = try product(weights: weights)
        if constantWeights != nil, let padded = try paddedRows(chosen: primitive.layout(of: Int32(DNNL_ARG_WEIGHTS)), dims: weightsOperand.dims),
           let remade = try? product(weights: padded) {
            primitive = remade
        }
        if let constantWeights, !(other.map { primitive.shareConstant(Int32(DNNL_ARG_WEIGHTS), from: $0) } ?? false) {
            try primitive.bindConstant(Int32(DNNL_ARG_WEIGHTS), values: constantWeights, given: givenWeights)
        }
        if let biasValues, let bias { try primitive.bindConstant(Int32(DNNL_ARG_BIAS), values: biasValues, given: bias) }
        return primitive
    }

    /// One thread's block of columns `first..<first + width` of a product over
    /// the constant weights `packed` holds (a `matmul` over constant weights),
    /// read where `packed` keeps them, not copied: `source [rows, k] ·
    /// weights[:, block] (+ bias) → activation`, written into a destination
    /// whose rows are `n` floats apart; `accumulate` adds the result to what
    /// the destination held (a residual copied there first). Slots: source,
    /// destination. Weights in plain rows are read as a strided view; weights
    /// in blocks of whole columns (oneDNN's AVX-512 layouts) as the run of
    /// blocks from `first` (a block's start), the product made for that
    /// blocking. `nil` for other layouts, columns not there, or a block
    /// oneDNN would compute only with its reference code (blocked weights
    /// into several strided rows; an activation followed by the sum).
    static func columnBlock(of packed: DNNLPrimitive, first: Int, width: Int, rows: Int, n: Int, bias: [Float]?,
                            activation: Activation?, accumulate: Bool) throws(RuntimeError) -> DNNLPrimitive? {
        let layout = try packed.layout(of: Int32(DNNL_ARG_WEIGHTS))
        guard layout.raw.ndims == 2, first >= 0, width > 0, first + width <= Int(layout.raw.dims.1) else { return nil }
        let depth = Int(layout.raw.dims.0)
        let weights: DNNLDescriptor
        if let matrix = layout.plainRows {
            weights = try DNNLDescriptor([matrix.rows, width], strides: [matrix.stride, 1])
        } else if let blocked = layout.blockedColumns(width: width) {
            weights = blocked
        } else {
            return nil
        }
        let biasDescriptor = try bias.map { values throws(RuntimeError) in try Operand([1, values.count]).descriptor }
        var post = DNNLPostOperations()
        if let activation { post.steps.append(.eltwise(activation.algorithm.rawValue, alpha: 0, beta: 0)) }
        if accumulate { post.steps.append(.sum) }
        // One row's destination is described dense (its row stride is never used): oneDNN's blocked
        // kernels take no strided destination and would leave the block to its reference code.
        let destination = rows == 1 ? Operand([1, width]) : Operand(dims: [rows, width], strides: [n, 1])
        let primitive = try product(source: Operand([rows, depth]).descriptor, weights: weights, bias: biasDescriptor,
                                    destination: destination.descriptor, post: post, slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)], threads: 1)
        guard !primitive.implementation.hasPrefix("ref"), primitive.shareColumns(Int32(DNNL_ARG_WEIGHTS), from: first, of: packed) else { return nil }
        if let bias, let biasDescriptor { try primitive.bindConstant(Int32(DNNL_ARG_BIAS), values: bias, given: biasDescriptor) }
        return primitive
    }

    /// A product of rows `first..<first + depth` of `packed`'s constant
    /// weights (plain rows, read in place) by the same columns of a `rows ×
    /// k` source: one thread's share of a product split by its depth, whose
    /// partial sums the caller adds. Slots: source (pointing at column
    /// `first` of the source), destination (its columns of a `rows × n`
    /// matrix). `nil` where the weights are not plain rows.
    static func depthBlock(of packed: DNNLPrimitive, first: Int, depth: Int, rows: Int, k: Int, n: Int) throws(RuntimeError) -> DNNLPrimitive? {
        guard let matrix = try packed.layout(of: Int32(DNNL_ARG_WEIGHTS)).plainRows, matrix.rows == k, first >= 0, depth > 0,
              first + depth <= k else { return nil }
        let weights = try DNNLDescriptor([depth, matrix.columns], strides: [matrix.stride, 1])
        let primitive = try product(source: Operand(dims: [rows, depth], strides: [k, 1]).descriptor, weights: weights, bias: nil,
                                    destination: Operand(dims: [rows, matrix.columns], strides: [n, 1]).descriptor, post: DNNLPostOperations(),
                                    slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)], threads: 1)
        guard primitive.shareRows(Int32(DNNL_ARG_WEIGHTS), from: first, of: packed) else { return nil }
        return primitive
    }

    /// A oneDNN matrix product over operands in the given layouts.
    private static func product(source: DNNLDescriptor, weights: DNNLDescriptor, bias: DNNLDescriptor?, destination: DNNLDescriptor,
                                post: DNNLPostOperations, slots: [Int32], threads: Int) throws(RuntimeError) -> DNNLPrimitive {
        var operation = dnnl_matmul_desc_t()
        var source = source, weights = weights, destination = destination, biasRaw = bias?.raw
        let described = withOptionalPointer(&biasRaw) { biasPointer in
            dnnl_matmul_desc_init(&operation, &source.raw, &weights.raw, biasPointer, &destination.raw)
        }
        guard described == dnnl_success else { throw DNNL.failure("matrix product", "describing", described) }
        return try DNNLPrimitive(name: "matrix product", operation: &operation, postOperations: post, slots: slots, threads: threads)
    }

    /// Floats added to each row of packed weights oneDNN reads in the plain
    /// row-major layout: 64 bytes.
    static let weightRowPadding = 16

    /// The layout to pack constant weights in instead of the plain row-major
    /// one oneDNN `chose` for `dims`, or `nil` to keep its choice. Where
    /// oneDNN reads weights plain (`gemm:jit`: every product on AVX2; on
    /// AVX-512 only the column blocks of a large product, the rest being
    /// packed blocked and left alone), rows whose
    /// length is a multiple of 256 bytes map every row's columns to the same
    /// few cache sets: measured on an AVX2 EPYC at one thread, a 128 × 768 ×
    /// 3,072 product (BERT's feed-forward) took 20.4 ms with rows 3,072
    /// floats apart and 7.9 ms with rows 3,088 apart (OpenBLAS 8.5 ms); 768
    /// columns 2.53 → 2.12 ms, 2,048 columns 11.9 → 5.1 ms, 2,304 7.9 → 6.6 ms.
    /// Each row gets `weightRowPadding` unused floats at its end.
    static func paddedRows(chosen: DNNLDescriptor, dims: [Int]) throws(RuntimeError) -> DNNLDescriptor? {
        guard dims.count >= 2, let columns = dims.last, columns % 64 == 0, chosen.matches(try .plain(dims)) else { return nil }
        var strides = [columns + weightRowPadding, 1]
        for axis in stride(from: dims.count - 2, to: 0, by: -1) { strides.insert(strides[0] * dims[axis], at: 0) }
        return try DNNLDescriptor(dims, strides: strides)
    }

    /// Which constant weights a product was prepared for: where their values
    /// live (a constant's array, shared by every plan of one engine), their
    /// count and their layout.
    struct WeightsKey: Hashable {
        var address: UInt
        var count: Int
        var dims: [Int]
        var strides: [Int]
    }

    /// Products holding packed weights, by the weights they packed, so that
    /// the plans of other input shapes (a decoder's prefill and its one-token
    /// steps) read the same packed copy. Weak: an entry lives as long as its
    /// product, whose plan keeps the weights' array (and so its address) alive.
    private static let packedProducts = Locked<[WeightsKey: WeakPrimitive]>([:])

    private final class WeakPrimitive: @unchecked Sendable {
        weak var primitive: DNNLPrimitive?
        init(_ primitive: DNNLPrimitive) { self.primitive = primitive }
    }

    /// A live product that packed these weights, if any.
    static func product(packing key: WeightsKey) -> DNNLPrimitive? {
        packedProducts.withLock { $0[key]?.primitive }
    }

    /// Records `primitive` as holding the packed weights of `key`.
    static func remember(_ primitive: DNNLPrimitive, packing key: WeightsKey) {
        packedProducts.withLock { products in
            products = products.filter { $0.value.primitive != nil }
            products[key] = WeakPrimitive(primitive)
        }
    }

    // MARK: Element-wise, softmax, layer norm

    /// `activation` over `count` contiguous values. Slots: source, destination (may be the same).
    static func eltwise(_ activation: Activation, count: Int, threads: Int) throws(RuntimeError) -> DNNLPrimitive {
        guard count > 0 else { throw DNNL.failure("activation", "describing \(count) values") }
        var data = try Operand([count]).descriptor
        var operation = dnnl_eltwise_desc_t()
        let status = dnnl_eltwise_forward_desc_init(&operation, dnnl_forward_inference, activation.algorithm, &data.raw, 0, 0)
        guard status == dnnl_success else { throw DNNL.failure("activation", "describing", status) }
        return try DNNLPrimitive(name: "activation", operation: &operation, slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)], threads: threads)
    }

    /// Softmax along `axis` of a row-major `shape`. Slots: source, destination.
    static func softmax(shape: [Int], axis: Int, threads: Int) throws(RuntimeError) -> DNNLPrimitive {
        guard !shape.contains(0) else { throw DNNL.failure("softmax", "describing \(shape)") }
        var data = try Operand(shape).descriptor
        var operation = dnnl_softmax_desc_t()
        let status = dnnl_softmax_forward_desc_init(&operation, dnnl_forward_inference, &data.raw, Int32(axis))
        guard status == dnnl_success else { throw DNNL.failure("softmax", "describing", status) }
        return try DNNLPrimitive(name: "softmax", operation: &operation, slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)], threads: threads)
    }

    /// Layer norm over the last axis of `rows × width` values with optional
    /// per-element scale and shift. Slots: source, destination.
    static func layerNorm(rows: Int, width: Int, epsilon: Float, scale: [Float]?, shift: [Float]?, threads: Int) throws(RuntimeError) -> DNNLPrimitive {
        guard rows > 0, width > 0 else { throw DNNL.failure("layer norm", "describing \(rows) × \(width) values") }
        var data = try Operand([rows, width]).descriptor, statistics = try Operand([rows]).descriptor
        let parameter = try Operand([width]).descriptor
        var flags: UInt32 = 0
        if scale != nil { flags |= dnnl_use_scale.rawValue }
        if shift != nil { flags |= dnnl_use_shift.rawValue }
        var operation = dnnl_layer_normalization_desc_t()
        let status = dnnl_layer_normalization_forward_desc_init(&operation, dnnl_forward_inference, &data.raw, &statistics.raw, epsilon, flags)
        guard status == dnnl_success else { throw DNNL.failure("layer norm", "describing", status) }
        let primitive = try DNNLPrimitive(name: "layer norm", operation: &operation, slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)],
                                          threads: threads)
        if let scale { try primitive.bindConstant(Int32(DNNL_ARG_SCALE), values: scale, given: parameter) }
        if let shift { try primitive.bindConstant(Int32(DNNL_ARG_SHIFT), values: shift, given: parameter) }
        return primitive
    }
}

extension DNNLKernels {
    /// The error a prepared kernel's failed run throws, naming the operation.
    static func failure(_ context: OperationContext) -> RuntimeError {
        .invalidParameters(model: "oneDNN", detail: "running operation \"\(context.op.name)\" (\(context.op.type)) failed")
    }
}
