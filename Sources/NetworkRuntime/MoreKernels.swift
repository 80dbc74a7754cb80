import Foundation

/// Kernels of the less common layers: gathers, bilinear upsampling,
/// normalizations, reductions, embeddings.
enum MoreKernels {
    static func run(_ kind: StepKind, inputs: [UnsafeBufferPointer<Float>], output: UnsafeMutableBufferPointer<Float>) {
        switch kind {
        case .gather(let indices, let constant):
            let x = inputs[0]
            for (position, index) in indices.enumerated() { output[position] = index >= 0 ? x[Int(index)] : constant }
        case .upsampleBilinear(let channels, let input, let out, let mode):
            bilinear(inputs[0], output, channels: channels, input: input, output: out, mode: mode)
        case .scaleBias(let scale, let scaleShape, let bias, let biasShape, let shape):
            let x = inputs[0]
            let (channels, height, width) = (shape[0], shape[1], shape[2])
            func pick(_ values: [Float], _ s: [Int], _ c: Int, _ y: Int, _ w: Int) -> Float {
                values[((s[0] == 1 ? 0 : c) * s[1] + (s[1] == 1 ? 0 : y)) * s[2] + (s[2] == 1 ? 0 : w)]
            }
            var index = 0
            for c in 0..<channels {
                for y in 0..<height {
                    for w in 0..<width {
                        var value = x[index]
                        if let scale { value *= pick(scale, scaleShape, c, y, w) }
                        if let bias { value += pick(bias, biasShape, c, y, w) }
                        output[index] = value
                        index += 1
                    }
                }
            }
        case .unary(let operation, let scale, let shift, let epsilon):
            let x = inputs[0]
            for index in 0..<min(x.count, output.count) {
                let v = scale * x[index] + shift
                output[index] = switch operation {
                case .sqrt: v.squareRoot()
                case .rsqrt: 1 / (v + epsilon).squareRoot()
                case .inverse: 1 / (v + epsilon)
                case .power(let alpha): powf(v, alpha)
                case .exp: expf(v)
                case .log: logf(v + epsilon)
                case .abs: Swift.abs(v)
                case .threshold(let alpha): max(v, alpha)
                }
            }
        case .l2Normalize(let epsilon, let count):
            let x = inputs[0]
            var sum: Float = 0
            for index in 0..<count { sum += x[index] * x[index] }
            // NeuralNetwork.proto: x / sqrt(Σx² + ε).
            let norm = (sum + epsilon).squareRoot()
            for index in 0..<count { output[index] = x[index] / norm }
        case .lrn(let alpha, let beta, let size, let k, let channels, let plane):
            let x = inputs[0]
            let half = (size - 1) / 2
            for c in 0..<channels {
                for p in 0..<plane {
                    var sum: Float = 0
                    for other in max(0, c - half)...min(channels - 1, c + size - 1 - half) {
                        let value = x[other * plane + p]
                        sum += value * value
                    }
                    output[c * plane + p] = x[c * plane + p] / powf(k + alpha / Float(size) * sum, beta)
                }
            }
        case .meanVarianceNormalize(let across, let normalizeVariance, let epsilon, let channels, let plane):
            let x = inputs[0]
            let groups = across ? 1 : channels
            let size = across ? channels * plane : plane
            for group in 0..<groups {
                let base = group * size
                let (mean, variance) = meanAndVariance(x, from: base, count: size)
                let divisor = normalizeVariance ? (variance + epsilon).squareRoot() : 1
                for index in 0..<size { output[base + index] = (x[base + index] - mean) / divisor }
            }
        case .reduce(let mode, let outer, let axis, let inner, let epsilon):
            reduce(inputs[0], output, mode: mode, outer: outer, axis: axis, inner: inner, epsilon: epsilon)
        case .embedding(let inputDim, let outputs, let rows, let weights, let bias):
            let x = inputs[0]
            for row in 0..<rows {
                let index = Int(x[row])
                for o in 0..<outputs {
                    let value = index >= 0 && index < inputDim ? weights[o * inputDim + index] : 0
                    output[row * outputs + o] = value + (bias?[o] ?? 0)
                }
            }
        case .constant(let values):
            for index in 0..<min(values.count, output.count) { output[index] = values[index] }
        case .dot(let cosine, let count):
            let a = inputs[0], b = inputs[1]
            var product: Float = 0, normA: Float = 0, normB: Float = 0
            for index in 0..<count {
                product += a[index] * b[index]
                normA += a[index] * a[index]
                normB += b[index] * b[index]
            }
            output[0] = cosine ? product / max((normA * normB).squareRoot(), 1e-12) : product
        case .layerNorm(let rows, let size, let gamma, let beta, let epsilon):
            let x = inputs[0]
            for row in 0..<rows {
                let base = row * size
                let (mean, variance) = meanAndVariance(x, from: base, count: size)
                let divisor = (variance + epsilon).squareRoot()
                for index in 0..<size {
                    var value = (x[base + index] - mean) / divisor
                    if let gamma { value *= gamma[index % gamma.count] }
                    if let beta { value += beta[index % beta.count] }
                    output[base + index] = value
                }
            }
        case .reduceGathered(let mode, let table, let axis):
            let x = inputs[0]
            let gathered = table.map { x[Int($0)] }
            gathered.withUnsafeBufferPointer { values in
                reduce(values, output, mode: mode, outer: table.count / max(axis, 1), axis: axis, inner: 1, epsilon: 0)
            }
        case .instanceNorm(let channels, let plane, let gamma, let beta, let epsilon):
            let x = inputs[0]
            for c in 0..<channels {
                let base = c * plane
                let (mean, variance) = meanAndVariance(x, from: base, count: plane)
                let scale = gamma[c] / (variance + epsilon).squareRoot()
                for index in 0..<plane { output[base + index] = (x[base + index] - mean) * scale + beta[c] }
            }
        case .truncate:
            let x = inputs[0]
            for index in 0..<min(x.count, output.count) { output[index] = x[index].rounded(.towardZero) }
        default:
            break
        }
    }

