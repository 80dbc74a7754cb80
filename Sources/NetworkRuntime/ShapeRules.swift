import ModelFeatures

/// The shape rules of each layer kind: from the input shapes, the step that
/// computes the layer and its output shape. Channel-first layers read the last
/// three dimensions as (C, H, W), missing ones counting as 1.
struct ShapeRules {
    let node: NetworkNode
    let inputs: [[Int]]

    private func bad(_ detail: String) -> RuntimeError {
        .invalidParameters(model: "layer \"\(node.name)\" (\(node.kind))", detail: detail)
    }

    private var first: [Int] { inputs.first ?? [] }

    /// The input as (C, H, W).
    private func chw(_ shape: [Int]) -> (Int, Int, Int) { channelsHeightWidth(shape) }

    /// One step and output shape per output of the layer.
    func steps() throws(RuntimeError) -> [(StepKind, [Int])] {
        if case .loadConstant(let shape, let values) = node.operation {
            return [(.constant(values), shape)]
        }
        guard !inputs.isEmpty else { throw bad("no inputs") }
        if first.count > 3, node.operation.readsChannelItems { return try batchedSteps() }
        if case .split(let parts) = node.operation {
            let (channels, height, width) = chw(first)
            guard parts > 0, channels % parts == 0 else { throw bad("\(channels) channels do not split into \(parts) equal parts") }
            let each = channels / parts
            return (0..<parts).map { part in
                (.gather(indices: Gathers.channelRange(from: part * each, count: each, plane: height * width), constant: 0),
                 [each, height, width])
            }
        }
        if case .splitAxis(let given, let parts, let axis) = node.operation {
            let rank = first.count
            let resolved = axis < 0 ? axis + rank : axis
            guard (0..<rank).contains(resolved), parts > 0 else { throw bad("axis \(axis) of rank \(rank)") }
            let sizes = given ?? Array(repeating: first[resolved] / parts, count: parts)
            guard sizes.reduce(0, +) == first[resolved] else {
                throw bad("split sizes \(sizes) do not add up to dimension \(axis) of \(first)")
            }
            var start = 0
            return sizes.map { size in
                var begin = [Int](repeating: 0, count: rank), end = first
                begin[resolved] = start
                end[resolved] = start + size
                start += size
                var shape = first
                shape[resolved] = size
                return (.gather(indices: Gathers.box(first, begin: begin, end: end, stride: Array(repeating: 1, count: rank)), constant: 0), shape)
            }
        }
        if let more = try moreSteps() { return [more] }
        if let program = try programSteps() { return [program] }
        return [try step()]
    }

    /// A channel-first layer on a blob of rank 4 or more: NeuralNetwork.proto
    /// treats every dimension before the last three as batch. The layer's rule
    /// is worked out for one `[C, H, W]` item; the output keeps the leading
    /// dimensions, and a batch of more than one runs the item's step per item.
    private func batchedSteps() throws(RuntimeError) -> [(StepKind, [Int])] {
        let lead = Array(first.dropLast(3))
        let batch = lead.reduce(1, *)
        let items = inputs.map { Array(($0.count < 3 ? Array(repeating: 1, count: 3 - $0.count) + $0 : $0).suffix(3)) }
        let sizes = items.map { $0.reduce(1, *) }
        // An input without the batch (a crop's reference of another batch) is shared by every item.
        let strides = zip(inputs, sizes).map { shape, size in Array(shape.dropLast(3)).reduce(1, *) == batch ? size : 0 }
        let perItem = try ShapeRules(node: node, inputs: items).steps()
        return perItem.map { kind, shape in
            let step: StepKind = batch == 1 ? kind
                : .batched(kind, count: batch, inputSizes: sizes, inputStrides: strides, outputSize: shape.reduce(1, *))
            return (step, lead + shape)
        }
    }

