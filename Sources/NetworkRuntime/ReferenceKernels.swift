import COpenBLAS
import Foundation

/// The kernels that run outside XNNPACK: small loops over channel-first
/// float buffers, and matrix products on OpenBLAS.
enum ReferenceKernels {
    static func run(_ kind: StepKind, inputs: [UnsafeBufferPointer<Float>], output: UnsafeMutableBufferPointer<Float>) {
        switch kind {
        case .channelAffine(let scale, let shift, let channels, let plane, let channelsLast):
            let x = inputs[0]
            if channelsLast {
                for p in 0..<plane { for c in 0..<channels { output[p * channels + c] = x[p * channels + c] * scale[c] + shift[c] } }
            } else {
                for c in 0..<channels {
                    let s = scale[c], b = shift[c]
                    for p in 0..<plane { output[c * plane + p] = x[c * plane + p] * s + b }
                }
            }
        case .activation(let activation, let channels, let plane, let channelsLast):
            activate(activation, inputs[0], output, channels: channels, plane: plane, channelsLast: channelsLast)
        case .layoutChange(let toChannelsLast, let channels, let plane):
            guard let source = inputs[0].baseAddress, let target = output.baseAddress else { return }
            if toChannelsLast {
                Layout.chwToHWC(source, target, channels: channels, pixels: plane)
            } else {
                Layout.hwcToCHW(source, target, channels: channels, pixels: plane)
            }
        case .pooling(let pooling):
            pool(pooling, inputs[0], output)
        case .softmax(let outer, let axis, let inner):
            let x = inputs[0]
            for o in 0..<outer {
                for i in 0..<inner {
                    let base = o * axis * inner + i
                    var largest = -Float.infinity
                    for a in 0..<axis { largest = max(largest, x[base + a * inner]) }
                    var sum: Float = 0
                    for a in 0..<axis {
                        let e = expf(x[base + a * inner] - largest)
                        output[base + a * inner] = e
                        sum += e
                    }
                    for a in 0..<axis { output[base + a * inner] /= sum }
                }
            }
        case .copy(let count):
            guard let source = inputs[0].baseAddress, let target = output.baseAddress else { return }
            target.update(from: source, count: count)
        case .flattenChannelLast(let channels, let plane):
            let x = inputs[0]
            for c in 0..<channels { for p in 0..<plane { output[p * channels + c] = x[c * plane + p] } }
        case .elementwise(let operation, let alpha, let shapes, let outputShape):
            elementwise(operation, alpha: alpha, inputs: inputs, shapes: shapes, output: output, outputShape: outputShape)
        case .concat(let parts, let outer, let inner):
            let total = parts.reduce(0, +)
            for o in 0..<outer {
                var offset = 0
                for (part, channels) in parts.enumerated() {
                    let source = inputs[part]
                    for index in 0..<(channels * inner) {
                        output[(o * total + offset) * inner + index] = source[o * channels * inner + index]
                    }
                    offset += channels
                }
            }
        case .matmul(let batch, let m, let k, let n, let transposeA, let transposeB, let weights, let bias, let aMatrices, let bMatrices):
            guard let a = inputs[0].baseAddress, let c = output.baseAddress else { return }
            for index in 0..<batch {
                let aBatch = a + aMatrices[index] * m * k
                let cBatch = c + index * m * n
                if let weights {
                    weights.withUnsafeBufferPointer { w in
                        if let base = w.baseAddress { BLAS.gemm(aBatch, transposeA: transposeA, base, transposeB: transposeB, cBatch, m: m, n: n, k: k) }
                    }
                } else if let b = inputs[1].baseAddress {
                    BLAS.gemm(aBatch, transposeA: transposeA, b + bMatrices[index] * k * n, transposeB: transposeB, cBatch, m: m, n: n, k: k)
                }
                if let bias {
                    for row in 0..<m { for column in 0..<n { cBatch[row * n + column] += bias[column] } }
                }
            }
        case .convolution, .fullyConnected:
            break
        default:
            MoreKernels.run(kind, inputs: inputs, output: output)
        }
    }

