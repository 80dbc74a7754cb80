import ModelFeatures

/// Kernels for channels-last values (`[N, H, W, C]`, see
/// `ChannelsLastLayout`) where a general kernel walks them slowly: the mean
/// over the spatial axes (a squeeze-and-excitation block's pooling), a
/// product by one value per image and channel (its scaling), and the change
/// to and from channel blocks (`ChannelBlocking`).
///
/// All of them are internal: the plan's passes make them (`ChannelsLastLayout`, `ChannelBlocking`,
/// `ConvolutionFusion`'s `channel_affine`).
enum ChannelsLastOperations: OperationFamily {
    static let internalDefinitions: [String: OperationDefinition] = [
        "spatial_mean": OperationDefinition(["x"]) { context throws(RuntimeError) in
            try spatialMean(context)
        }.withFacts(spatialMeanFacts),
        "channel_mul": OperationDefinition(["x", "y"]) { context throws(RuntimeError) in
            try channelProduct(context)
        }.withFacts(FactsRules.same()),
        "channel_blocks": OperationDefinition(["x", "to_blocks", "width"]) { context throws(RuntimeError) in
            try channelBlocks(context)
        }.withFacts(channelBlocksFacts),
        "channel_affine": OperationDefinition(["x", "scale", "shift", "activations", "alphas", "betas", "residuals", "channels_last"]) { context throws(RuntimeError) in
            try channelAffine(context)
        }.withFacts(FactsRules.same()),
    ]