    func step() throws(RuntimeError) -> (StepKind, [Int]) {
        switch node.operation {
        case .convolution(let conv) where conv.isDeconvolution:
            return try deconvolution(conv)
        case .convolution(let conv):
            let (channels, height, width) = chw(first)
            guard channels == conv.kernelChannels * conv.groups else {
                throw bad("input has \(channels) channels, the weights expect \(conv.kernelChannels * conv.groups)")
            }
            let (out, padding) = try Self.window(input: (height, width), kernel: conv.kernel, stride: conv.stride,
                                                 dilation: conv.dilation, padding: conv.padding, layer: bad)
            // Core ML's [out, in/groups, kH, kW] to XNNPACK's [out, kH, kW, in/groups]: the same
            // order for a 1×1 kernel or one input channel per group (depthwise), whose weights
            // the plan then shares with the graph instead of holding a second copy.
            let kh = conv.kernel.height, kw = conv.kernel.width, kc = conv.kernelChannels
            var packed = conv.weights
            if kh * kw > 1 && kc > 1 {
                for o in 0..<conv.outputChannels {
                    for i in 0..<kc {
                        for y in 0..<kh {
                            for x in 0..<kw {
                                packed[((o * kh + y) * kw + x) * kc + i] = conv.weights[((o * kc + i) * kh + y) * kw + x]
                            }
                        }
                    }
                }
            }
            let step = StepKind.Convolution(
                input: (channels, height, width), output: (conv.outputChannels, out.0, out.1),
                padding: (padding.top, padding.right, padding.bottom, padding.left),
                kernel: (kh, kw), stride: (conv.stride.height, conv.stride.width),
                dilation: (conv.dilation.height, conv.dilation.width), groups: conv.groups,
                weights: packed, bias: conv.bias, outputRange: (-.infinity, .infinity))
            return (.convolution(step), [conv.outputChannels, out.0, out.1])

        case .innerProduct(let outputs, let inputsCount, let weights, let bias):
            // NeuralNetwork.proto: rank 4 (x1, x2, x3, x4) is (x1, x2·x3·x4) → (x1, C_out, 1, 1),
            // rank 5 (x1·x2, x3·x4·x5) → (x1, x2, C_out, 1, 1), rank 2 and 3 apply to the last dimension.
            let count = first.reduce(1, *)
            func product(rows: Int, _ shape: [Int]) -> (StepKind, [Int]) {
                (.fullyConnected(inputs: inputsCount, outputs: outputs, rows: rows, weights: weights, bias: bias,
                                 outputRange: (-.infinity, .infinity)), shape)
            }
            if first.count >= 4 {
                let lead = Array(first.dropLast(3))
                guard first.suffix(3).reduce(1, *) == inputsCount else {
                    throw bad("input's last three dimensions \(Array(first.suffix(3))) hold \(first.suffix(3).reduce(1, *)) values, the weights expect \(inputsCount)")
                }
                return product(rows: lead.reduce(1, *), lead + [outputs, 1, 1])
            }
            // A rank-3 [C, 1, 1] is a rank-5 network's channel blob; otherwise the last dimension is C_in.
            let channelBlob = first.count == 3 && first[0] == inputsCount && count == inputsCount
            if first.count > 1, first.last == inputsCount, !channelBlob {
                return product(rows: count / inputsCount, Array(first.dropLast()) + [outputs])
            }
            guard count == inputsCount else { throw bad("input has \(count) values, the weights expect \(inputsCount)") }
            return product(rows: 1, first.count == 3 ? [outputs, 1, 1] : [outputs])

        case .channelAffine(let scale, let shift):
            let (channels, height, width) = chw(first)
            guard scale.count == channels else { throw bad("input has \(channels) channels, the layer has \(scale.count)") }
            return (.channelAffine(scale: scale, shift: shift, channels: channels, plane: height * width), first)

        case .activation(let activation):
            let (channels, height, width) = chw(first)
            if case .prelu(let alpha) = activation, alpha.count != 1, alpha.count != channels {
                throw bad("PReLU has \(alpha.count) slopes for \(channels) channels")
            }
            return (.activation(activation, channels: channels, plane: height * width), first)

        case .pooling(let pooling):
            let (channels, height, width) = chw(first)
            if pooling.global {
                return (.pooling(.init(kind: pooling.kind, channels: channels, input: (height, width), output: (1, 1),
                                       kernel: (height, width), stride: (1, 1), padTop: 0, padLeft: 0, excludePadding: true)),
                        [channels, 1, 1])
            }
            let (out, padding) = try Self.window(input: (height, width), kernel: pooling.kernel, stride: pooling.stride,
                                                 dilation: (1, 1), padding: pooling.padding, layer: bad)
            return (.pooling(.init(kind: pooling.kind, channels: channels, input: (height, width), output: out,
                                   kernel: pooling.kernel, stride: pooling.stride, padTop: padding.top, padLeft: padding.left,
                                   excludePadding: pooling.excludePadding)), [channels, out.0, out.1])

        case .softmax(let axis):
            if let axis {
                let rank = first.count
                let resolved = axis < 0 ? axis + rank : axis
                guard (0..<rank).contains(resolved) else { throw bad("axis \(axis) of a rank-\(rank) input") }
                return (.softmax(outer: first[..<resolved].reduce(1, *), axis: first[resolved],
                                 inner: first[(resolved + 1)...].reduce(1, *)), first)
            }
            let (channels, height, width) = chw(first)
            return (.softmax(outer: 1, axis: channels, inner: height * width), first)

        case .flatten(let channelLast):
            let (channels, height, width) = chw(first)
            let shape = [channels * height * width, 1, 1]
            return (channelLast && height * width > 1 ? .flattenChannelLast(channels: channels, plane: height * width) : .copy(count: first.reduce(1, *)), shape)

        case .add(let alpha), .multiply(let alpha):
            let operation: StepKind.Elementwise = if case .add = node.operation { .add } else { .multiply }
            let output = try broadcast(inputs)
            return (.elementwise(operation, alpha: inputs.count == 1 ? alpha : nil, inputShapes: inputs, outputShape: output), output)
        case .average, .maximum, .minimum:
            let operation: StepKind.Elementwise = switch node.operation {
            case .average: .average
            case .maximum: .maximum
            default: .minimum
            }
            let output = try broadcast(inputs)
            return (.elementwise(operation, alpha: nil, inputShapes: inputs, outputShape: output), output)

        case .concat:
            // Along the channel axis, the third dimension from the end.
            let shapes = inputs.map { Array(repeating: 1, count: max(0, 3 - $0.count)) + $0 }
            let rank = shapes[0].count
            guard shapes.allSatisfy({ $0.count == rank && $0.suffix(2) == shapes[0].suffix(2) && $0.prefix(rank - 3) == shapes[0].prefix(rank - 3) }) else {
                throw bad("inputs of shapes \(inputs) cannot be joined along the channel axis")
            }
            let inner = shapes[0].suffix(2).reduce(1, *)
            let outer = shapes[0].prefix(rank - 3).reduce(1, *)
            var output = shapes[0]
            output[rank - 3] = shapes.reduce(0) { $0 + $1[rank - 3] }
            return (.concat(parts: shapes.map { $0[rank - 3] }, outer: outer, inner: inner), output)

        case .batchedMatMul(let transposeA, let transposeB, let weights, let first, let second, let bias):
            let a = self.first
            guard !a.isEmpty else { throw bad("input of rank 0") }
            let aMatrix = a.count == 1 ? [1, a[0]] : a
            let m = transposeA ? aMatrix[aMatrix.count - 1] : aMatrix[aMatrix.count - 2]
            let k = transposeA ? aMatrix[aMatrix.count - 2] : aMatrix[aMatrix.count - 1]
            let batchShapeA = Array(aMatrix.dropLast(2))
            let batchA = batchShapeA.reduce(1, *)
            if let weights {
                guard k == first else { throw bad("input's inner dimension is \(k), the weights' first is \(first)") }
                let output = a.count == 1 ? [second] : batchShapeA + [m, second]
                // The weights are stored [second, first]: the product uses their transpose.
                return (.matmul(batch: batchA, m: m, k: k, n: second, transposeA: transposeA, transposeB: true,
                                weights: weights, bias: bias, aMatrices: Array(0..<batchA), bMatrices: Array(repeating: 0, count: batchA)), output)
            }
            guard inputs.count == 2 else { throw bad("needs two inputs or weights") }
            guard a.count >= 2, inputs[1].count >= 2 else {
                throw .unsupportedLayer(layer: node.name, kind: node.kind, reason: "a rank-1 operand of a product of two inputs is not supported")
            }
            let b = inputs[1]
            let kB = transposeB ? b[b.count - 1] : b[b.count - 2]
            let n = transposeB ? b[b.count - 2] : b[b.count - 1]
            guard kB == k else { throw bad("inner dimensions \(k) and \(kB) differ") }
            // Batch dimensions broadcast as NumPy's matmul does, whatever their ranks.
            let batchShapeB = Array(b.dropLast(2))
            let batchShape = try broadcast([batchShapeA, batchShapeB])
            let batch = batchShape.reduce(1, *)
            return (.matmul(batch: batch, m: m, k: k, n: n, transposeA: transposeA, transposeB: transposeB,
                            weights: nil, bias: nil, aMatrices: Self.broadcastIndices(batchShapeA, to: batchShape),
                            bMatrices: Self.broadcastIndices(batchShapeB, to: batchShape)), batchShape + [m, n])
        default:
            throw .unsupportedLayer(layer: node.name, kind: node.kind, reason: "modelc has no shape rule for this layer")
        }
    }

