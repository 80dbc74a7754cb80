import CDNNL
import SystemIO
import Foundation
import ModelFeatures

/// Convolution, transposed convolution and pooling on oneDNN, in plain
/// (`[N, C, spatial…]`) or channels-last (`[N, spatial…, C]`) layout: the
/// primitive made and the weights packed when the plan is made, the
/// post-operations applied by oneDNN. Each maker returns `nil` where oneDNN
/// has no implementation, so the caller keeps its own kernel.
enum DNNLConvolution {
    /// A convolution's geometry, in the MIL order `[N, C, spatial…]` whatever the layout.
    struct Geometry {
        var input: [Int]
        var output: [Int]
        /// `[O, I per group, kernel…]`.
        var weightShape: [Int]
        var groups: Int
        var strides: [Int]
        var dilations: [Int]
        var padBefore: [Int]
        var channelsLast: Bool
        /// Channels per block where the image is `[N, C/w, H, W, w]`
        /// (`ChannelBlocking`; `channelsLast` is then false), `nil` otherwise.
        var channelBlock: Int? = nil

        var channelBlocked: Bool { channelBlock != nil }

        /// Padding after each spatial axis that makes oneDNN's output size formula give `output`.
        func padAfter(transposed: Bool) -> [Int] {
            (0..<strides.count).map { axis in
                let effective = (weightShape[axis + 2] - 1) * dilations[axis] + 1
                return transposed
                    ? (input[axis + 2] - 1) * strides[axis] + effective - output[axis + 2] - padBefore[axis]
                    : (output[axis + 2] - 1) * strides[axis] + effective - input[axis + 2] - padBefore[axis]
            }
        }

        func descriptor(_ dims: [Int]) throws(RuntimeError) -> DNNLDescriptor {
            if let channelBlock { return try .channelBlocked(dims, width: channelBlock) }
            return channelsLast ? try .channelsLast(dims) : try .plain(dims)
        }
    }

    /// Output rows `first..<first + count` of a convolution or pooling
    /// (rows: the first spatial axis): the input rows they read and the
    /// geometry of the smaller operation computing only them. In
    /// channels-last layout with one image both are contiguous, so a block
    /// runs on its rows in place, each on its own thread.
    struct RowBlock: Equatable {
        /// The first output row and the number of rows.
        var first: Int
        var count: Int
        /// The first input row read (the rows before it are padding or another block's).
        var inputFirst: Int
        /// `[N, C, spatial…]` of the block's input and output.
        var input: [Int]
        var output: [Int]
        /// Padding before each spatial axis (the first axis' only for the first block).
        var padBefore: [Int]
    }

    /// `output`'s rows split into at most `parts` blocks of nearly equal
    /// size, each reading at least one input row; `nil` when fewer than two
    /// blocks result. Shapes are `[N, C, spatial…]`; `kernel`, `strides`,
    /// `dilations` and `padBefore` have one value per spatial axis.
    static func rowBlocks(input: [Int], output: [Int], kernel: [Int], strides: [Int], dilations: [Int], padBefore: [Int],
                          parts: Int) -> [RowBlock]? {
        guard input.count >= 3, output.count == input.count, !kernel.isEmpty else { return nil }
        let rows = output[2], count = min(parts, rows)
        guard count >= 2 else { return nil }
        let height = input[2], reach = (kernel[0] - 1) * dilations[0]
        var blocks: [RowBlock] = []
        for part in 0..<count {
            let first = part * rows / count, end = (part + 1) * rows / count
            // Input rows first·s − pad … (end − 1)·s − pad + reach, clipped to the image.
            let low = first * strides[0] - padBefore[0], high = (end - 1) * strides[0] - padBefore[0] + reach
            let clippedLow = max(low, 0), clippedHigh = min(high, height - 1)
            guard end > first, clippedHigh >= clippedLow else { return nil }
            var blockInput = input, blockOutput = output, before = padBefore
            blockInput[2] = clippedHigh - clippedLow + 1
            blockOutput[2] = end - first
            before[0] = clippedLow - low
            blocks.append(RowBlock(first: first, count: end - first, inputFirst: clippedLow, input: blockInput, output: blockOutput, padBefore: before))
        }
        return blocks
    }