    /// The mean and population variance of `count` values from `start`.
    private static func meanAndVariance(_ x: UnsafeBufferPointer<Float>, from start: Int, count: Int) -> (Float, Float) {
        var mean: Float = 0
        for index in start..<(start + count) { mean += x[index] }
        mean /= Float(count)
        var variance: Float = 0
        for index in start..<(start + count) { variance += (x[index] - mean) * (x[index] - mean) }
        return (mean, variance / Float(count))
    }

    private static func bilinear(_ x: UnsafeBufferPointer<Float>, _ y: UnsafeMutableBufferPointer<Float>, channels: Int,
                                 input: (Int, Int), output: (Int, Int), mode: LayerOperation.UpsampleMode) {
        let (inH, inW) = input, (outH, outW) = output
        func source(_ position: Int, _ inSize: Int, _ outSize: Int) -> (Int, Int, Float) {
            let coordinate: Float = switch mode {
            case .bilinearAlignCorners: outSize > 1 ? Float(position) * Float(inSize - 1) / Float(outSize - 1) : 0
            case .bilinearHalfPixel: max(0, (Float(position) + 0.5) * Float(inSize) / Float(outSize) - 0.5)
            default: min(Float(position) * Float(inSize) / Float(outSize), Float(inSize - 1))
            }
            let low = min(Int(coordinate), inSize - 1)
            let high = min(low + 1, inSize - 1)
            return (low, high, coordinate - Float(low))
        }
        for c in 0..<channels {
            let plane = c * inH * inW
            for oy in 0..<outH {
                let (y0, y1, fy) = source(oy, inH, outH)
                for ox in 0..<outW {
                    let (x0, x1, fx) = source(ox, inW, outW)
                    let top = x[plane + y0 * inW + x0] * (1 - fx) + x[plane + y0 * inW + x1] * fx
                    let bottom = x[plane + y1 * inW + x0] * (1 - fx) + x[plane + y1 * inW + x1] * fx
                    y[(c * outH + oy) * outW + ox] = top * (1 - fy) + bottom * fy
                }
            }
        }
    }

    private static func reduce(_ x: UnsafeBufferPointer<Float>, _ y: UnsafeMutableBufferPointer<Float>,
                               mode: LayerOperation.ReduceMode, outer: Int, axis: Int, inner: Int, epsilon: Float) {
        for o in 0..<outer {
            for i in 0..<inner {
                var accumulator: Float = switch mode {
                case .product: 1
                case .max, .argmax: -.infinity
                case .min: .infinity
                default: 0
                }
                var best = 0
                for a in 0..<axis {
                    let value = x[(o * axis + a) * inner + i]
                    switch mode {
                    case .sum, .average, .logSum: accumulator += value
                    case .product: accumulator *= value
                    case .sumSquare, .l2: accumulator += value * value
                    case .l1: accumulator += Swift.abs(value)
                    case .max: accumulator = max(accumulator, value)
                    case .min: accumulator = min(accumulator, value)
                    case .argmax: if value > accumulator { accumulator = value; best = a }
                    }
                }
                y[o * inner + i] = switch mode {
                case .average: accumulator / Float(axis)
                case .logSum: logf(accumulator + epsilon)
                case .l2: accumulator.squareRoot()
                case .argmax: Float(best)
                default: accumulator
                }
            }
        }
    }
}