    /// ML program operations on tensors of any rank.
    private func programSteps() throws(RuntimeError) -> (StepKind, [Int])? {
        let rank = first.count
        func axis(_ value: Int) -> Int { value < 0 ? value + rank : value }
        switch node.operation {
        case .binary(let operation):
            let output = try broadcast(inputs)
            return (.elementwise(operation, alpha: nil, inputShapes: inputs, outputShape: output), output)
        case .linear(let outputs, let inputsCount, let weights, let bias):
            guard first.last == inputsCount else { throw bad("input's last dimension is \(first.last ?? 0), the weights take \(inputsCount)") }
            let rows = first.dropLast().reduce(1, *)
            return (.fullyConnected(inputs: inputsCount, outputs: outputs, rows: rows, weights: weights, bias: bias,
                                    outputRange: (-.infinity, .infinity)), Array(first.dropLast()) + [outputs])
        case .layerNorm(let axes, let gamma, let beta, let epsilon):
            let size = first.suffix(axes).reduce(1, *)
            return (.layerNorm(rows: first.reduce(1, *) / max(size, 1), size: size, gamma: gamma, beta: beta, epsilon: epsilon), first)
        case .reduceAxes(let mode, let axes, let keep):
            let resolved = (axes.isEmpty ? Array(0..<rank) : axes.map(axis)).sorted()
            guard let low = resolved.first, let high = resolved.last, high < rank, low >= 0 else { throw bad("axes \(axes) of rank \(rank)") }
            var shape = first
            for index in resolved { shape[index] = 1 }
            if !keep { shape = shape.enumerated().filter { !resolved.contains($0.offset) }.map(\.element) }
            if shape.isEmpty { shape = [1] }
            if high - low + 1 == resolved.count {
                let outer = first[..<low].reduce(1, *), along = first[low...high].reduce(1, *), inner = first[(high + 1)...].reduce(1, *)
                return (.reduce(mode, outer: outer, axis: along, inner: inner, epsilon: 0), shape)
            }
            // Axes apart: move the kept axes first and the reduced ones last, then reduce each row.
            let kept = (0..<rank).filter { !resolved.contains($0) }
            let table = Gathers.transpose(first, kept + resolved)
            let along = resolved.reduce(1) { $0 * first[$1] }
            return (.reduceGathered(mode, table: table, axis: along), shape)
        case .sliceByIndex(let begin, let end, let stride, let beginMask, let endMask, let squeezeMask):
            var starts = [Int](), stops = [Int](), steps = [Int](), shape = [Int]()
            for index in 0..<rank {
                let size = first[index]
                let step = index < stride.count ? stride[index] : 1
                guard step > 0 else { throw .unsupportedLayer(layer: node.name, kind: node.kind, reason: "negative slice strides are not supported") }
                var from = index < begin.count && !(index < beginMask.count && beginMask[index]) ? begin[index] : 0
                var to = index < end.count && !(index < endMask.count && endMask[index]) ? end[index] : size
                if from < 0 { from += size }
                if to < 0 { to += size }
                from = min(max(from, 0), size)
                to = min(max(to, from), size)
                if index < squeezeMask.count, squeezeMask[index] { to = from + 1 }
                starts.append(from); stops.append(to); steps.append(step)
                shape.append((to - from + step - 1) / step)
            }
            let squeezed = shape.enumerated().filter { !($0.offset < squeezeMask.count && squeezeMask[$0.offset]) }.map(\.element)
            return (.gather(indices: Gathers.box(first, begin: starts, end: stops, stride: steps), constant: 0), squeezed.isEmpty ? [1] : squeezed)
        case .padConstant(let pads, let mode):
            guard pads.count % 2 == 0, pads.count / 2 <= rank else { throw bad("\(pads.count) pad amounts for rank \(rank)") }
            let padded = rank - pads.count / 2
            var before = [Int](repeating: 0, count: rank), after = before
            for index in 0..<(pads.count / 2) {
                before[padded + index] = pads[2 * index]
                after[padded + index] = pads[2 * index + 1]
            }
            let shape = (0..<rank).map { first[$0] + before[$0] + after[$0] }
            var constant: Float = 0
            if case .constant(let value) = mode { constant = value }
            return (.gather(indices: Gathers.padded(first, before: before, output: shape, mode: mode), constant: constant), shape)
        case .gatherConstant(let indices, let indexShape, let gatherAxis, let givenBatchDims):
            // x[b…, m…, indices[b…, j…], i…] for the first `batchDims` dimensions shared by x and the indices.
            let resolved = axis(gatherAxis)
            guard (0..<rank).contains(resolved) else { throw bad("axis \(gatherAxis) of rank \(rank)") }
            let batchDims = givenBatchDims < 0 ? givenBatchDims + indexShape.count : givenBatchDims
            guard batchDims >= 0, batchDims <= resolved, batchDims <= indexShape.count,
                  Array(indexShape.prefix(batchDims)) == Array(first.prefix(batchDims)) else {
                throw bad("batch_dims \(givenBatchDims) with indices of shape \(indexShape) and input of shape \(first), axis \(gatherAxis)")
            }
            let size = first[resolved]
            let positions = indices.map { $0 < 0 ? $0 + size : $0 }
            guard positions.allSatisfy({ (0..<size).contains($0) }) else { throw bad("gather indices outside 0..<\(size)") }
            let batches = first[..<batchDims].reduce(1, *), middle = first[batchDims..<resolved].reduce(1, *)
            let inner = first[(resolved + 1)...].reduce(1, *)
            let perBatch = indexShape[batchDims...].reduce(1, *)
            var table: [Int32] = []
            table.reserveCapacity(batches * middle * perBatch * inner)
            for b in 0..<batches {
                for m in 0..<middle {
                    let o = b * middle + m
                    for p in positions[(b * perBatch)..<((b + 1) * perBatch)] {
                        for i in 0..<inner { table.append(Int32((o * size + p) * inner + i)) }
                    }
                }
            }
            return (.gather(indices: table, constant: 0),
                    Array(first[..<resolved]) + Array(indexShape[batchDims...]) + Array(first[(resolved + 1)...]))
        case .castToInteger:
            return (.truncate, first)
        case .instanceNorm(let gamma, let beta, let epsilon):
            let (channels, height, width) = chw(first)
            guard gamma.count == channels else { throw bad("input has \(channels) channels, the layer has \(gamma.count)") }
            return (.instanceNorm(channels: channels, plane: height * width, gamma: gamma, beta: beta, epsilon: epsilon), first)
        default:
            return nil
        }
    }