    /// One activation of a fused convolution as oneDNN post-operations, or
    /// `nil` when oneDNN has none for it.
    static func steps(kind: String, alpha: Float, beta: Float) -> [DNNLPostOperations.Step]? {
        switch kind {
        case "relu": [.eltwise(dnnl_eltwise_relu.rawValue, alpha: 0, beta: 0)]
        case "relu6": [.eltwise(dnnl_eltwise_clip.rawValue, alpha: 0, beta: 6)]
        case "clip": [.eltwise(dnnl_eltwise_clip.rawValue, alpha: alpha, beta: beta)]
        case "sigmoid": [.eltwise(dnnl_eltwise_logistic.rawValue, alpha: 0, beta: 0)]
        case "silu": [.eltwise(dnnl_eltwise_swish.rawValue, alpha: 1, beta: 0)]
        case "tanh": [.eltwise(dnnl_eltwise_tanh.rawValue, alpha: 0, beta: 0)]
        case "leaky_relu": [.eltwise(dnnl_eltwise_relu.rawValue, alpha: alpha, beta: 0)]
        case "elu": [.eltwise(dnnl_eltwise_elu.rawValue, alpha: alpha, beta: 0)]
        case "sigmoid_hard": [.eltwise(dnnl_eltwise_linear.rawValue, alpha: alpha, beta: beta),
                              .eltwise(dnnl_eltwise_clip.rawValue, alpha: 0, beta: 1)]
        case "hardswish": [.eltwise(dnnl_eltwise_hardswish.rawValue, alpha: 0, beta: 0)]
        case "gelu_EXACT": [.eltwise(dnnl_eltwise_gelu_erf.rawValue, alpha: 0, beta: 0)]
        case "gelu_TANH_APPROXIMATION": [.eltwise(dnnl_eltwise_gelu_tanh.rawValue, alpha: 0, beta: 0)]
        default: nil
        }
    }