    private static func activate(_ activation: LayerOperation.Activation, _ x: UnsafeBufferPointer<Float>,
                                 _ y: UnsafeMutableBufferPointer<Float>, channels: Int, plane: Int, channelsLast: Bool) {
        let count = min(x.count, y.count, channels * plane)
        func each(_ f: (Float) -> Float) { for index in 0..<count { y[index] = f(x[index]) } }
        func perChannel(_ f: (Float, Int) -> Float) {
            for index in 0..<count { y[index] = f(x[index], channelsLast ? index % max(channels, 1) : (plane > 0 ? index / plane : 0)) }
        }
        switch activation {
        case .linear(let alpha, let beta): each { alpha * $0 + beta }
        case .relu: each { max($0, 0) }
        case .leakyRelu(let alpha): each { $0 >= 0 ? $0 : alpha * $0 }
        case .thresholdedRelu(let alpha): each { $0 >= alpha ? $0 : 0 }
        case .prelu(let alpha): perChannel { value, c in value >= 0 ? value : alpha[alpha.count == 1 ? 0 : c] * value }
        case .tanh: each { tanhf($0) }
        case .scaledTanh(let alpha, let beta): each { alpha * tanhf(beta * $0) }
        case .sigmoid: each { 1 / (1 + expf(-$0)) }
        case .sigmoidHard(let alpha, let beta): each { min(max(alpha * $0 + beta, 0), 1) }
        case .elu(let alpha): each { $0 >= 0 ? $0 : alpha * (expf($0) - 1) }
        case .softsign: each { $0 / (1 + abs($0)) }
        case .softplus: each { log1pf(expf(-abs($0))) + max($0, 0) }
        case .parametricSoftplus(let alpha, let beta):
            perChannel { value, c in
                let a = alpha.isEmpty ? 1 : alpha[alpha.count == 1 ? 0 : c]
                let b = beta.isEmpty ? 1 : beta[beta.count == 1 ? 0 : c]
                let z = b * value
                return a * (log1pf(expf(-abs(z))) + max(z, 0))
            }
        case .clip(let low, let high): each { min(max($0, low), high) }
        case .gelu(.exact): each { 0.5 * $0 * (1 + erff($0 * 0.70710678)) }
        case .gelu(.tanh): each { 0.5 * $0 * (1 + tanhf(0.7978845608 * ($0 + 0.044715 * $0 * $0 * $0))) }
        case .gelu(.sigmoid): each { $0 / (1 + expf(-1.702 * $0)) }
        case .silu: each { $0 / (1 + expf(-$0)) }
        }
    }

    private static func pool(_ p: StepKind.Pooling, _ x: UnsafeBufferPointer<Float>, _ y: UnsafeMutableBufferPointer<Float>) {
        let (inH, inW) = p.input
        let (outH, outW) = p.output
        if p.channelsLast {
            poolChannelsLast(p, x, y)
            return
        }
        for c in 0..<p.channels {
            let plane = c * inH * inW
            for oy in 0..<outH {
                for ox in 0..<outW {
                    let y0 = oy * p.stride.0 - p.padTop, x0 = ox * p.stride.1 - p.padLeft
                    var accumulator: Float = p.kind == .max ? -.infinity : 0
                    var valid = 0
                    for ky in 0..<p.kernel.0 {
                        let iy = y0 + ky
                        guard iy >= 0, iy < inH else { continue }
                        for kx in 0..<p.kernel.1 {
                            let ix = x0 + kx
                            guard ix >= 0, ix < inW else { continue }
                            let value = x[plane + iy * inW + ix]
                            switch p.kind {
                            case .max: accumulator = max(accumulator, value)
                            case .average: accumulator += value
                            case .l2: accumulator += value * value
                            }
                            valid += 1
                        }
                    }
                    let windowSize = p.excludePadding ? max(valid, 1) : p.kernel.0 * p.kernel.1
                    let result: Float = switch p.kind {
                    case .max: valid > 0 ? accumulator : 0
                    case .average: accumulator / Float(windowSize)
                    case .l2: accumulator.squareRoot()
                    }
                    y[(c * outH + oy) * outW + ox] = result
                }
            }
        }
    }