    /// `x * scale[c] + shift[c]` per channel `c` (axis 1, or the last axis
    /// channels-last) — a batch norm with constant statistics — then the
    /// activations fused after it.
    private static func channelAffine(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        let channelsLast = try context.bool("channels_last", false)
        guard x.rank >= 2, let scale = try context.constant("scale")?.floats, let shift = try context.constant("shift")?.floats else {
            throw context.invalid("channel_affine needs x of rank 2 or more, a constant scale and shift")
        }
        let channels = channelsLast ? x.shape[x.rank - 1] : x.shape[1]
        guard scale.count == channels, shift.count == channels else { throw context.invalid("\(scale.count) scales for \(channels) channels") }
        var functions: [@Sendable (Float) -> Float] = []
        let kinds = try context.constant("activations")?.strings ?? []
        let alphas = try context.constant("alphas")?.floats ?? [], betas = try context.constant("betas")?.floats ?? []
        guard alphas.count == kinds.count, betas.count == kinds.count else { throw context.invalid("post-operations need one alpha and beta each") }
        for (index, kind) in kinds.enumerated() {
            guard let function = ConvolutionOperations.activation(.init(kind: kind, alpha: alphas[index], beta: betas[index], residual: nil)) else {
                throw context.unsupported("post-operation \(kind) is not one modelc fuses")
            }
            functions.append(function)
        }
        let relu = kinds == ["relu"], activations = functions
        let out = try context.output(x.shape)
        let from = x.id, count = x.count
        let inner = channelsLast ? 1 : x.shape[2...].reduce(1, *)
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
            scale.withUnsafeBufferPointer { a in
                shift.withUnsafeBufferPointer { b in
                    guard let a = a.baseAddress, let b = b.baseAddress else { return }
                    // One pass, `v < 0 ? 0 : v` (NaN stays NaN, as relu keeps it) so that the loops vectorize.
                    if channelsLast {
                        var offset = 0
                        while offset < count {
                            let x = source + offset, y = target + offset
                            if relu {
                                for c in 0..<channels {
                                    let v = x[c] * a[c] + b[c]
                                    y[c] = v < 0 ? 0 : v
                                }
                            } else {
                                for c in 0..<channels { y[c] = x[c] * a[c] + b[c] }
                            }
                            offset += channels
                        }
                    } else {
                        var offset = 0, c = 0
                        while offset < count {
                            let m = a[c], k = b[c], x = source + offset, y = target + offset
                            if relu {
                                for i in 0..<inner {
                                    let v = x[i] * m + k
                                    y[i] = v < 0 ? 0 : v
                                }
                            } else {
                                for i in 0..<inner { y[i] = x[i] * m + k }
                            }
                            offset += inner
                            c = c + 1 == channels ? 0 : c + 1
                        }
                    }
                }
            }
            if !relu {
                for function in activations {
                    for index in 0..<count { target[index] = function(target[index]) }
                }
            }
        }
    }

    /// `[N, H, W, C]` → `[N, C/w, H, W, w]` (`to_blocks`, `width` w, 8 or
    /// 16) or back: where a chain of convolutions `ChannelBlocking` runs in
    /// channel blocks starts and where something else reads its values. Each
    /// position's w channels of a block are one contiguous run on both sides.
    private static func channelBlocks(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        let toBlocks = try context.bool("to_blocks", true)
        let width = toBlocks ? try context.int("width", 8) : x.shape.last ?? 0
        guard x.isFloat, ChannelBlocking.widths.contains(width), toBlocks ? x.rank == 4 && x.shape[3] % width == 0 : x.rank == 5 else {
            throw context.invalid("x \(x.shape) is not a channels-last image with channels in blocks of \(width)\(toBlocks ? "" : ", in blocks")")
        }
        let batch = x.shape[0], spatial = toBlocks ? Array(x.shape[1...2]) : Array(x.shape[2...3])
        let blocks = toBlocks ? x.shape[3] / width : x.shape[1], positions = spatial[0] * spatial[1]
        let out = try context.output(toBlocks ? [batch, blocks] + spatial + [width] : [batch] + spatial + [blocks * width], type: x.type)
        let from = x.id
        // Blocks of positions on the thread team for a large image.
        let parts = productParts(count: x.count, rows: positions, threads: context.threads)
        context.run(reads: [x], writes: [out]) { buffers in
            let pointers = ChannelPointers(source: buffers.floats(from), target: buffers.floats(out), scale: nil)
            ThreadTeam.shared.perform(parts, threads: parts) { part in
                let first = part * positions / parts, end = (part + 1) * positions / parts
                for n in 0..<batch {
                    for p in first..<end {
                        for block in 0..<blocks {
                            let lastAxis = ((n * positions + p) * blocks + block) * width
                            let blocked = ((n * blocks + block) * positions + p) * width
                            let source = pointers.source + (toBlocks ? lastAxis : blocked), target = pointers.target + (toBlocks ? blocked : lastAxis)
                            for c in 0..<width { target[c] = source[c] }
                        }
                    }
                }
            }
        }
    }

    /// `[N, spatial…, C]` → `[N, 1…, C]`: the mean of each image's channel, summed in Double.
    private static func spatialMean(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank >= 3, x.isFloat else { throw context.invalid("x \(x.shape) is not a channels-last image") }
        let batch = x.shape[0], channels = x.shape[x.rank - 1], positions = x.shape[1..<(x.rank - 1)].reduce(1, *)
        let out = try context.output([batch] + Array(repeating: 1, count: x.rank - 2) + [channels])
        let from = x.id
        // Blocks of channels (at least 64 each, a multiple of 16) on the thread team when the image is large enough to share.
        let parts = meanParts(count: x.count, channels: channels, threads: context.threads)
        let width = (channels / parts + 15) / 16 * 16
        context.run(reads: [x], writes: [out]) { buffers in
            let pointers = ChannelPointers(source: buffers.floats(from), target: buffers.floats(out), scale: nil)
            ThreadTeam.shared.perform(parts, threads: parts) { part in
                let first = min(channels, part * width), end = part == parts - 1 ? channels : min(channels, first + width)
                guard end > first else { return }
                var sums = [Double](repeating: 0, count: end - first)
                sums.withUnsafeMutableBufferPointer { buffer in
                    guard let sum = buffer.baseAddress else { return }
                    for n in 0..<batch {
                        for c in 0..<(end - first) { sum[c] = 0 }
                        let image = pointers.source + n * positions * channels + first
                        for p in 0..<positions {
                            let row = image + p * channels
                            for c in 0..<(end - first) { sum[c] += Double(row[c]) }
                        }
                        for c in 0..<(end - first) { pointers.target[n * channels + first + c] = Float(sum[c] / Double(max(positions, 1))) }
                    }
                }
            }
        }
    }

    /// Elements below which these kernels run on one thread: waking the team costs more than half of them.
    static let splitMinimum = 1 << 14

    /// Blocks of channels a spatial mean over `count` elements is split into on `threads` threads (at least 64 channels each).
    static func meanParts(count: Int, channels: Int, threads: Int) -> Int {
        count >= splitMinimum ? max(1, min(threads, channels / 64)) : 1
    }

    /// Blocks of positions (`rows` of them) a channel product of `count` elements is split into on `threads` threads.
    static func productParts(count: Int, rows: Int, threads: Int) -> Int {
        count >= splitMinimum ? max(1, min(threads, rows)) : 1
    }

    /// A kernel's buffers, shared by the threads running its parts (each writes only its own).
    private struct ChannelPointers: @unchecked Sendable {
        let source: UnsafeMutablePointer<Float>
        let target: UnsafeMutablePointer<Float>
        let scale: UnsafeMutablePointer<Float>?
    }

    /// `x * y` where one is `[N, spatial…, C]` and the other `[N, 1…, C]`; any other shapes go to `mul`.
    private static func channelProduct(_ context: OperationContext) throws(RuntimeError) {
        let a = try context.input("x"), b = try context.input("y")
        let (image, scale) = a.count >= b.count ? (a, b) : (b, a)
        let rank = image.rank
        guard rank >= 3, scale.rank == rank, image.isFloat, scale.isFloat, scale.constant == nil,
              scale.shape[0] == image.shape[0], scale.shape[rank - 1] == image.shape[rank - 1],
              scale.shape[1..<(rank - 1)].allSatisfy({ $0 == 1 })
        else {
            guard let mul = OperationRegistry.fileOperations["mul"] else { throw context.unsupported("mul is not registered") }
            try mul.plan(context)
            return
        }
        let out = try context.output(image.shape)
        let batch = image.shape[0], channels = image.shape[rank - 1], positions = image.count / max(batch * channels, 1)
        let from = image.id, factors = scale.id
        // Blocks of positions on the thread team when the image is large enough to share.
        let rows = batch * positions
        let parts = productParts(count: image.count, rows: rows, threads: context.threads)
        context.run(reads: [image, scale], writes: [out]) { buffers in
            let pointers = ChannelPointers(source: buffers.floats(from), target: buffers.floats(out), scale: buffers.floats(factors))
            ThreadTeam.shared.perform(parts, threads: parts) { part in
                guard let s = pointers.scale else { return }
                // Pointers per position, so that the inner loop has no index arithmetic to check and vectorizes.
                for position in (part * rows / parts)..<((part + 1) * rows / parts) {
                    let offset = position * channels, row = s + position / positions * channels
                    let x = pointers.source + offset, y = pointers.target + offset
                    for c in 0..<channels { y[c] = x[c] * row[c] }
                }
            }
        }
    }
}

// MARK: Facts

extension ChannelsLastOperations {
    /// `spatial_mean` of a channels-last image: `[N, 1, …, 1, C]`.
    static let spatialMeanFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let shape = x.shape, shape.count >= 2 else { return [.unknownRank(x.element)] }
        return [ValueType(x.element, shape: [shape[0]] + Array(repeating: 1, count: shape.count - 2) + [shape[shape.count - 1]])]
    }

    /// `channel_blocks`: `[N, H, W, C]` to `[N, C / width, H, W, width]`, or back.
    static let channelBlocksFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let shape = x.shape else { return [.unknownRank(x.element)] }
        if context.bool("to_blocks", false) {
            guard shape.count == 4 else { throw context.invalid("x has rank \(shape.count); 4 is required") }
            let width = context.int("width", 8)
            return [ValueType(x.element, shape: [shape[0], shape[3].map { $0 / width }, shape[1], shape[2], width])]
        }
        guard shape.count == 5 else { throw context.invalid("x has rank \(shape.count); 5 is required") }
        let channels: Int? = if let blocks = shape[1], let width = shape[4] { blocks * width } else { nil }
        return [ValueType(x.element, shape: [shape[0], shape[2], shape[3], channels])]
    }
}