    /// A convolution (or, `transposed`, a deconvolution) over `geometry`
    /// with `weights` in MIL's layout (`[O, I/groups, k…]`, or for a
    /// transposed one `[I, O/groups, k…]`), `bias`, and `post` applied to
    /// the result; the residuals of binary post-operations have the output's
    /// shape and layout. With `sharingWith` (another block of the same
    /// convolution) its packed weights and bias are read, not packed again,
    /// when oneDNN wants the same layout.
    static func convolution(name: String, geometry: Geometry, weights: [Float], bias: [Float]?, post: DNNLPostOperations,
                            transposed: Bool = false, threads: Int, sharingWith other: DNNLPrimitive? = nil) throws(RuntimeError) -> DNNLPrimitive {
        let g = geometry
        let spatial = g.strides.count
        var source = try g.descriptor(g.input), destination = try g.descriptor(g.output)
        // oneDNN's weights: [(groups,) O/groups, I/groups, k…]; MIL's transposed weights are [I, O/groups, k…].
        let outPerGroup = transposed ? g.weightShape[1] : g.weightShape[0] / g.groups
        let inPerGroup = transposed ? g.weightShape[0] / g.groups : g.weightShape[1]
        let kernel = Array(g.weightShape[2...])
        let dims = (g.groups > 1 ? [g.groups] : []) + [outPerGroup, inPerGroup] + kernel
        var chosen = try DNNLDescriptor(dims, dnnl_format_tag_any)
        // As MIL holds them: plain for a convolution; for a transposed one, [g, I/g, O/g, k…] read with O and I swapped.
        let given: DNNLDescriptor
        if transposed {
            var strides = Shapes.strides([g.groups, inPerGroup, outPerGroup] + kernel)
            strides.swapAt(1, 2)
            given = try DNNLDescriptor(dims, strides: g.groups > 1 ? strides : Array(strides.dropFirst()))
        } else {
            given = try .plain(dims)
        }
        let biasDescriptor = try bias.map { values throws(RuntimeError) in try DNNLDescriptor([values.count], dnnl_a) }
        var biasRaw = biasDescriptor?.raw
        let strides = g.strides.map(Int64.init)
        let dilations = g.dilations.map { Int64($0 - 1) }   // oneDNN counts dilation from 0 (no gaps)
        let before = g.padBefore.map(Int64.init), after = g.padAfter(transposed: transposed).map(Int64.init)
        // Negative padding after a convolution's last input rows (a 1×1 stride-2 convolution of an even
        // size never reads its last row and column) is oneDNN's way of saying so; a transposed one needs it non-negative.
        guard strides.count == spatial, !transposed || after.allSatisfy({ $0 >= 0 }) else { throw DNNL.failure(name, "describing padding \(after)") }
        // Slots: source, destination, then the second tensor of each binary post-operation.
        let slots = [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)] + post.binaryIndices.map(DNNL.postOperationSource)
        let primitive: DNNLPrimitive
        if transposed {
            var description = dnnl_deconvolution_desc_t()
            let status = withOptionalPointer(&biasRaw) { biasPointer in
                dnnl_dilated_deconvolution_forward_desc_init(&description, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                             &source.raw, &chosen.raw, biasPointer, &destination.raw,
                                                             strides, dilations, before, after)
            }
            guard status == dnnl_success else { throw DNNL.failure(name, "describing the deconvolution", status) }
            primitive = try DNNLPrimitive(name: name, operation: &description, postOperations: post, slots: slots, threads: threads)
        } else {
            func made(_ algorithm: dnnl_alg_kind_t) throws(RuntimeError) -> DNNLPrimitive {
                var description = dnnl_convolution_desc_t()
                let status = withOptionalPointer(&biasRaw) { biasPointer in
                    dnnl_dilated_convolution_forward_desc_init(&description, dnnl_forward_inference, algorithm,
                                                               &source.raw, &chosen.raw, biasPointer, &destination.raw,
                                                               strides, dilations, before, after)
                }
                guard status == dnnl_success else { throw DNNL.failure(name, "describing the convolution", status) }
                return try DNNLPrimitive(name: name, operation: &description, postOperations: post, slots: slots, threads: threads)
            }
            // Winograd where oneDNN has a kernel for it here; its direct kernels otherwise.
            if winogradShape(g), let winograd = try? made(dnnl_convolution_winograd), winograd.implementation.contains("wino") {
                primitive = winograd
            } else {
                primitive = try made(dnnl_convolution_direct)
            }
        }
        // The primitive must read and write the layouts the plan holds (never a blocked one it chose).
        guard try primitive.layout(of: Int32(DNNL_ARG_SRC)).matches(source), try primitive.layout(of: Int32(DNNL_ARG_DST)).matches(destination) else {
            throw DNNL.failure(name, "keeping the plan's layout")
        }
        // Another block of the same convolution (other rows, other images) has packed the same weights.
        if !(other.map { primitive.shareConstant(Int32(DNNL_ARG_WEIGHTS), from: $0) } ?? false) {
            try primitive.bindConstant(Int32(DNNL_ARG_WEIGHTS), values: weights, given: given)
        }
        if let bias, let biasDescriptor, !(other.map { primitive.shareConstant(Int32(DNNL_ARG_BIAS), from: $0) } ?? false) {
            try primitive.bindConstant(Int32(DNNL_ARG_BIAS), values: bias, given: biasDescriptor)
        }
        return primitive
    }

    /// Whether a convolution of `geometry` is one oneDNN may run as
    /// Winograd's: in channel blocks of 16 (the layout its Winograd kernels
    /// read and write), 3×3, stride 1, no dilation, one group. On AVX-512
    /// it has such kernels (`jit_fp32_wino_2x3`, `jit_wino_4x3`): one
    /// thread, ResNet-18's 3×3 shapes took 462, 329, 409 and 585 µs against
    /// its direct kernels' 889, 825, 814 and 782 µs (56×56×64 to 7×7×512).
    static func winogradShape(_ g: Geometry) -> Bool {
        g.channelBlock == 16 && g.groups == 1 && g.weightShape.count == 4 && g.weightShape[2] == 3 && g.weightShape[3] == 3
            && g.strides == [1, 1] && g.dilations == [1, 1]
    }

    /// Whether oneDNN runs a convolution of `geometry` as Winograd's here:
    /// asked of oneDNN once per geometry (which implementation it would
    /// choose; no kernel is generated), so that the layout pass decides as
    /// the plan will.
    static func runsWinograd(_ geometry: Geometry) -> Bool {
        guard DNNL.isAvailable, winogradShape(geometry) else { return false }
        let key = "\(geometry.input) \(geometry.output) \(geometry.weightShape) \(geometry.padBefore)"
        if let known = winogradAnswers.withLock({ $0[key] }) { return known }
        var description = dnnl_convolution_desc_t()
        var answer = false
        if var source = try? geometry.descriptor(geometry.input), var destination = try? geometry.descriptor(geometry.output),
           var weights = try? DNNLDescriptor([geometry.weightShape[0], geometry.weightShape[1], 3, 3], dnnl_format_tag_any) {
            let after = geometry.padAfter(transposed: false).map(Int64.init)
            let status = dnnl_dilated_convolution_forward_desc_init(&description, dnnl_forward_inference, dnnl_convolution_winograd,
                                                                    &source.raw, &weights.raw, nil, &destination.raw, [1, 1], [0, 0],
                                                                    geometry.padBefore.map(Int64.init), after)
            if status == dnnl_success, let implementation = DNNLPrimitive.implementation(of: &description) {
                answer = implementation.contains("wino")
            }
        }
        winogradAnswers.withLock { $0[key] = answer }
        return answer
    }

    private static let winogradAnswers = Locked<[String: Bool]>([:])

    /// Pooling (`dnnl_pooling_max`, `dnnl_pooling_avg_include_padding`,
    /// `dnnl_pooling_avg_exclude_padding`) from `input` to `output` shapes,
    /// `[N, C, spatial…]`, in either layout.
    static func pooling(name: String, algorithm: dnnl_alg_kind_t, input: [Int], output: [Int], kernel: [Int], strides: [Int],
                        padBefore: [Int], channelsLast: Bool, threads: Int) throws(RuntimeError) -> DNNLPrimitive {
        var source = channelsLast ? try DNNLDescriptor.channelsLast(input) : try DNNLDescriptor.plain(input)
        var destination = channelsLast ? try DNNLDescriptor.channelsLast(output) : try DNNLDescriptor.plain(output)
        let after = kernel.indices.map { axis in (output[axis + 2] - 1) * strides[axis] + kernel[axis] - input[axis + 2] - padBefore[axis] }
        guard after.allSatisfy({ $0 >= 0 }) else { throw DNNL.failure(name, "describing padding \(after)") }
        var description = dnnl_pooling_v2_desc_t()
        let status = dnnl_pooling_v2_forward_desc_init(&description, dnnl_forward_inference, algorithm, &source.raw, &destination.raw,
                                                       strides.map(Int64.init), kernel.map(Int64.init),
                                                       Array(repeating: 0, count: kernel.count),
                                                       padBefore.map(Int64.init), after.map(Int64.init))
        guard status == dnnl_success else { throw DNNL.failure(name, "describing the pooling", status) }
        let primitive = try DNNLPrimitive(name: name, operation: &description, slots: [Int32(DNNL_ARG_SRC), Int32(DNNL_ARG_DST)],
                                          threads: threads)
        guard try primitive.layout(of: Int32(DNNL_ARG_DST)).matches(destination) else { throw DNNL.failure(name, "keeping the plan's layout") }
        return primitive
    }
}

/// Calls `body` with a pointer to `value`, or `nil` without one.
func withOptionalPointer<Value, Result>(_ value: inout Value?, _ body: (UnsafePointer<Value>?) -> Result) -> Result {
    guard var unwrapped = value else { return body(nil) }
    defer { value = unwrapped }
    return withUnsafePointer(to: &unwrapped) { body($0) }
}
