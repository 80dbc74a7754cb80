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
    private func chw(_ shape: [Int]) -> (Int, Int, Int) {
        let padded = Array(repeating: 1, count: max(0, 3 - shape.count)) + shape
        let tail = padded.suffix(3)
        let leading = padded.dropLast(3).reduce(1, *)
        return (tail[tail.startIndex] * leading, tail[tail.startIndex + 1], tail[tail.startIndex + 2])
    }

    /// One step and output shape per output of the layer.
    func steps() throws(RuntimeError) -> [(StepKind, [Int])] {
        if case .loadConstant(let shape, let values) = node.operation {
            return [(.constant(values), shape)]
        }
        guard !inputs.isEmpty else { throw bad("no inputs") }
        if case .split(let parts) = node.operation {
            let (channels, height, width) = chw(first)
            guard parts > 0, channels % parts == 0 else { throw bad("\(channels) channels do not split into \(parts) equal parts") }
            let each = channels / parts
            return (0..<parts).map { part in
                (.gather(indices: Gathers.channelRange(from: part * each, count: each, plane: height * width), constant: 0),
                 [each, height, width])
            }
        }
        if let more = try moreSteps() { return [more] }
        return [try step()]
    }

    func step() throws(RuntimeError) -> (StepKind, [Int]) {
        switch node.operation {
        case .convolution(let conv):
            let (channels, height, width) = chw(first)
            guard channels == conv.kernelChannels * conv.groups else {
                throw bad("input has \(channels) channels, the weights expect \(conv.kernelChannels * conv.groups)")
            }
            let (out, padding) = try Self.window(input: (height, width), kernel: conv.kernel, stride: conv.stride,
                                                 dilation: conv.dilation, padding: conv.padding, layer: bad)
            // Core ML's [out, in/groups, kH, kW] to XNNPACK's [out, kH, kW, in/groups].
            var packed = [Float](repeating: 0, count: conv.weights.count)
            let kh = conv.kernel.height, kw = conv.kernel.width, kc = conv.kernelChannels
            for o in 0..<conv.outputChannels {
                for i in 0..<kc {
                    for y in 0..<kh {
                        for x in 0..<kw {
                            packed[((o * kh + y) * kw + x) * kc + i] = conv.weights[((o * kc + i) * kh + y) * kw + x]
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
            let count = first.reduce(1, *)
            if first.count > 1, first.last == inputsCount, count != inputsCount {
                // Rank-N: applied to the last dimension of every row.
                let rows = count / inputsCount
                return (.fullyConnected(inputs: inputsCount, outputs: outputs, rows: rows, weights: weights, bias: bias,
                                        outputRange: (-.infinity, .infinity)), Array(first.dropLast()) + [outputs])
            }
            guard count == inputsCount else { throw bad("input has \(count) values, the weights expect \(inputsCount)") }
            return (.fullyConnected(inputs: inputsCount, outputs: outputs, rows: 1, weights: weights, bias: bias,
                                    outputRange: (-.infinity, .infinity)), first.count == 3 ? [outputs, 1, 1] : [outputs])

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
            return (channelLast && height * width > 1 ? .flattenChannelLast(channels: channels, plane: height * width) : .copy, shape)

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
            guard a.count >= 2 || (a.count == 1 && weights != nil) else { throw bad("input of rank \(a.count)") }
            let aMatrix = a.count == 1 ? [1, a[0]] : a
            let m = transposeA ? aMatrix[aMatrix.count - 1] : aMatrix[aMatrix.count - 2]
            let k = transposeA ? aMatrix[aMatrix.count - 2] : aMatrix[aMatrix.count - 1]
            let batchA = aMatrix.dropLast(2).reduce(1, *)
            if let weights {
                guard k == first else { throw bad("input's inner dimension is \(k), the weights' first is \(first)") }
                let output = Array(a.dropLast()) + [second]
                return (.matmul(batch: batchA, m: m, k: k, n: second, transposeA: transposeA, transposeB: false,
                                weights: weights, bias: bias, batchA: batchA, batchB: 1), output)
            }
            guard inputs.count == 2, inputs[1].count >= 2 else { throw bad("needs two inputs of rank ≥ 2 or weights") }
            let b = inputs[1]
            let kB = transposeB ? b[b.count - 1] : b[b.count - 2]
            let n = transposeB ? b[b.count - 2] : b[b.count - 1]
            guard kB == k else { throw bad("inner dimensions \(k) and \(kB) differ") }
            let batchB = b.dropLast(2).reduce(1, *)
            guard batchA == batchB || batchA == 1 || batchB == 1 else { throw bad("batch dimensions \(a.dropLast(2)) and \(b.dropLast(2)) do not broadcast") }
            let batchShape = batchA >= batchB ? Array(aMatrix.dropLast(2)) : Array(b.dropLast(2))
            return (.matmul(batch: max(batchA, batchB), m: m, k: k, n: n, transposeA: transposeA, transposeB: transposeB,
                            weights: nil, bias: nil, batchA: batchA, batchB: batchB), batchShape + [m, n])
        default:
            throw bad("no shape rule")
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
            return (.gather(indices: indices, constant: constant), [channels, outH, outW])
        case .upsample(let factorH, let factorW, let bilinear, let alignCorners):
            let outH = height * factorH, outW = width * factorW
            if bilinear {
                return (.upsampleBilinear(channels: channels, input: (height, width), output: (outH, outW), alignCorners: alignCorners),
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
            for (shape, role) in [(scaleShape, "scale"), (biasShape, "bias")] where !shape.isEmpty && shape != [1] && shape != [channels] && shape != [channels, 1, 1] && shape != [channels, height, width] && shape.reduce(1, *) != 1 {
                throw bad("\(role) of shape \(shape) does not apply to a \(channels)×\(height)×\(width) input")
            }
            return (.scaleBias(scale: scale, scaleCount: scale?.count ?? 0, bias: bias, biasCount: bias?.count ?? 0,
                               channels: channels, plane: plane), first)
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
            return (.embedding(inputDim: inputDim, outputs: outputs, rows: first.reduce(1, *), weights: weights, bias: bias),
                    first.count <= 1 || first.reduce(1, *) == 1 ? [outputs, 1, 1] : [first.reduce(1, *), outputs, 1, 1])
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
            return (.copy, target)
        case .squeeze(let axes, let all):
            let rank = first.count
            let resolved = Set(axes.map { $0 < 0 ? $0 + rank : $0 })
            var shape = first.enumerated().filter { all ? $0.element != 1 : !resolved.contains($0.offset) }.map(\.element)
            if shape.isEmpty { shape = [1] }
            return (.copy, shape)
        case .expandDims(let axes):
            let rank = first.count + axes.count
            let resolved = Set(axes.map { $0 < 0 ? $0 + rank : $0 })
            var source = first.makeIterator()
            return (.copy, (0..<rank).map { resolved.contains($0) ? 1 : (source.next() ?? 1) })
        case .reshapeStatic(let shape):
            guard shape.reduce(1, *) == first.reduce(1, *) else { throw bad("cannot reshape \(first) into \(shape)") }
            return (.copy, shape)
        case .flattenTo2D(let axis):
            let resolved = axis < 0 ? axis + first.count : axis
            return (.copy, [first.prefix(resolved).reduce(1, *), first.dropFirst(resolved).reduce(1, *)])
        case .transpose(let axes):
            guard axes.count == first.count, Set(axes) == Set(0..<first.count) else { throw bad("axes \(axes) do not permute rank \(first.count)") }
            return (.gather(indices: Gathers.transpose(first, axes), constant: 0), axes.map { first[$0] })
        case .concatND(let axis):
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
            return (.concat(parts: inputs.map { $0[resolved] }, outer: first.prefix(resolved).reduce(1, *),
                            inner: first.dropFirst(resolved + 1).reduce(1, *)), output)
        default:
            return nil
        }
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