    /// The layers added for wider coverage: most are index gathers.
    private func moreSteps() throws(RuntimeError) -> (StepKind, [Int])? {
        let (channels, height, width) = chw(first)
        let plane = height * width
        switch node.operation {
        case .pad(let top, let bottom, let left, let right, let mode):
            let outH = height + top + bottom, outW = width + left + right
            var constant: Float = 0
            if case .constant(let value) = mode { constant = value }
            if case .reflection = mode, top >= height || bottom >= height || left >= width || right >= width {
                throw bad("reflection padding of \(max(top, bottom, left, right)) needs a larger input than \(height)×\(width)")
            }
            let indices = Gathers.plane(channels: channels, outH: outH, outW: outW) { y, x in
                let sy = y - top, sx = x - left
                switch mode {
                case .constant: return sy >= 0 && sy < height && sx >= 0 && sx < width ? sy * width + sx : nil
                case .replication: return min(max(sy, 0), height - 1) * width + min(max(sx, 0), width - 1)
                case .reflection:
                    let ry = sy < 0 ? -sy : (sy >= height ? 2 * (height - 1) - sy : sy)
                    let rx = sx < 0 ? -sx : (sx >= width ? 2 * (width - 1) - sx : sx)
                    return ry * width + rx
                }
            } source: { c in c * plane }
            // NeuralNetwork.proto: rank 2 and up, the output of the input's rank.
            return (.gather(indices: indices, constant: constant), Array([channels, outH, outW].suffix(max(2, min(3, first.count)))))
        case .upsample(let factorH, let factorW, let mode):
            let outH = height * factorH, outW = width * factorW
            if mode != .nearest {
                return (.upsampleBilinear(channels: channels, input: (height, width), output: (outH, outW), mode: mode),
                        [channels, outH, outW])
            }
            let indices = Gathers.plane(channels: channels, outH: outH, outW: outW) { y, x in (y / factorH) * width + x / factorW } source: { c in c * plane }
            return (.gather(indices: indices, constant: 0), [channels, outH, outW])
        case .crop(let top, let bottom, let left, let right, let offset):
            var outH = height - top - bottom, outW = width - left - right, startY = top, startX = left
            if let offset {
                guard inputs.count == 2 else { throw bad("cropping to a reference needs two inputs") }
                let (_, refH, refW) = chw(inputs[1])
                (outH, outW, startY, startX) = (refH, refW, offset.0, offset.1)
            }
            guard outH > 0, outW > 0, startY + outH <= height, startX + outW <= width else {
                throw bad("cropping a \(height)×\(width) input leaves nothing")
            }
            let indices = Gathers.plane(channels: channels, outH: outH, outW: outW) { y, x in (y + startY) * width + x + startX } source: { c in c * plane }
            return (.gather(indices: indices, constant: 0), [channels, outH, outW])
        case .scaleBias(let scale, let scaleShape, let bias, let biasShape):
            // Shapes [1], [C], [C, 1, 1], [1, H, W], [C, H, W]: as (c, h, w) with ones broadcast.
            func broadcastShape(_ shape: [Int], _ role: String) throws(RuntimeError) -> [Int] {
                let padded = shape.count == 1 ? (shape[0] == 1 ? [1, 1, 1] : [shape[0], 1, 1]) : (shape.isEmpty ? [1, 1, 1] : shape)
                guard padded.count == 3, padded[0] == 1 || padded[0] == channels, padded[1] == 1 || padded[1] == height,
                      padded[2] == 1 || padded[2] == width else {
                    throw bad("\(role) of shape \(shape) does not apply to a \(channels)×\(height)×\(width) input")
                }
                return padded
            }
            return (.scaleBias(scale: scale, scaleShape: try broadcastShape(scaleShape, "scale"), bias: bias,
                               biasShape: try broadcastShape(biasShape, "bias"), input: [channels, height, width]), first)
        case .unary(let operation, let scale, let shift, let epsilon):
            return (.unary(operation, scale: scale, shift: shift, epsilon: epsilon), first)
        case .l2Normalize(let epsilon):
            return (.l2Normalize(epsilon: epsilon, count: channels * plane), first)
        case .lrn(let alpha, let beta, let size, let k):
            return (.lrn(alpha: alpha, beta: beta, size: size, k: k, channels: channels, plane: plane), first)
        case .meanVarianceNormalize(let across, let variance, let epsilon):
            return (.meanVarianceNormalize(acrossChannels: across, normalizeVariance: variance, epsilon: epsilon, channels: channels, plane: plane), first)
        case .slice(let axis, let start, let end, let step):
            let size = switch axis { case .channel: channels; case .height: height; case .width: width }
            let from = start < 0 ? start + size : start
            let to = end <= 0 ? end + size : min(end, size)
            guard from >= 0, from < to else { throw bad("slice \(start)..<\(end) of \(size) is empty") }
            let picked = Array(stride(from: from, to: to, by: step))
            var indices: [Int32] = []
            switch axis {
            case .channel:
                for c in picked { for p in 0..<plane { indices.append(Int32(c * plane + p)) } }
                return (.gather(indices: indices, constant: 0), [picked.count, height, width])
            case .height:
                for c in 0..<channels { for y in picked { for x in 0..<width { indices.append(Int32(c * plane + y * width + x)) } } }
                return (.gather(indices: indices, constant: 0), [channels, picked.count, width])
            case .width:
                for c in 0..<channels { for y in 0..<height { for x in picked { indices.append(Int32(c * plane + y * width + x)) } } }
                return (.gather(indices: indices, constant: 0), [channels, height, picked.count])
            }
        case .reduce(let mode, let axes, let epsilon):
            let (outer, axis, inner, shape): (Int, Int, Int, [Int]) = switch axes {
            case .chw: (1, channels * plane, 1, [1, 1, 1])
            case .hw: (channels, plane, 1, [channels, 1, 1])
            case .c: (1, channels, plane, [1, height, width])
            case .h: (channels, height, width, [channels, 1, width])
            case .w: (channels * height, width, 1, [channels, height, 1])
            }
            return (.reduce(mode, outer: outer, axis: axis, inner: inner, epsilon: epsilon), shape)
        case .embedding(let inputDim, let outputs, let weights, let bias):
            // NeuralNetwork.proto: (x1, 1, 1, 1) → (x1, C_out, 1, 1), (x1, x2, 1, 1, 1) → (x1, x2, C_out, 1, 1).
            let shape = first.count >= 4 ? Array(first.dropLast(3)) + [outputs, 1, 1]
                : (first.count <= 1 || first.reduce(1, *) == 1 ? [outputs, 1, 1] : [first.reduce(1, *), outputs, 1, 1])
            return (.embedding(inputDim: inputDim, outputs: outputs, rows: first.reduce(1, *), weights: weights, bias: bias), shape)
        case .embeddingND(let vocabulary, let outputs, let weights, let bias):
            // NeuralNetwork.proto: rank 2 to 5, the last dimension 1: (x1, …, 1) → (x1, …, embeddingSize).
            guard first.count >= 2, first.last == 1 else { throw bad("input \(first) does not end in a dimension of 1") }
            return (.embedding(inputDim: vocabulary, outputs: outputs, rows: first.reduce(1, *), weights: weights, bias: bias),
                    Array(first.dropLast()) + [outputs])
        case .dot(let cosine):
            guard inputs.count == 2, inputs[0].reduce(1, *) == inputs[1].reduce(1, *) else { throw bad("needs two inputs of one size") }
            return (.dot(cosine: cosine, count: first.reduce(1, *)), [1, 1, 1])
        case .permute(let axes):
            let dims = [1, channels, height, width]
            let shape = axes.map { dims[$0] }
            return (.gather(indices: Gathers.transpose(dims, axes), constant: 0), Array(shape.dropFirst()))
        case .reshape(let shape, let channelLast):
            let target = shape.count == 3 ? shape : (shape.count == 1 ? [shape[0], 1, 1] : shape)
            guard target.reduce(1, *) == first.reduce(1, *) else { throw bad("cannot reshape \(first) into \(shape)") }
            if channelLast {
                // Through channel-last order: [C,H,W] → [H,W,C] → reshape → back.
                let (tc, th, tw) = chw(target)
                let toHWC = Gathers.transpose([channels, height, width], [1, 2, 0])
                let fromHWC = Gathers.transpose([th, tw, tc], [2, 0, 1])
                return (.gather(indices: fromHWC.map { toHWC[Int($0)] }, constant: 0), target)
            }
            return (.copy(count: first.reduce(1, *)), target)
        case .squeeze(let axes, let all):
            let rank = first.count
            let resolved = Set(axes.map { $0 < 0 ? $0 + rank : $0 })
            var shape = first.enumerated().filter { all ? $0.element != 1 : !resolved.contains($0.offset) }.map(\.element)
            if shape.isEmpty { shape = [1] }
            return (.copy(count: first.reduce(1, *)), shape)
        case .expandDims(let axes):
            let rank = first.count + axes.count
            let resolved = Set(axes.map { $0 < 0 ? $0 + rank : $0 })
            var source = first.makeIterator()
            return (.copy(count: first.reduce(1, *)), (0..<rank).map { resolved.contains($0) ? 1 : (source.next() ?? 1) })
        case .reshapeStatic(let requested, let zerosFromEnd):
            // -1 takes what is left; 0 keeps the input's dimension at the same position, counted
            // from the start, or (iOS 17 `reshape`) from the end, 1 where the input has none.
            var shape = requested.enumerated().map { offset, size -> Int in
                guard size == 0 else { return size }
                if zerosFromEnd {
                    let source = first.count - (requested.count - offset)
                    return source >= 0 ? first[source] : 1
                }
                return offset < first.count ? first[offset] : size
            }
            if let unknown = shape.firstIndex(of: -1) {
                let known = shape.enumerated().filter { $0.offset != unknown }.reduce(1) { $0 * $1.element }
                shape[unknown] = known > 0 ? first.reduce(1, *) / known : 0
            }
            guard shape.allSatisfy({ $0 >= 0 }), shape.reduce(1, *) == first.reduce(1, *) else { throw bad("cannot reshape \(first) into \(requested)") }
            return (.copy(count: first.reduce(1, *)), shape)
        case .flattenTo2D(let axis):
            let resolved = axis < 0 ? axis + first.count : axis
            return (.copy(count: first.reduce(1, *)), [first.prefix(resolved).reduce(1, *), first.dropFirst(resolved).reduce(1, *)])
        case .transpose(let given):
            // Negative axes count from the end, as in MIL's `transpose`.
            let axes = given.map { $0 < 0 ? $0 + first.count : $0 }
            guard axes.count == first.count, Set(axes) == Set(0..<first.count) else { throw bad("axes \(given) do not permute rank \(first.count)") }
            return (.gather(indices: Gathers.transpose(first, axes), constant: 0), axes.map { first[$0] })
        case .tile(let reps):
            guard reps.count <= first.count, reps.allSatisfy({ $0 > 0 }) else { throw bad("repetitions \(reps) for rank \(first.count)") }
            let all = [Int](repeating: 1, count: first.count - reps.count) + reps
            return (.gather(indices: Gathers.tile(first, all), constant: 0), zip(first, all).map { $0 * $1 })
        case .concatND(let axis, let interleave):
            let rank = first.count
            let resolved = axis < 0 ? axis + rank : axis
            guard (0..<rank).contains(resolved), inputs.allSatisfy({ $0.count == rank }) else { throw bad("axis \(axis) of rank \(rank) inputs") }
            for shape in inputs {
                for index in 0..<rank where index != resolved && shape[index] != first[index] {
                    throw bad("inputs of shapes \(inputs) cannot be joined along axis \(axis)")
                }
            }
            var output = first
            output[resolved] = inputs.reduce(0) { $0 + $1[resolved] }
            if interleave {
                // Inputs of one shape [outer, s, inner]: the output [outer, s, n, inner] is a
                // concatenation of parts of 1 over outer × s.
                guard inputs.allSatisfy({ $0 == first }) else { throw bad("interleaved inputs of shapes \(inputs) differ") }
                return (.concat(parts: [Int](repeating: 1, count: inputs.count), outer: first.prefix(resolved + 1).reduce(1, *),
                                inner: first.dropFirst(resolved + 1).reduce(1, *)), output)
            }
            return (.concat(parts: inputs.map { $0[resolved] }, outer: first.prefix(resolved).reduce(1, *),
                            inner: first.dropFirst(resolved + 1).reduce(1, *)), output)
        default:
            return nil
        }
    }

