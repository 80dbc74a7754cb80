import Foundation
import ModelFeatures

/// Normalizations: layer (any axes), batch, instance, L2 and local response.
/// Means and variances are accumulated in double.
enum NormalizationOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "layer_norm": OperationDefinition(["x", "axes", "gamma", "beta", "epsilon"]) { context throws(RuntimeError) in
            let x = try context.input()
            var axes = Set<Int>()
            for axis in try context.ints("axes") ?? Array(x.shape.indices) { axes.insert(try context.axis(axis, rank: x.rank, key: "axes")) }
            let normalized = x.shape.indices.filter { axes.contains($0) }.map { x.shape[$0] }.reduce(1, *)
            let epsilon = try context.float("epsilon", 1e-5)
            let scale = try parameter(context, "gamma", count: normalized), shift = try parameter(context, "beta", count: normalized)
            // Rows split between threads, each block one single-threaded oneDNN layer norm.
            if x.isFloat, axes == [x.rank - 1], normalized > 0, x.count > 0,
               let kernel = try? RowSplitKernel(rows: x.count / normalized, sourceRow: normalized * 4, destinationRow: normalized * 4,
                                                threads: context.threads, minimumRows: max(1, 16_384 / normalized),
                                                make: { rows throws(RuntimeError) in
                                                    try DNNLKernels.layerNorm(rows: rows, width: normalized, epsilon: epsilon, scale: scale,
                                                                              shift: shift, threads: 1)
                                                }) {
                let out = try context.output(x.shape)
                let from = x.id
                let failure = DNNLKernels.failure(context)
                context.run(reads: [x], writes: [out]) { buffers throws(RuntimeError) in
                    guard kernel.run(buffers.raw(from), buffers.raw(out)) else { throw failure }
                }
                return
            }
            try normalize(context, x, over: axes, epsilon: try context.float("epsilon", 1e-5),
                          scale: try parameter(context, "gamma", count: normalized), shift: try parameter(context, "beta", count: normalized),
                          perInner: true)
        }.withFacts(FactsRules.same()),
        "instance_norm": OperationDefinition(["x", "gamma", "beta", "epsilon"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            try normalize(context, x, over: Set(2..<x.rank), epsilon: try context.float("epsilon", 1e-5),
                          scale: try parameter(context, "gamma", count: x.shape[1]), shift: try parameter(context, "beta", count: x.shape[1]),
                          perInner: false)
        }.withFacts(FactsRules.same()),
        "batch_norm": OperationDefinition(["x", "mean", "variance", "gamma", "beta", "epsilon"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 2 else { throw context.invalid("x has rank \(x.rank); at least 2 is required") }
            let channels = x.shape[1]
            guard let mean = try parameter(context, "mean", count: channels), let variance = try parameter(context, "variance", count: channels) else {
                throw context.invalid("mean and variance are required")
            }
            let epsilon = try context.float("epsilon", 1e-5)
            let gamma = try parameter(context, "gamma", count: channels), beta = try parameter(context, "beta", count: channels)
            let scale = (0..<channels).map { (gamma?[$0] ?? 1) / (variance[$0] + epsilon).squareRoot() }
            let shift = (0..<channels).map { (beta?[$0] ?? 0) - mean[$0] * scale[$0] }
            let out = try context.output(x.shape)
            let inner = x.shape[2...].reduce(1, *), count = x.count, from = x.id
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from), target = buffers.floats(out)
                for index in 0..<count {
                    let c = index / inner % channels
                    target[index] = source[index] * scale[c] + shift[c]
                }
            }
        }.withFacts(FactsRules.same()),
        "l2_norm": OperationDefinition(["x", "epsilon"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let epsilon = Double(try context.float("epsilon", 1e-6))
            let inner = x.shape.suffix(3).reduce(1, *), outer = x.count / max(inner, 1), from = x.id
            let out = try context.output(x.shape)
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from), target = buffers.floats(out)
                for o in 0..<outer {
                    var sum = 0.0
                    for i in 0..<inner { sum += Double(source[o * inner + i]) * Double(source[o * inner + i]) }
                    let inverse = 1 / (sum + epsilon).squareRoot()
                    for i in 0..<inner { target[o * inner + i] = Float(Double(source[o * inner + i]) * inverse) }
                }
            }
        }.withFacts(FactsRules.same()),
        "local_response_norm": OperationDefinition(["x", "size", "alpha", "beta", "k"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
            let size = try context.int("size", 1)
            guard size >= 1 else { throw context.invalid("size \(size) must be positive") }
            let alpha = Double(try context.float("alpha", 1e-4)), beta = Double(try context.float("beta", 0.75)), k = Double(try context.float("k", 1))
            let channels = x.shape[1], inner = x.shape[2...].reduce(1, *), outer = x.shape[0], from = x.id
            let low = (size - 1) / 2, high = size - 1 - low
            let out = try context.output(x.shape)
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from), target = buffers.floats(out)
                for n in 0..<outer {
                    for c in 0..<channels {
                        for i in 0..<inner {
                            var sum = 0.0
                            for j in max(0, c - low)...min(channels - 1, c + high) {
                                let value = Double(source[(n * channels + j) * inner + i])
                                sum += value * value
                            }
                            let index = (n * channels + c) * inner + i
                            target[index] = Float(Double(source[index]) / pow(k + alpha / Double(size) * sum, beta))
                        }
                    }
                }
            }
        }.withFacts(FactsRules.same()),
    ]

    /// A constant parameter of `count` values (a scalar repeats), or `nil` when not given.
    private static func parameter(_ context: OperationContext, _ key: String, count: Int) throws(RuntimeError) -> [Float]? {
        guard let values = try context.constant(key)?.floats else { return nil }
        if values.count == 1 { return Array(repeating: values[0], count: count) }
        guard values.count == count else { throw context.invalid("\(key) has \(values.count) values, expected \(count)") }
        return values
    }

    /// (x − mean) / √(variance + ε) × scale + shift over `axes`; the
    /// parameters are per normalized element (`perInner`) or per channel (axis 1).
    private static func normalize(_ context: OperationContext, _ x: PlanValue, over axes: Set<Int>, epsilon: Float,
                                  scale: [Float]?, shift: [Float]?, perInner: Bool) throws(RuntimeError) {
        let (outer, inner) = ReductionOperations.split(x.shape, reducing: axes)
        let out = try context.output(x.shape)
        let from = x.id, n = inner.count
        let channels = x.rank > 1 ? x.shape[1] : 1
        let outerPerChannel = x.rank > 1 ? outer.count / max(x.shape[0] * channels, 1) : 1
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
            for (o, base) in outer.enumerated() {
                let start = Int(base)
                var sum = 0.0
                for i in 0..<n { sum += Double(source[start + Int(inner[i])]) }
                let mean = sum / Double(max(n, 1))
                var squares = 0.0
                for i in 0..<n {
                    let d = Double(source[start + Int(inner[i])]) - mean
                    squares += d * d
                }
                let inverse = 1 / (squares / Double(max(n, 1)) + Double(epsilon)).squareRoot()
                let channel = (o / max(outerPerChannel, 1)) % channels
                for i in 0..<n {
                    let index = start + Int(inner[i])
                    var value = Float((Double(source[index]) - mean) * inverse)
                    if let scale { value *= perInner ? scale[i] : scale[channel] }
                    if let shift { value += perInner ? shift[i] : shift[channel] }
                    target[index] = value
                }
            }
        }
    }
}