    /// Pooling over [H, W, C]: each window accumulates all channels at once.
    private static func poolChannelsLast(_ p: StepKind.Pooling, _ x: UnsafeBufferPointer<Float>, _ y: UnsafeMutableBufferPointer<Float>) {
        let (inH, inW) = p.input
        let (outH, outW) = p.output
        let channels = p.channels
        var accumulator = [Float](repeating: 0, count: channels)
        for oy in 0..<outH {
            for ox in 0..<outW {
                let y0 = oy * p.stride.0 - p.padTop, x0 = ox * p.stride.1 - p.padLeft
                for c in 0..<channels { accumulator[c] = p.kind == .max ? -.infinity : 0 }
                var valid = 0
                for ky in 0..<p.kernel.0 {
                    let iy = y0 + ky
                    guard iy >= 0, iy < inH else { continue }
                    for kx in 0..<p.kernel.1 {
                        let ix = x0 + kx
                        guard ix >= 0, ix < inW else { continue }
                        let base = (iy * inW + ix) * channels
                        switch p.kind {
                        case .max: for c in 0..<channels { accumulator[c] = max(accumulator[c], x[base + c]) }
                        case .average: for c in 0..<channels { accumulator[c] += x[base + c] }
                        case .l2: for c in 0..<channels { accumulator[c] += x[base + c] * x[base + c] }
                        }
                        valid += 1
                    }
                }
                let divisor = Float(p.excludePadding ? max(valid, 1) : p.kernel.0 * p.kernel.1)
                let target = (oy * outW + ox) * channels
                for c in 0..<channels {
                    y[target + c] = switch p.kind {
                    case .max: valid > 0 ? accumulator[c] : 0
                    case .average: accumulator[c] / divisor
                    case .l2: accumulator[c].squareRoot()
                    }
                }
            }
        }
    }

    private static func elementwise(_ operation: StepKind.Elementwise, alpha: Float?, inputs: [UnsafeBufferPointer<Float>],
                                     shapes: [[Int]], output: UnsafeMutableBufferPointer<Float>, outputShape: [Int]) {
        let count = outputShape.reduce(1, *)
        if let alpha, inputs.count == 1 {
            for index in 0..<count {
                output[index] = operation == .add ? inputs[0][index] + alpha : inputs[0][index] * alpha
            }
            return
        }
        if inputs.count == 2, shapes.allSatisfy({ $0.reduce(1, *) == count }) {
            let a = inputs[0], b = inputs[1]
            switch operation {
            case .add: for index in 0..<count { output[index] = a[index] + b[index] }
            case .multiply: for index in 0..<count { output[index] = a[index] * b[index] }
            case .subtract: for index in 0..<count { output[index] = a[index] - b[index] }
            case .divide: for index in 0..<count { output[index] = a[index] / b[index] }
            case .maximum: for index in 0..<count { output[index] = max(a[index], b[index]) }
            case .minimum: for index in 0..<count { output[index] = min(a[index], b[index]) }
            case .average: for index in 0..<count { output[index] = (a[index] + b[index]) / 2 }
            case .power: for index in 0..<count { output[index] = powf(a[index], b[index]) }
            }
            return
        }
        // Strides of each input within the output's index space (0 where broadcast).
        let rank = outputShape.count
        let strides: [[Int]] = shapes.map { shape in
            let padded = Array(repeating: 1, count: rank - shape.count) + shape
            var strides = [Int](repeating: 0, count: rank)
            var stride = 1
            for axis in (0..<rank).reversed() {
                strides[axis] = padded[axis] == 1 ? 0 : stride
                stride *= padded[axis]
            }
            return strides
        }
        let sameShape = shapes.allSatisfy { $0.reduce(1, *) == count }
        var index = [Int](repeating: 0, count: rank)
        for position in 0..<count {
            var result: Float = 0
            for (which, input) in inputs.enumerated() {
                var offset = position
                if !sameShape {
                    offset = 0
                    for axis in 0..<rank { offset += index[axis] * strides[which][axis] }
                }
                let value = input[offset]
                if which == 0 { result = value; continue }
                switch operation {
                case .add, .average: result += value
                case .multiply: result *= value
                case .maximum: result = max(result, value)
                case .minimum: result = min(result, value)
                case .subtract: result -= value
                case .divide: result /= value
                case .power: result = powf(result, value)
                }
            }
            output[position] = operation == .average ? result / Float(inputs.count) : result
            if !sameShape {
                var axis = rank - 1
                while axis >= 0 {
                    index[axis] += 1
                    if index[axis] < outputShape[axis] { break }
                    index[axis] = 0
                    axis -= 1
                }
            }
        }
    }
}