    /// A transposed convolution: output = (input - 1) × stride + dilated kernel, less the padding.
    private func deconvolution(_ conv: LayerOperation.Convolution) throws(RuntimeError) -> (StepKind, [Int]) {
        let (channels, height, width) = chw(first)
        guard channels == conv.kernelChannels else {
            throw bad("input has \(channels) channels, the weights expect \(conv.kernelChannels)")
        }
        let effective = ((conv.kernel.height - 1) * conv.dilation.height + 1, (conv.kernel.width - 1) * conv.dilation.width + 1)
        let full = ((height - 1) * conv.stride.height + effective.0, (width - 1) * conv.stride.width + effective.1)
        var out: (Int, Int)
        var padding = (top: 0, right: 0, bottom: 0, left: 0)
        switch conv.padding {
        case .valid(let top, let bottom, let left, let right):
            padding = (top, right, bottom, left)
            out = (full.0 - top - bottom, full.1 - left - right)
        case .same, .includeLastPixel:
            out = (height * conv.stride.height, width * conv.stride.width)
            let totalH = max(0, full.0 - out.0), totalW = max(0, full.1 - out.1)
            padding = (totalH / 2, totalW - totalW / 2, totalH - totalH / 2, totalW / 2)
        }
        if conv.outputShape.count == 2 { out = (conv.outputShape[0], conv.outputShape[1]) }
        let adjustment = (out.0 - (full.0 - padding.top - padding.bottom), out.1 - (full.1 - padding.left - padding.right))
        guard out.0 > 0, out.1 > 0, adjustment.0 >= 0, adjustment.1 >= 0,
              adjustment.0 < conv.stride.height || adjustment.0 == 0, adjustment.1 < conv.stride.width || adjustment.1 == 0 else {
            throw bad("an output of \(out.0)×\(out.1) cannot come from a \(height)×\(width) input")
        }
        // Core ML's [in, out/groups, kH, kW] to XNNPACK's [groups, out/groups, kH, kW, in/groups].
        let groups = conv.groups, inPerGroup = channels / groups, outPerGroup = conv.outputChannels / groups
        let kh = conv.kernel.height, kw = conv.kernel.width
        var packed = [Float](repeating: 0, count: conv.weights.count)
        for g in 0..<groups {
            for o in 0..<outPerGroup {
                for y in 0..<kh {
                    for x in 0..<kw {
                        for i in 0..<inPerGroup {
                            let source = (((g * inPerGroup + i) * outPerGroup + o) * kh + y) * kw + x
                            packed[((((g * outPerGroup + o) * kh + y) * kw + x) * inPerGroup) + i] = conv.weights[source]
                        }
                    }
                }
            }
        }
        let step = StepKind.Convolution(
            input: (channels, height, width), output: (conv.outputChannels, out.0, out.1), padding: padding,
            kernel: (kh, kw), stride: (conv.stride.height, conv.stride.width), dilation: (conv.dilation.height, conv.dilation.width),
            groups: groups, weights: packed, bias: conv.bias, outputRange: (-.infinity, .infinity),
            deconvolutionAdjustment: adjustment)
        return (.convolution(step), [conv.outputChannels, out.0, out.1])
    }

