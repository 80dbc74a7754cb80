import CDNNL
import Foundation
import ModelFeatures
import SystemIO

/// Convolution (1-, 2- and 3-D, groups, dilations, every pad type),
/// transposed convolution and pooling (max, average, L2) with `ceil_mode`:
/// on oneDNN with weights packed once at plan time where it runs them, 3×3
/// ones with stride 1 as Winograd's F(2×2, 3×3) (`WinogradConvolution`)
/// where that is faster, as image-to-column plus OpenBLAS products and our
/// own loops elsewhere.
///
/// `fused_conv` is a convolution the fusion pass (`ConvolutionFusion`)
/// made: post-operations (activations, residual sums) applied to its result
/// in order. `channels_last` (set by `ChannelsLastLayout`) says `x` and the
/// result are `[N, spatial…, C]`; `channel_blocked` (set by `ChannelBlocking`)
/// that they, and the residuals, are `[N, C/8, H, W, 8]`.
enum ConvolutionOperations: OperationFamily {
    static let convolutionParameters = ["x", "weight", "bias", "strides", "pad_type", "pad", "dilations", "groups"]
    static let definitions: [String: OperationDefinition] = [
        "conv": OperationDefinition(convolutionParameters) { context throws(RuntimeError) in
            try convolution(context)
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "conv_transpose": OperationDefinition(["x", "weight", "bias", "strides", "pad_type", "pad", "dilations", "groups", "output_shape"]) { context throws(RuntimeError) in
            try transposedConvolution(context)
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "max_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode"], internal: ["channels_last"]) { context throws(RuntimeError) in
            try pool(context, mode: .max)
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "avg_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode", "exclude_padding_from_average"],
                                     internal: ["channels_last"]) { context throws(RuntimeError) in
            try pool(context, mode: .average)
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
        "l2_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode"]) { context throws(RuntimeError) in
            try pool(context, mode: .l2)
        }.withFacts(FactsRules.sameRank(keeping: [0, 1])),
    ]

    /// Operations only the engine's passes make (a program file naming one is refused).
    static let internalDefinitions: [String: OperationDefinition] = [
        "fused_conv": OperationDefinition(convolutionParameters + ["activations", "alphas", "betas", "residuals", "channels_last", "channel_blocked"]) { context throws(RuntimeError) in
            try convolution(context)
        }.withFacts(FactsRules.sameRank(keeping: [0])),
        "layout_transpose": OperationDefinition(["x", "channels_last"]) { context throws(RuntimeError) in
            try layoutTranspose(context)
        }.withFacts(layoutTransposeFacts),
    ]

    /// Padding before each spatial axis and the output sizes, as coremltools computes them.
    static func geometry(_ context: OperationContext, input: [Int], kernel: [Int], strides: [Int], dilations: [Int],
                         ceilMode: Bool) throws(RuntimeError) -> (before: [Int], output: [Int]) {
        let type = try context.string("pad_type", "valid")
        let custom = try context.ints("pad") ?? Array(repeating: 0, count: 2 * input.count)
        // Pools take kernel_sizes; a convolution's kernel is its weight's spatial shape.
        let kernelName = context.op.type.hasSuffix("_pool") ? "kernel_sizes" : "kernel"
        for (key, values) in [(kernelName, kernel), ("strides", strides), ("dilations", dilations)] where values.contains(where: { $0 < 1 }) {
            throw context.invalid("\(key) \(values) must be positive")
        }
        var before: [Int] = [], output: [Int] = []
        for axis in input.indices {
            let effective = (kernel[axis] - 1) * dilations[axis] + 1
            var total = 0, begin = 0
            switch type {
            case "valid": break
            case "custom":
                guard custom.count == 2 * input.count else { throw context.invalid("pad needs \(2 * input.count) values") }
                begin = custom[2 * axis]
                total = custom[2 * axis] + custom[2 * axis + 1]
            case "same", "same_lower":
                let out = (input[axis] + strides[axis] - 1) / strides[axis]
                total = max((out - 1) * strides[axis] + effective - input[axis], 0)
                begin = type == "same" ? total / 2 : (total + 1) / 2
            default: throw context.unsupported("pad_type \(type) is not supported")
            }
            var size: Int
            if ceilMode {
                size = (input[axis] + total - effective + strides[axis] - 1) / strides[axis] + 1
                if (size - 1) * strides[axis] >= input[axis] + total / 2, total > 0 { size -= 1 }
            } else {
                size = (input[axis] + total - effective) / strides[axis] + 1
            }
            guard size > 0 else {
                throw context.invalid("spatial axis \(axis) of size \(input[axis]) gives no output (\(kernelName) \(kernel), dilations \(dilations), pad_type \(type))")
            }
            before.append(begin)
            output.append(size)
        }
        return (before, output)
    }

    /// A post-operation of a `fused_conv`: an activation by name (with its
    /// alpha and beta), or `add` of a residual value.
    struct PostOperation {
        var kind: String
        var alpha: Float
        var beta: Float
        var residual: PlanValue?
    }

    private static func postOperations(_ context: OperationContext) throws(RuntimeError) -> [PostOperation] {
        let kinds = try context.constant("activations")?.strings ?? []
        let alphas = try context.constant("alphas")?.floats ?? [], betas = try context.constant("betas")?.floats ?? []
        var residuals = try context.list("residuals")[...]
        guard alphas.count == kinds.count, betas.count == kinds.count else { throw context.invalid("post-operations need one alpha and beta each") }
        var result: [PostOperation] = []
        for (index, kind) in kinds.enumerated() {
            var post = PostOperation(kind: kind, alpha: alphas[index], beta: betas[index], residual: nil)
            if kind == "add" {
                guard let residual = residuals.popFirst() else { throw context.invalid("post-operation add has no residual") }
                post.residual = residual
            } else if activation(post) == nil {
                throw context.unsupported("post-operation \(kind) is not one modelc fuses")
            }
            result.append(post)
        }
        return result
    }

    /// An activation post-operation as a function of one value.
    static func activation(_ post: PostOperation) -> (@Sendable (Float) -> Float)? {
        let alpha = post.alpha, beta = post.beta
        switch post.kind {
        case "relu": return { max($0, 0) }
        case "relu6": return { min(max($0, 0), 6) }
        case "clip": return { min(max($0, alpha), beta) }
        case "sigmoid": return { 1 / (1 + exp(-$0)) }
        case "silu": return { $0 / (1 + exp(-$0)) }
        case "tanh": return { tanh($0) }
        case "leaky_relu": return { $0 >= 0 ? $0 : alpha * $0 }
        case "elu": return { $0 > 0 ? $0 : alpha * (exp($0) - 1) }
        case "sigmoid_hard": return { min(max(alpha * $0 + beta, 0), 1) }
        case "hardswish": return { $0 * min(max($0 + 3, 0), 6) / 6 }
        case "gelu_EXACT": return { x in 0.5 * x * (1 + erf(x * Float(0.5).squareRoot())) }
        case "gelu_TANH_APPROXIMATION": return { x in 0.5 * x * (1 + tanh((2 / Float.pi).squareRoot() * (x + 0.044715 * x * x * x))) }
        default: return nil
        }
    }

    /// Applies `posts` in order to `count` values at `target` (residuals broadcast to `shape`).
    static func apply(_ posts: [PostOperation], to target: UnsafeMutablePointer<Float>, shape: [Int], buffers: Buffers) {
        let count = shape.reduce(1, *)
        for post in posts {
            if let residual = post.residual {
                let source = buffers.floats(residual.id)
                if residual.shape == shape {
                    for index in 0..<count { target[index] += source[index] }
                } else {
                    let strides = Shapes.broadcastStrides(residual.shape, to: shape)
                    Shapes.walk(shape, [strides]) { start, offsets, length in
                        let step = strides.last ?? 0
                        for i in 0..<length { target[start + i] += source[offsets[0] + i * step] }
                    }
                }
            } else if let function = activation(post) {
                for index in 0..<count { target[index] = function(target[index]) }
            }
        }
    }

    private static func convolution(_ context: OperationContext) throws(RuntimeError) {
        let given = try context.input()
        // Weights given inline (the fusion pass moves them there) are read without entering the plan's
        // constant memory: oneDNN packs its own copy, so the plan holds one, not two.
        let inlineWeight = inlineConstant(context, "weight"), inlineBias = inlineConstant(context, "bias")
        let weightValue = inlineWeight == nil ? try context.input("weight") : nil
        let weightShape = inlineWeight?.shape ?? weightValue?.shape ?? []
        let channelsLast = try context.bool("channels_last", false)
        let blocked = try context.bool("channel_blocked", false)
        // Channels per block: the image's last axis in blocks (`ChannelBlocking.widths`).
        let width = blocked ? given.shape.last ?? 0 : 1
        if blocked, given.rank != 5 || !ChannelBlocking.widths.contains(width) {
            throw context.invalid("x \(given.shape) is not an image in blocks of \(ChannelBlocking.widths.map(String.init).joined(separator: " or ")) channels")
        }
        // The MIL shape [N, C, spatial…] whatever the layout.
        let xShape = blocked ? [given.shape[0], given.shape[1] * width, given.shape[2], given.shape[3]]
            : channelsLast && given.rank >= 3 ? [given.shape[0], given.shape[given.rank - 1]] + given.shape[1..<(given.rank - 1)] : given.shape
        let spatial = xShape.count - 2
        guard spatial >= 1, spatial <= 3, weightShape.count == xShape.count else {
            throw context.invalid("x \(given.shape) and weight \(weightShape): 1-, 2- or 3-D convolution needs equal ranks 3 to 5")
        }
        let groups = try context.int("groups", 1)
        let inputs = xShape[1], outputs = weightShape[0], perGroup = weightShape[1]
        guard groups >= 1, inputs == perGroup * groups, outputs % groups == 0 else {
            throw context.invalid("\(inputs) input channels, weight \(weightShape), \(groups) groups")
        }
        let kernel = Array(weightShape[2...])
        let strides = try context.ints("strides") ?? Array(repeating: 1, count: spatial)
        let dilations = try context.ints("dilations") ?? Array(repeating: 1, count: spatial)
        guard strides.count == spatial, dilations.count == spatial else { throw context.invalid("strides and dilations need \(spatial) values") }
        let input = Array(xShape[2...])
        let (before, output) = try geometry(context, input: input, kernel: kernel, strides: strides, dilations: dilations, ceilMode: false)
        let biasValue = inlineBias == nil ? try context.optional("bias") : nil
        let biasCount = inlineBias?.count ?? biasValue?.count
        if let biasCount, biasCount != outputs { throw context.invalid("bias has \(biasCount) values for \(outputs) output channels") }
        let biasConstant = inlineBias ?? biasValue?.constant
        let posts = try postOperations(context)
        let outShape = [xShape[0], outputs] + output
        if blocked, outputs % width != 0 { throw context.invalid("\(outputs) output channels are not blocks of \(width)") }
        let stored = blocked ? [outShape[0], outputs / width] + output + [width] : channelsLast ? [outShape[0]] + output + [outputs] : outShape
        let out = try context.output(stored)

        if given.isFloat, channelsLast || blocked, spatial == 2, let weights = inlineWeight ?? weightValue?.constant,
           biasCount == nil || biasConstant != nil,
           !blocked || width == WinogradConvolution.blockWidth,
           WinogradConvolution.applies(kernel: kernel, strides: strides, dilations: dilations, groups: groups, inputs: inputs, outputs: outputs, output: output) {
            WinogradConvolution.plan(context, x: given, xShape: xShape, output: output, padBefore: before, weights: weights.floats,
                                     bias: biasConstant?.floats, posts: posts, blocked: blocked, out: out, stored: stored)
            return
        }
        if DNNL.isAvailable, given.isFloat, let weights = inlineWeight ?? weightValue?.constant, biasCount == nil || biasConstant != nil {
            let geometry = DNNLConvolution.Geometry(input: xShape, output: outShape, weightShape: weightShape, groups: groups, strides: strides,
                                                    dilations: dilations, padBefore: before, channelsLast: channelsLast && !blocked,
                                                    channelBlock: blocked ? width : nil)
            do throws(RuntimeError) {
                let prepared = try dnnlConvolution(context, geometry: geometry, weights: weights.floats, bias: biasConstant?.floats, posts: posts,
                                                   stored: stored)
                runConvolution(prepared, context, x: given.id, out: out, posts: posts, stored: stored)
                return
            } catch {
                // Our own loops read MIL's layout or channels-last only (the layout pass blocks only what oneDNN runs).
                if blocked { throw error }
            }
        }
        if blocked { throw context.unsupported("a convolution in blocks of \(width) channels needs constant weights and bias on oneDNN") }
        let weight: PlanValue
        if let weightValue { weight = weightValue } else { weight = try context.input("weight") }
        let bias: PlanValue?
        if let biasValue { bias = biasValue } else { bias = try context.optional("bias") }
        try columnConvolution(context, x: given, weight: weight, bias: bias, xShape: xShape, input: input, output: output, kernel: kernel,
                              strides: strides, dilations: dilations, before: before, groups: groups, posts: posts,
                              channelsLast: channelsLast, out: out)
    }

    /// Parameter `key` when it is a constant given inline (not a named value).
    private static func inlineConstant(_ context: OperationContext, _ key: String) -> Tensor? {
        if case .constant(let tensor)? = context.op.arguments[key]?.first, tensor.type.isFloat { return tensor }
        return nil
    }

    /// A convolution prepared on oneDNN: one primitive per block of the
    /// output (one block, or one per thread), the run arguments of the
    /// residuals it sums, and the post-operations left for our loops.
    struct PreparedConvolution {
        var parts: [Part]
        var fusedResiduals: [(Int32, Int)]
        /// The residual copied into the output before the run, for the sum post-operation.
        var summed: Int?
        var rest: [PostOperation]

        /// One primitive and where its block starts in the input and in the output (and residuals), in floats.
        struct Part {
            var kernel: DNNLPrimitive
            var inputOffset: Int
            var outputOffset: Int
            var outputCount: Int
            /// Where its scratchpad starts in the convolution's scratch value, in bytes.
            var scratchOffset: Int
            /// For a block of output channels: its channels and the channels of
            /// every output position (its values are `count` floats every `stride`),
            /// computed densely into scratch after its scratchpad.
            var channelSlice: (count: Int, stride: Int)? = nil

            /// Where its dense output starts in the scratch value, in bytes (a block of channels only).
            var stagingOffset: Int { scratchOffset + (kernel.scratchpadBytes + 63) / 64 * 64 }

            /// Bytes of scratch it needs: its scratchpad, and for a block of channels its dense output (each 64-byte aligned).
            var scratchBytes: Int { (kernel.scratchpadBytes + 63) / 64 * 64 + (channelSlice == nil ? 0 : (outputCount * 4 + 63) / 64 * 64) }
        }

        /// Bytes of scratch all parts need together.
        var scratchpadBytes: Int { parts.last.map { $0.scratchOffset + $0.scratchBytes } ?? 0 }
    }

    /// One block of a convolution's (or pooling's) output, run as a smaller
    /// convolution by its own thread: where its input and output start, in
    /// floats, and for a block of output channels which channels (channels-last,
    /// its geometry computes them densely, to be copied into a strided slice
    /// of every output position; in channel blocks, in place).
    struct Block {
        var geometry: DNNLConvolution.Geometry
        var input: Int
        var output: Int
        var channels: Range<Int>?
    }

    /// Blocks a convolution's output is split into for `threads` threads:
    /// the images of a batch, or for one channels-last image its rows (each
    /// block a smaller convolution on contiguous rows, in place) or, where
    /// `splitsChannels` prefers them and `channelBlocksAllowed`, its output
    /// channels (each block the whole input and a slice of the weights,
    /// computed into scratch and copied into its strided slice of the output:
    /// oneDNN 2.6 runs a strided destination only on its reference loops);
    /// for one image in channel blocks, its output channels, each block
    /// written in place (a block of channels is contiguous there);
    /// `nil` keeps one primitive.
    static func blocks(_ geometry: DNNLConvolution.Geometry, kernel: [Int], threads requested: Int,
                       channelBlocksAllowed: Bool = false) -> [Block]? {
        // Multiply-adds: every output value reads its group's channels over the kernel.
        let work = geometry.output.reduce(1, *) * (geometry.input[1] / max(geometry.groups, 1)) * kernel.reduce(1, *)
        let threads = WorkSplit.workers(threads: requested, work: work, items: requested)
        guard threads > 1 else { return nil }
        let inImage = geometry.input[1...].reduce(1, *), outImage = geometry.output[1...].reduce(1, *)
        let batch = geometry.input[0]
        if batch == 1, let width = geometry.channelBlock {
            // One image in channel blocks: a block of output channels (bounds on whole blocks) is contiguous
            // in the output, so each block writes its part in place.
            guard geometry.groups == 1, let ranges = channelBlocks(geometry.output[1], parts: threads, granularity: width) else { return nil }
            let positions = geometry.output[2...].reduce(1, *)
            return ranges.map { range in
                var block = geometry
                block.output[1] = range.count
                block.weightShape[0] = range.count
                return Block(geometry: block, input: 0, output: range.lowerBound * positions, channels: range)
            }
        }
        if batch > 1 {
            let count = min(threads, batch)
            return (0..<count).map { part in
                let first = part * batch / count, end = (part + 1) * batch / count
                var block = geometry
                block.input[0] = end - first
                block.output[0] = end - first
                return Block(geometry: block, input: first * inImage, output: first * outImage, channels: nil)
            }
        }
        if channelBlocksAllowed, splitsChannels(geometry, threads: threads), let ranges = channelBlocks(geometry.output[1], parts: threads) {
            return ranges.map { range in
                var block = geometry
                block.output[1] = range.count
                block.weightShape[0] = range.count
                return Block(geometry: block, input: 0, output: range.lowerBound, channels: range)
            }
        }
        guard geometry.channelsLast,
              let rows = DNNLConvolution.rowBlocks(input: geometry.input, output: geometry.output, kernel: kernel, strides: geometry.strides,
                                                   dilations: geometry.dilations, padBefore: geometry.padBefore, parts: threads)
        else { return nil }
        let inRow = inImage / geometry.input[2], outRow = outImage / geometry.output[2]
        return rows.map { row in
            var block = geometry
            block.input = row.input
            block.output = row.output
            block.padBefore = row.padBefore
            return Block(geometry: block, input: row.inputFirst * inRow, output: row.first * outRow, channels: nil)
        }
    }

    /// Whether one channels-last image's convolution is split into blocks
    /// of output channels rather than rows, for `threads` threads: where the
    /// rows split unevenly (the largest block 10 % or more above an even
    /// share: ResNet-18's 7 rows as 4 + 3 ran at 0.69–0.71 of one thread's
    /// time, as blocks of 256 channels at 0.5) and every output value reads
    /// at least `channelSplitDepth` inputs, so that copying a block's
    /// channels into place costs less than the imbalance (MobileNetV2's 7×7
    /// pointwise convolutions, 160 and 320 deep, ran slower by channels).
    /// Measured on ResNet-18 and MobileNetV2 at 2 threads, every other
    /// convolution ran as fast or faster by rows (the 14×14 and 28×28
    /// stages, even where their weights outweigh their input). Not for
    /// grouped convolutions (a block would need a slice of the input too) or
    /// too few channels for a 16-channel vector per block.
    static func splitsChannels(_ geometry: DNNLConvolution.Geometry, threads: Int) -> Bool {
        guard threads > 1, geometry.channelsLast, geometry.input[0] == 1, geometry.groups == 1, geometry.output.count >= 3,
              geometry.output[1] >= 16 * threads else { return false }
        let depth = geometry.weightShape[1...].reduce(1, *), rows = geometry.output[2]
        let largest = (rows + threads - 1) / threads
        return depth >= channelSplitDepth && 10 * largest * threads >= 11 * rows
    }

    /// Inputs per output value (input channels × kernel positions) from which
    /// a convolution whose rows split unevenly is split by channels instead.
    static let channelSplitDepth = 1024

    /// `channels` split into `parts` nearly equal ranges whose bounds are
    /// multiples of `granularity` (16: whole vectors), the last taking the
    /// remainder; `nil` when a range would be empty.
    static func channelBlocks(_ channels: Int, parts: Int, granularity: Int = 16) -> [Range<Int>]? {
        guard parts >= 2 else { return nil }
        var bounds = [0]
        for part in 1..<parts {
            let ideal = Double(part * channels) / Double(parts)
            bounds.append(Int((ideal / Double(granularity)).rounded()) * granularity)
        }
        bounds.append(channels)
        let ranges = (0..<parts).map { bounds[$0]..<bounds[$0 + 1] }
        return ranges.allSatisfy { !$0.isEmpty } ? ranges : nil
    }

    /// OpenMP threads of one block's primitive: one when the work is split
    /// into `blocks` (the thread team runs them at once) or too small to share —
    /// a second OpenMP thread spins between regions and, on shared cores,
    /// stalls the prediction's other threads; the caller's threads for one
    /// large block that cannot be split (a plain-layout image).
    static func primitiveThreads(_ blocks: Int, output: [Int], context: OperationContext) -> Int {
        blocks > 1 || output.reduce(1, *) < 1 << 16 ? 1 : context.threads
    }

    private static func dnnlConvolution(_ context: OperationContext, geometry: DNNLConvolution.Geometry, weights: [Float], bias: [Float]?,
                                        posts: [PostOperation], stored: [Int]) throws(RuntimeError) -> PreparedConvolution {
        // Taps that only ever read padding are dropped (a dilated convolution on a small image).
        let (geometry, weights) = ConvolutionTaps.trimmed(geometry, weights: weights) ?? (geometry, weights)
        // oneDNN applies the post-operations it has, in order, up to the first it has not (or a residual of another shape).
        var post = DNNLPostOperations()
        var residuals: [(Int32, Int)] = []
        var summed: Int?
        var fused = 0
        var binaries: [Int] = []
        for item in posts {
            if let residual = item.residual {
                guard residual.shape == stored, residual.isFloat else { break }
                if summed == nil {
                    // The first residual is copied into the output before the run and summed there (faster kernels than a binary add).
                    summed = residual.id
                    post.steps.append(.sum)
                } else {
                    residuals.append((DNNL.postOperationSource(post.steps.count), residual.id))
                    binaries.append(post.steps.count)
                    post.steps.append(.binary(dnnl_binary_add.rawValue, dims: geometry.output, channelsLast: geometry.channelsLast))
                }
            } else {
                guard let steps = DNNLConvolution.steps(kind: item.kind, alpha: item.alpha, beta: item.beta) else { break }
                post.steps += steps
            }
            fused += 1
        }
        let name = "convolution \"\(context.op.name)\""
        // A binary post-operation's residual is described channels-last or plain, never in channel blocks (the layout pass allows one residual).
        guard !geometry.channelBlocked || binaries.isEmpty else { throw DNNL.failure(name, "summing a second residual in channel blocks") }
        // Several threads: blocks of the output on the thread team, each a single-threaded primitive
        // (OpenMP's barriers spin, and stall when the cores are shared); one block: see primitiveThreads.
        let kernel = Array(geometry.weightShape[2...])
        // Blocks of output channels write strided slices, which a binary post-operation's residual would have to be too.
        // A dilated convolution on a small image: regions of rows reading the image with fewer kernel rows come first.
        let regions = ConvolutionTaps.rowRegions(geometry, weights: weights)
        let split = regions?.map(\.block) ?? blocks(geometry, kernel: kernel, threads: context.threads, channelBlocksAllowed: binaries.isEmpty)
            ?? [Block(geometry: geometry, input: 0, output: 0, channels: nil)]
        var parts: [PreparedConvolution.Part] = []
        var scratch = 0
        let perOutput = weights.count / max(geometry.weightShape[0], 1)
        for (position, item) in split.enumerated() {
            let block = item.geometry
            var blockPost = post
            for index in binaries {
                blockPost.steps[index] = .binary(dnnl_binary_add.rawValue, dims: block.output, channelsLast: block.channelsLast)
            }
            let threads = primitiveThreads(split.count, output: geometry.output, context: context)
            let primitive: DNNLPrimitive
            if let regions {
                // Each region its own kernel rows' weights.
                primitive = try DNNLConvolution.convolution(name: name, geometry: block, weights: regions[position].weights, bias: bias,
                                                            post: blockPost, threads: threads)
            } else if let channels = item.channels {
                // This block's output channels' weights and bias, packed for it alone.
                primitive = try DNNLConvolution.convolution(name: name, geometry: block,
                                                            weights: Array(weights[(channels.lowerBound * perOutput)..<(channels.upperBound * perOutput)]),
                                                            bias: bias.map { Array($0[channels]) }, post: blockPost, threads: threads)
            } else {
                primitive = try DNNLConvolution.convolution(name: name, geometry: block, weights: weights, bias: bias, post: blockPost,
                                                            threads: threads, sharingWith: parts.first?.kernel)
            }
            let part = PreparedConvolution.Part(kernel: primitive, inputOffset: item.input, outputOffset: item.output,
                                                outputCount: block.output.reduce(1, *), scratchOffset: scratch,
                                                channelSlice: geometry.channelBlocked ? nil : item.channels.map { ($0.count, geometry.output[1]) })
            parts.append(part)
            scratch += part.scratchBytes
        }
        return PreparedConvolution(parts: parts, fusedResiduals: residuals, summed: summed, rest: Array(posts[fused...]))
    }

    /// Adds the kernel running a prepared convolution: its blocks at once on
    /// the thread team (or its one primitive), then the post-operations oneDNN did not take.
    private static func runConvolution(_ prepared: PreparedConvolution, _ context: OperationContext, x: Int, out: Int,
                                       posts: [PostOperation], stored: [Int]) {
        let bytes = prepared.scratchpadBytes
        let scratch = bytes > 0 ? context.scratch(.float32, shape: [(bytes + 3) / 4]) : nil
        let residuals = prepared.fusedResiduals, rest = prepared.rest, summed = prepared.summed, parts = prepared.parts
        let threads = context.threads
        context.run(reads: [x] + posts.compactMap { $0.residual?.id }, outputs: [out], scratch: scratch.map { [$0.id] } ?? []) { buffers throws(RuntimeError) in
            let pointers = ConvolutionPointers(x: buffers.raw(x), out: buffers.raw(out), residuals: residuals.isEmpty ? [] : residuals.map { buffers.raw($0.1) },
                                               summed: summed.map { buffers.raw($0) }, scratch: scratch.map { buffers.raw($0.id) })
            if parts.count == 1 {
                try pointers.run(parts[0])
            } else {
                let failure = Locked<RuntimeError?>(nil)
                ThreadTeam.shared.perform(parts.count, threads: min(parts.count, threads)) { index in
                    do throws(RuntimeError) { try pointers.run(parts[index]) } catch { failure.withLock { $0 = error } }
                }
                if let error = failure.withLock({ $0 }) { throw error }
            }
            if !rest.isEmpty { apply(rest, to: buffers.floats(out), shape: stored, buffers: buffers) }
        }
    }

    /// A convolution's buffers for one run, shared by the threads running its blocks (each writes only its own rows, images or channels).
    private struct ConvolutionPointers: @unchecked Sendable {
        let x: UnsafeMutableRawPointer
        let out: UnsafeMutableRawPointer
        let residuals: [UnsafeMutableRawPointer]
        let summed: UnsafeMutableRawPointer?
        let scratch: UnsafeMutableRawPointer?

        func run(_ part: PreparedConvolution.Part) throws(RuntimeError) {
            // A block of channels computes into scratch, then copies its channels of every position into the output.
            var staging: UnsafeMutableRawPointer?
            if part.channelSlice != nil {
                guard let scratch else { throw DNNL.failure("convolution", "finding a block of channels' scratch") }
                staging = scratch + part.stagingOffset
            }
            let output = staging ?? out + part.outputOffset * 4
            if let summed {
                if let slice = part.channelSlice {
                    for position in 0..<(part.outputCount / max(slice.count, 1)) {
                        (output + position * slice.count * 4).copyMemory(from: summed + (part.outputOffset + position * slice.stride) * 4,
                                                                         byteCount: slice.count * 4)
                    }
                } else {
                    output.copyMemory(from: summed + part.outputOffset * 4, byteCount: part.outputCount * 4)
                }
            }
            // Slots: source, destination, then the residuals of the binary post-operations in order.
            let input = x + part.inputOffset * 4, offset = part.outputOffset * 4
            try part.kernel.run(scratchpad: scratch.map { $0 + part.scratchOffset }) { slot in
                switch slot {
                case 0: input
                case 1: output
                default: residuals[slot - 2] + offset
                }
            }
            if let slice = part.channelSlice {
                let target = out + part.outputOffset * 4
                for position in 0..<(part.outputCount / max(slice.count, 1)) {
                    (target + position * slice.stride * 4).copyMemory(from: output + position * slice.count * 4, byteCount: slice.count * 4)
                }
            }
        }
    }

    /// Image-to-column and OpenBLAS: for weights computed at run time and what oneDNN refuses.
    private static func columnConvolution(_ context: OperationContext, x: PlanValue, weight: PlanValue, bias: PlanValue?, xShape: [Int],
                                          input: [Int], output: [Int], kernel: [Int], strides: [Int], dilations: [Int], before: [Int],
                                          groups: Int, posts: [PostOperation], channelsLast: Bool, out: Int) throws(RuntimeError) {
        let spatial = input.count
        let inputs = xShape[1], outputs = weight.shape[0], perGroup = weight.shape[1]
        let batch = xShape[0], kernelCount = kernel.reduce(1, *), outCount = output.reduce(1, *), inCount = input.reduce(1, *)
        let rows = perGroup * kernelCount, outPerGroup = outputs / groups
        // For each (kernel position, output position): the input offset, or -1 in the padding.
        var table: [Int32] = []
        table.reserveCapacity(kernelCount * outCount)
        let inStrides = Shapes.strides(input)
        Shapes.forEachIndex(kernel) { k in
            Shapes.forEachIndex(output) { o in
                var offset = 0
                for axis in 0..<spatial {
                    let i = o[axis] * strides[axis] - before[axis] + k[axis] * dilations[axis]
                    if i < 0 || i >= input[axis] { offset = -1; break }
                    offset += i * inStrides[axis]
                }
                table.append(Int32(offset))
            }
        }
        let positions = table, from = x.id, w = weight.id, b = bias?.id
        let pointwise = kernelCount == 1 && strides.allSatisfy { $0 == 1 } && before.allSatisfy { $0 == 0 } && outCount == inCount
        let outShape = [batch, outputs] + output
        _ = LinearAlgebraOperations.singleThreaded
        context.run(reads: [x, weight] + (bias.map { [$0] } ?? []) + posts.compactMap(\.residual), writes: [out]) { buffers in
            var columns = [Float](repeating: 0, count: pointwise ? 0 : rows * outCount)
            // Channels-last tensors are computed channels-first in scratch and transposed at the edges.
            var sourceCopy = [Float](repeating: 0, count: channelsLast ? batch * inputs * inCount : 0)
            var targetCopy = [Float](repeating: 0, count: channelsLast ? batch * outputs * outCount : 0)
            if channelsLast { transpose(buffers.floats(from), into: &sourceCopy, planes: batch, rows: inCount, columns: inputs) }
            sourceCopy.withUnsafeMutableBufferPointer { sourceBuffer in
            targetCopy.withUnsafeMutableBufferPointer { targetBuffer in
            columns.withUnsafeMutableBufferPointer { pointer in
                let source = channelsLast ? UnsafePointer(sourceBuffer.baseAddress ?? buffers.floats(from)) : UnsafePointer(buffers.floats(from))
                let target = channelsLast ? (targetBuffer.baseAddress ?? buffers.floats(out)) : buffers.floats(out)
                let weights = buffers.floats(w)
                for n in 0..<batch {
                    for g in 0..<groups {
                        let image = source + (n * inputs + g * perGroup) * inCount
                        var matrix = image
                        if !pointwise, let base = pointer.baseAddress {
                            for c in 0..<perGroup {
                                let plane = image + c * inCount
                                for k in 0..<kernelCount {
                                    let row = base + (c * kernelCount + k) * outCount
                                    let entries = k * outCount
                                    for o in 0..<outCount {
                                        let p = Int(positions[entries + o])
                                        row[o] = p < 0 ? 0 : plane[p]
                                    }
                                }
                            }
                            matrix = UnsafePointer(base)
                        }
                        let result = target + (n * outputs + g * outPerGroup) * outCount
                        if let b {
                            for c in 0..<outPerGroup {
                                let value = buffers.floats(b)[g * outPerGroup + c]
                                for o in 0..<outCount { result[c * outCount + o] = value }
                            }
                        }
                        LinearAlgebraOperations.gemm(weights + g * outPerGroup * rows, transposeA: false, matrix, transposeB: false, result,
                                                     m: outPerGroup, n: outCount, k: rows, accumulate: b != nil)
                    }
                }
            }
            }
            }
            if channelsLast {
                targetCopy.withUnsafeBufferPointer { copy in
                    guard let base = copy.baseAddress else { return }
                    let target = buffers.floats(out)
                    for n in 0..<batch {
                        for c in 0..<outputs {
                            for o in 0..<outCount { target[(n * outCount + o) * outputs + c] = base[(n * outputs + c) * outCount + o] }
                        }
                    }
                }
                apply(posts, to: buffers.floats(out), shape: [batch] + output + [outputs], buffers: buffers)
            } else {
                apply(posts, to: buffers.floats(out), shape: outShape, buffers: buffers)
            }
        }
    }

    /// `[planes, rows, columns]` → `[planes, columns, rows]`.
    private static func transpose(_ source: UnsafePointer<Float>, into target: inout [Float], planes: Int, rows: Int, columns: Int) {
        for p in 0..<planes {
            for r in 0..<rows {
                for c in 0..<columns { target[(p * columns + c) * rows + r] = source[(p * rows + r) * columns + c] }
            }
        }
    }

    /// The gradient of a convolution: each input position spreads its
    /// channels' values over the kernel window (a product, then col2im).
    private static func transposedConvolution(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input(), weight = try context.input("weight")
        let spatial = x.rank - 2
        guard spatial >= 1, spatial <= 3, weight.rank == x.rank else {
            throw context.invalid("x \(x.shape) and weight \(weight.shape): transposed convolution needs equal ranks 3 to 5")
        }
        let groups = try context.int("groups", 1)
        let inputs = x.shape[1], perGroupOut = weight.shape[1], outputs = perGroupOut * groups
        guard groups >= 1, weight.shape[0] == inputs, inputs % groups == 0 else {
            throw context.invalid("\(inputs) input channels, weight \(weight.shape), \(groups) groups")
        }
        let perGroupIn = inputs / groups
        let kernel = Array(weight.shape[2...]), input = Array(x.shape[2...])
        let strides = try context.ints("strides") ?? Array(repeating: 1, count: spatial)
        let dilations = try context.ints("dilations") ?? Array(repeating: 1, count: spatial)
        guard strides.count == spatial, dilations.count == spatial else { throw context.invalid("strides and dilations need \(spatial) values") }
        for (key, values) in [("strides", strides), ("dilations", dilations)] where values.contains(where: { $0 < 1 }) {
            throw context.invalid("\(key) \(values) must be positive")
        }
        let type = try context.string("pad_type", "valid")
        let pads = try context.ints("pad") ?? Array(repeating: 0, count: 2 * spatial)
        var output: [Int] = [], begin: [Int] = []
        for axis in 0..<spatial {
            let full = (input[axis] - 1) * strides[axis] + (kernel[axis] - 1) * dilations[axis] + 1
            switch type {
            case "same":
                output.append(input[axis] * strides[axis])
                begin.append(max(full - input[axis] * strides[axis], 0) / 2)
            case "custom":
                guard pads.count == 2 * spatial else { throw context.invalid("pad needs \(2 * spatial) values") }
                output.append(full - pads[2 * axis] - pads[2 * axis + 1])
                begin.append(pads[2 * axis])
            case "valid":
                output.append(full)
                begin.append(0)
            default: throw context.unsupported("pad_type \(type) is not supported")
            }
        }
        if let given = try context.ints("output_shape"), given.count == x.rank { output = Array(given[2...]) }
        let bias = try context.optional("bias")
        if let bias, bias.count != outputs { throw context.invalid("bias has \(bias.count) values for \(outputs) output channels") }
        let out = try context.output([x.shape[0], outputs] + output)
        if DNNL.isAvailable, x.isFloat, let weights = weight.constant, bias == nil || bias?.constant != nil,
           let primitive = try? DNNLConvolution.convolution(
               name: "deconvolution \"\(context.op.name)\"",
               geometry: DNNLConvolution.Geometry(input: x.shape, output: [x.shape[0], outputs] + output, weightShape: weight.shape, groups: groups,
                                                  strides: strides, dilations: dilations, padBefore: begin, channelsLast: false),
               weights: weights.floats, bias: bias?.constant?.floats, post: DNNLPostOperations(), transposed: true,
               threads: primitiveThreads(1, output: [x.shape[0], outputs] + output, context: context)) {
            run(primitive, context, source: x.id, destination: out)
            return
        }
        let kernelCount = kernel.reduce(1, *), inCount = input.reduce(1, *), outCount = output.reduce(1, *)
        let outStrides = Shapes.strides(output)
        // For each (kernel position, input position): the output offset, or -1 outside the output.
        var table: [Int32] = []
        Shapes.forEachIndex(kernel) { k in
            Shapes.forEachIndex(input) { i in
                var offset = 0
                for axis in 0..<spatial {
                    let o = i[axis] * strides[axis] + k[axis] * dilations[axis] - begin[axis]
                    if o < 0 || o >= output[axis] { offset = -1; break }
                    offset += o * outStrides[axis]
                }
                table.append(Int32(offset))
            }
        }
        let positions = table, from = x.id, w = weight.id, b = bias?.id, batch = x.shape[0]
        let rows = perGroupOut * kernelCount
        _ = LinearAlgebraOperations.singleThreaded
        context.run(reads: [x, weight] + (bias.map { [$0] } ?? []), writes: [out]) { buffers in
            var columns = [Float](repeating: 0, count: rows * inCount)
            let source = buffers.floats(from), weights = buffers.floats(w), target = buffers.floats(out)
            for index in 0..<(batch * outputs) {
                let value: Float = b.map { buffers.floats($0)[index % outputs] } ?? 0
                for o in 0..<outCount { target[index * outCount + o] = value }
            }
            columns.withUnsafeMutableBufferPointer { pointer in
                guard let cols = pointer.baseAddress else { return }
                for n in 0..<batch {
                    for g in 0..<groups {
                        LinearAlgebraOperations.gemm(weights + g * perGroupIn * rows, transposeA: true,
                                                     source + (n * inputs + g * perGroupIn) * inCount, transposeB: false, cols,
                                                     m: rows, n: inCount, k: perGroupIn)
                        for c in 0..<perGroupOut {
                            let plane = target + (n * outputs + g * perGroupOut + c) * outCount
                            for k in 0..<kernelCount {
                                let row = cols + (c * kernelCount + k) * inCount
                                let entries = k * inCount
                                for i in 0..<inCount {
                                    let p = Int(positions[entries + i])
                                    if p >= 0 { plane[p] += row[i] }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    enum PoolMode: Sendable { case max, average, l2 }

    private static func pool(_ context: OperationContext, mode: PoolMode) throws(RuntimeError) {
        let x = try context.input()
        let channelsLast = try context.bool("channels_last", false)
        let xShape = channelsLast && x.rank >= 3 ? [x.shape[0], x.shape[x.rank - 1]] + x.shape[1..<(x.rank - 1)] : x.shape
        let spatial = xShape.count - 2
        guard spatial >= 1, spatial <= 3 else { throw context.invalid("x has rank \(x.rank); pooling needs 3 to 5") }
        guard let kernel = try context.ints("kernel_sizes"), kernel.count == spatial else { throw context.invalid("kernel_sizes needs \(spatial) values") }
        let strides = try context.ints("strides") ?? Array(repeating: 1, count: spatial)
        let input = Array(xShape[2...])
        let ceilMode = try context.bool("ceil_mode", false)
        let exclude = try context.bool("exclude_padding_from_average", false)
        let padType = try context.string("pad_type", "valid")
        let custom = try context.ints("pad") ?? []
        let (before, output) = try geometry(context, input: input, kernel: kernel, strides: strides,
                                            dilations: Array(repeating: 1, count: spatial), ceilMode: ceilMode)
        // The padded extent: windows may reach past it only in ceil mode.
        let padded = input.indices.map { axis -> Int in
            switch padType {
            case "custom": return input[axis] + (custom.count == 2 * spatial ? custom[2 * axis + 1] : 0)
            case "same", "same_lower":
                let total = max((output[axis] - 1) * strides[axis] + kernel[axis] - input[axis], 0)
                return input[axis] + total - before[axis]
            default: return input[axis]
            }
        }
        let outShape = Array(xShape.prefix(2)) + output
        let out = try context.output(channelsLast ? [outShape[0]] + output + [outShape[1]] : outShape)

        // oneDNN: max and average pooling, unless an average counting padding has a ceil-mode overhang (oneDNN would count it);
        // channels-last max pooling, and average pooling too small for a oneDNN call's fixed cost, run in channelsLastPool.
        let overhang = input.indices.contains { axis in (output[axis] - 1) * strides[axis] + kernel[axis] - before[axis] > padded[axis] }
        let small = xShape[0] * xShape[1] * output.reduce(1, *) * kernel.reduce(1, *) < smallPoolingWork
        let ownLoop = channelsLast && x.isFloat && (mode == .max || (mode == .average && small)) && !channelsLastPoolingOnDNNL
        if DNNL.isAvailable, x.isFloat, mode != .l2, !(mode == .average && !exclude && overhang), !ownLoop {
            let algorithm = mode == .max ? dnnl_pooling_max : exclude ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_avg_include_padding
            // Split between threads as a convolution is (blocks of images or rows, one primitive each);
            // as many groups as channels: each output reads one channel's window (the work `blocks` counts).
            let whole = DNNLConvolution.Geometry(input: xShape, output: outShape, weightShape: [xShape[1], 1] + kernel, groups: xShape[1],
                                                 strides: strides, dilations: Array(repeating: 1, count: spatial), padBefore: before,
                                                 channelsLast: channelsLast)
            let split = blocks(whole, kernel: kernel, threads: context.threads) ?? [Block(geometry: whole, input: 0, output: 0, channels: nil)]
            var parts: [PreparedConvolution.Part] = []
            var scratch = 0
            for (block, inputOffset, outputOffset) in split.map({ ($0.geometry, $0.input, $0.output) }) {
                guard let primitive = try? DNNLConvolution.pooling(name: "pooling \"\(context.op.name)\"", algorithm: algorithm, input: block.input,
                                                                   output: block.output, kernel: kernel, strides: strides, padBefore: block.padBefore,
                                                                   channelsLast: channelsLast,
                                                                   threads: primitiveThreads(split.count, output: outShape, context: context))
                else { break }
                parts.append(.init(kernel: primitive, inputOffset: inputOffset, outputOffset: outputOffset,
                                   outputCount: block.output.reduce(1, *), scratchOffset: scratch))
                scratch += (primitive.scratchpadBytes + 63) / 64 * 64
            }
            if parts.count == split.count {
                runConvolution(PreparedConvolution(parts: parts, fusedResiduals: [], summed: nil, rest: []), context, x: x.id, out: out,
                               posts: [], stored: [])
                return
            }
        }

        let planes = xShape[0] * xShape[1], inCount = input.reduce(1, *), outCount = output.reduce(1, *)
        // Per output position: the input offsets of its window (−1: padding inside the padded extent, −2: beyond it).
        var windows: [[Int32]] = []
        let inStrides = Shapes.strides(input)
        Shapes.forEachIndex(output) { o in
            var window: [Int32] = []
            Shapes.forEachIndex(kernel) { k in
                var offset = 0
                for axis in 0..<spatial {
                    let i = o[axis] * strides[axis] - before[axis] + k[axis]
                    if i >= padded[axis] { offset = -2; break }
                    if i < 0 || i >= input[axis] { offset = -1; break }
                    offset += i * inStrides[axis]
                }
                window.append(Int32(offset))
            }
            windows.append(window)
        }
        let table = windows, from = x.id, batch = xShape[0], channels = xShape[1]
        if ownLoop {
            channelsLastPool(context, windows: table.flatMap { $0 }, windowSize: kernel.reduce(1, *), mode: mode, exclude: exclude,
                                  batch: batch, channels: channels, inCount: inCount, outCount: outCount, x: x, out: out)
            return
        }
        context.run(reads: [x], writes: [out]) { buffers in
            // Channels-last tensors are pooled channels-first in scratch and transposed at the edges.
            var sourceCopy = [Float](repeating: 0, count: channelsLast ? planes * inCount : 0)
            var targetCopy = [Float](repeating: 0, count: channelsLast ? planes * outCount : 0)
            if channelsLast { transpose(buffers.floats(from), into: &sourceCopy, planes: batch, rows: inCount, columns: channels) }
            sourceCopy.withUnsafeBufferPointer { sourceBuffer in
            targetCopy.withUnsafeMutableBufferPointer { targetBuffer in
                let source = channelsLast ? (sourceBuffer.baseAddress ?? UnsafePointer(buffers.floats(from))) : UnsafePointer(buffers.floats(from))
                let target = channelsLast ? (targetBuffer.baseAddress ?? buffers.floats(out)) : buffers.floats(out)
                for plane in 0..<planes {
                    let image = source + plane * inCount
                    for o in 0..<outCount {
                        var result: Double = mode == .max ? -.infinity : 0
                        var counted = 0
                        for p in table[o] {
                            if p == -2 { continue }
                            if p == -1 {
                                if mode != .max && !exclude { counted += 1 }
                                continue
                            }
                            let value = Double(image[Int(p)])
                            counted += 1
                            switch mode {
                            case .max: result = max(result, value)
                            case .average: result += value
                            case .l2: result += value * value
                            }
                        }
                        switch mode {
                        case .max: break
                        case .average: result /= Double(max(counted, 1))
                        case .l2: result = result.squareRoot()
                        }
                        target[plane * outCount + o] = Float(result)
                    }
                }
            }
            }
            if channelsLast {
                targetCopy.withUnsafeBufferPointer { copy in
                    guard let base = copy.baseAddress else { return }
                    transposeBack(base, into: buffers.floats(out), planes: batch, channels: channels, positions: outCount)
                }
            }
        }
    }

    /// Whether every channels-last max or average pooling runs on oneDNN
    /// rather than in `channelsLastPool`; only tests set it, to compare the
    /// two. oneDNN 2.6's channels-last max pooling is slow on AVX2: ResNet-18's
    /// 3×3 max pool (112×112×64 → 56×56×64) took 1.9–2.1 ms a run
    /// (`jit:avx2`), the loop 0.37; DenseNet-121's 1.9 and 0.57. Its average
    /// pooling is the faster one (DenseNet-121's 2×2 transitions, 0.24–0.28 ms
    /// a run against 0.37–0.40), except below `smallPoolingWork`.
    @TaskLocal static var channelsLastPoolingOnDNNL = false

    /// Element operations (outputs × window) below which a channels-last
    /// average pooling runs in `channelsLastPool` rather than on oneDNN: a zoo
    /// network's 3×3 pool over 16 channels of a 4×4 image took 3.6 µs as a
    /// oneDNN call and 0.1 µs of the loop (DNNL_VERBOSE).
    static let smallPoolingWork = 1 << 14

    /// Max or average pooling of a channels-last tensor read in place, the
    /// channels innermost: for each output position the input positions of its
    /// window (`windows`, `windowSize` per output: an offset in the image, −1
    /// for padding within the padded extent, −2 beyond it), as the channels-first
    /// loop counts them (padding counted in an average unless `exclude`).
    /// Blocks of output positions go to the thread team's threads.
    private static func channelsLastPool(_ context: OperationContext, windows: [Int32], windowSize: Int, mode: PoolMode, exclude: Bool,
                                         batch: Int, channels: Int, inCount: Int, outCount: Int, x: PlanValue, out: Int) {
        let from = x.id, isMax = mode == .max
        let workers = WorkSplit.workers(threads: context.threads, work: batch * outCount * windowSize * channels, items: batch * outCount)
        context.run(reads: [x], writes: [out]) { buffers in
            let tensors = SourceAndTarget(source: buffers.floats(from), target: buffers.floats(out))
            let positions = batch * outCount, block = (positions + workers - 1) / workers
            let pool = { @Sendable (worker: Int) in
                windows.withUnsafeBufferPointer { windows in
                    guard let windows = windows.baseAddress else { return }
                    for position in min(positions, worker * block)..<min(positions, (worker + 1) * block) {
                        let n = position / outCount, o = position % outCount
                        let image = UnsafePointer(tensors.source) + n * inCount * channels
                        let result = tensors.target + position * channels
                        let window = windows + o * windowSize
                        var counted = 0
                        result.update(repeating: isMax ? -.infinity : 0, count: channels)
                        for k in 0..<windowSize {
                            let p = Int(window[k])
                            if p < 0 {
                                if p == -1, !exclude { counted += 1 }
                                continue
                            }
                            counted += 1
                            let values = image + p * channels
                            // The select keeps the running maximum when a value is NaN (as max(_:_:) does) and vectorizes.
                            if isMax {
                                for c in 0..<channels { let value = values[c], running = result[c]; result[c] = value > running ? value : running }
                            } else {
                                for c in 0..<channels { result[c] += values[c] }
                            }
                        }
                        if !isMax {
                            let count = Float(max(counted, 1))
                            for c in 0..<channels { result[c] /= count }
                        }
                    }
                }
            }
            if workers == 1 { pool(0) } else { ThreadTeam.shared.perform(workers, threads: workers, pool) }
        }
    }

    /// `[planes, channels, positions]` → `[planes, positions, channels]`.
    private static func transposeBack(_ source: UnsafePointer<Float>, into target: UnsafeMutablePointer<Float>, planes: Int, channels: Int, positions: Int) {
        for n in 0..<planes {
            for c in 0..<channels {
                for o in 0..<positions { target[(n * positions + o) * channels + c] = source[(n * channels + c) * positions + o] }
            }
        }
    }

    /// Converts `[N, C, spatial…]` to `[N, spatial…, C]` (`channels_last`) or back, in tiles.
    private static func layoutTranspose(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); a layout change needs 3 to 5") }
        let toChannelsLast = try context.bool("channels_last", true)
        let batch = x.shape[0]
        let channels = toChannelsLast ? x.shape[1] : x.shape[x.rank - 1]
        let spatial = toChannelsLast ? Array(x.shape[2...]) : Array(x.shape[1..<(x.rank - 1)])
        let positions = spatial.reduce(1, *)
        let out = try context.output(toChannelsLast ? [batch] + spatial + [channels] : [batch, channels] + spatial, type: x.type)
        // Rows × columns per image: [C, P] → [P, C], or [P, C] → [C, P].
        let rows = toChannelsLast ? channels : positions, columns = toChannelsLast ? positions : channels
        let from = x.id, tile = 32
        // Blocks of whole column tiles on the thread team (each writes its own output rows) for a large image.
        let tiles = (columns + tile - 1) / tile
        let parts = layoutTransposeParts(count: x.count, columnTiles: tiles, threads: context.threads)
        context.run(reads: [x], writes: [out]) { buffers in
            let pointers = SourceAndTarget(source: buffers.floats(from), target: buffers.floats(out))
            ThreadTeam.shared.perform(parts, threads: parts) { part in
                let first = part * tiles / parts * tile, end = min(columns, (part + 1) * tiles / parts * tile)
                for n in 0..<batch {
                    let a = pointers.source + n * rows * columns, b = pointers.target + n * rows * columns
                    var r0 = 0
                    while r0 < rows {
                        let r1 = min(r0 + tile, rows)
                        var c0 = first
                        while c0 < end {
                            let c1 = min(c0 + tile, end)
                            for r in r0..<r1 {
                                for c in c0..<c1 { b[c * rows + r] = a[r * columns + c] }
                            }
                            c0 = c1
                        }
                        r0 = r1
                    }
                }
            }
        }
    }

    /// Blocks of column tiles a layout change of `count` elements is split into on `threads` threads (none under 16 K elements).
    static func layoutTransposeParts(count: Int, columnTiles: Int, threads: Int) -> Int {
        count >= 1 << 14 ? max(1, min(threads, columnTiles)) : 1
    }

    /// The plan value holding `primitive`'s scratchpad, when it needs one (each prediction state has its own).
    private static func scratchpad(_ primitive: DNNLPrimitive, _ context: OperationContext) -> PlanValue? {
        primitive.scratchpadBytes > 0 ? context.scratch(.float32, shape: [(primitive.scratchpadBytes + 3) / 4]) : nil
    }

    /// Adds the kernel that runs `primitive` (one source, one destination) with its scratchpad.
    private static func run(_ primitive: DNNLPrimitive, _ context: OperationContext, source: Int, destination: Int) {
        let scratch = scratchpad(primitive, context)
        context.run(reads: [source], outputs: [destination], scratch: scratch.map { [$0.id] } ?? []) { buffers throws(RuntimeError) in
            let from = buffers.raw(source), to = buffers.raw(destination)
            try primitive.run(scratchpad: scratch.map { buffers.raw($0.id) }) { $0 == 0 ? from : to }
        }
    }
}

// MARK: Facts

extension ConvolutionOperations {
    /// `layout_transpose`: `[N, C, spatial…]` to `[N, spatial…, C]` (`channels_last`), or back.
    static let layoutTransposeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let shape = x.shape, shape.count >= 2 else { return [.unknownRank(x.element)] }
        if context.bool("channels_last", true) {
            return [ValueType(x.element, shape: [shape[0]] + Array(shape[2...]) + [shape[1]])]
        }
        return [ValueType(x.element, shape: [shape[0], shape[shape.count - 1]] + Array(shape[1..<(shape.count - 1)]))]
    }
}