    /// NumPy-style broadcasting of trailing dimensions.
    private func broadcast(_ shapes: [[Int]]) throws(RuntimeError) -> [Int] {
        let rank = shapes.map(\.count).max() ?? 0
        var output = [Int](repeating: 1, count: rank)
        for shape in shapes {
            let padded = Array(repeating: 1, count: rank - shape.count) + shape
            for axis in 0..<rank where padded[axis] != 1 {
                guard output[axis] == 1 || output[axis] == padded[axis] else {
                    throw bad("input shapes \(shapes) do not broadcast")
                }
                output[axis] = padded[axis]
            }
        }
        return output
    }

    /// For each position of `output` (row-major), the position of `shape`
    /// that broadcasting reads: dimensions aligned from the end, size-1 ones repeated.
    static func broadcastIndices(_ shape: [Int], to output: [Int]) -> [Int] {
        let padded = Array(repeating: 1, count: output.count - shape.count) + shape
        var indices: [Int] = []
        indices.reserveCapacity(output.reduce(1, *))
        for position in 0..<output.reduce(1, *) {
            var rest = position, index = 0, step = 1
            for axis in (0..<output.count).reversed() {
                let coordinate = rest % output[axis]
                rest /= output[axis]
                if padded[axis] != 1 { index += coordinate * step }
                step *= padded[axis]
            }
            indices.append(index)
        }
        return indices
    }

    /// The output size and the padding before and after, for a sliding window.
    static func window(input: (Int, Int), kernel: (height: Int, width: Int), stride: (height: Int, width: Int),
                       dilation: (height: Int, width: Int), padding: LayerOperation.Padding,
                       layer bad: (String) -> RuntimeError) throws(RuntimeError)
        -> ((Int, Int), (top: Int, bottom: Int, left: Int, right: Int)) {
        let effective = ((kernel.height - 1) * dilation.height + 1, (kernel.width - 1) * dilation.width + 1)
        guard stride.height > 0, stride.width > 0 else { throw bad("stride is 0") }
        switch padding {
        case .valid(let top, let bottom, let left, let right):
            let height = (input.0 + top + bottom - effective.0) / stride.height + 1
            let width = (input.1 + left + right - effective.1) / stride.width + 1
            guard input.0 + top + bottom >= effective.0, input.1 + left + right >= effective.1 else {
                throw bad("a \(input.0)×\(input.1) input is smaller than the \(effective.0)×\(effective.1) window")
            }
            return ((height, width), (top, bottom, left, right))
        case .same(let bottomRightHeavy):
            let height = (input.0 + stride.height - 1) / stride.height
            let width = (input.1 + stride.width - 1) / stride.width
            let totalH = max(0, (height - 1) * stride.height + effective.0 - input.0)
            let totalW = max(0, (width - 1) * stride.width + effective.1 - input.1)
            let top = bottomRightHeavy ? totalH / 2 : totalH - totalH / 2
            let left = bottomRightHeavy ? totalW / 2 : totalW - totalW / 2
            return ((height, width), (top, totalH - top, left, totalW - left))
        case .includeLastPixel(let padH, let padW):
            var height = (input.0 + 2 * padH - effective.0 + stride.height - 1) / stride.height + 1
            var width = (input.1 + 2 * padW - effective.1 + stride.width - 1) / stride.width + 1
            if padH > 0, (height - 1) * stride.height >= input.0 + padH { height -= 1 }
            if padW > 0, (width - 1) * stride.width >= input.1 + padW { width -= 1 }
            let bottom = max(padH, (height - 1) * stride.height + effective.0 - input.0 - padH)
            let right = max(padW, (width - 1) * stride.width + effective.1 - input.1 - padW)
            return ((height, width), (padH, bottom, padW, right))
        }
    }
}

/// A shape read as Core ML's channel-first blob (C, H, W): the last three
/// dimensions, missing ones counting as 1, leading ones folded into C.
func channelsHeightWidth(_ shape: [Int]) -> (Int, Int, Int) {
    let padded = Array(repeating: 1, count: max(0, 3 - shape.count)) + shape
    let tail = Array(padded.suffix(3))
    return (tail[0] * padded.dropLast(3).reduce(1, *), tail[1], tail[2])
}
