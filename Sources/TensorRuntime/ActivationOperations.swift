import Foundation
import ModelFeatures

/// Activation functions: elementwise with scalar parameters, and the two
/// with a parameter per channel (`prelu`, `softplus_parametric`).
enum ActivationOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = {
        var all: [String: OperationDefinition] = [:]
        func define(_ name: String, _ make: @escaping @Sendable (Float, Float) -> @Sendable (Float) -> Float,
                    alpha: Float = 0, beta: Float = 0) {
            all[name] = OperationDefinition(["x", "alpha", "beta"], layout: .elementwise) { context throws(RuntimeError) in
                let function = make(try context.float("alpha", alpha), try context.float("beta", beta))
                try ElementwiseOperations.unary(context, integer: nil, function)
            }
        }
        define("relu") { _, _ in { max($0, 0) } }
        define("relu6") { _, _ in { min(max($0, 0), 6) } }
        define("sigmoid") { _, _ in { 1 / (1 + exp(-$0)) } }
        all["silu"] = OperationDefinition(["x", "alpha", "beta"], layout: .elementwise) { context throws(RuntimeError) in
            if try vectorized(context, VectorMath.silu) { return }
            try ElementwiseOperations.unary(context, integer: nil) { $0 / (1 + exp(-$0)) }
        }
        define("softplus") { _, _ in { x in x > 20 ? x : log1p(exp(x)) } }
        define("softsign") { _, _ in { $0 / (1 + abs($0)) } }
        define("leaky_relu", { a, _ in { $0 >= 0 ? $0 : a * $0 } }, alpha: 0.01)
        define("elu", { a, _ in { $0 > 0 ? $0 : a * (exp($0) - 1) } }, alpha: 1)
        define("thresholded_relu", { a, _ in { $0 >= a ? $0 : 0 } }, alpha: 1)
        define("clamped_relu", { a, b in { min(b, $0 >= 0 ? $0 : a * $0) } }, alpha: 0, beta: 6)
        define("sigmoid_hard", { a, b in { min(max(a * $0 + b, 0), 1) } }, alpha: 0.2, beta: 0.5)
        define("linear_activation", { a, b in { a * $0 + b } }, alpha: 1, beta: 0)
        define("scaled_tanh", { a, b in { a * tanh(b * $0) } }, alpha: 1, beta: 1)
        all["gelu"] = OperationDefinition(["x", "mode"], layout: .elementwise) { context throws(RuntimeError) in
            let mode = try context.string("mode", "EXACT")
            if mode == "TANH_APPROXIMATION", try vectorized(context, VectorMath.geluTanh) { return }
            if mode == "EXACT", try onDNNL(context, .geluExact) { return }
            let function: @Sendable (Float) -> Float
            switch mode {
            // In Float (libm's erff/tanhf): the Double versions were a quarter of
            // GPT-2's prediction time (docs/measurements/2026-12-01-transformers-onnxruntime.md).
            case "EXACT": function = { x in 0.5 * x * (1 + erf(x * Float(0.5).squareRoot())) }
            case "TANH_APPROXIMATION":
                function = { x in 0.5 * x * (1 + tanh((2 / Float.pi).squareRoot() * (x + 0.044715 * x * x * x))) }
            case "SIGMOID_APPROXIMATION": function = { x in x / (1 + exp(-1.702 * x)) }
            default: throw context.unsupported("gelu mode \(mode) is not one MIL defines")
            }
            try ElementwiseOperations.unary(context, integer: nil, function)
        }
        all["prelu"] = OperationDefinition(["x", "alpha"]) { context throws(RuntimeError) in
            try perChannel(context, parameters: ["alpha"]) { x, p in x >= 0 ? x : p[0] * x }
        }
        all["softplus_parametric"] = OperationDefinition(["x", "alpha", "beta"]) { context throws(RuntimeError) in
            try perChannel(context, parameters: ["alpha", "beta"]) { x, p in p[0] * log1p(exp(p[1] * x)) }
        }
        // Every activation keeps its operand's shape and type.
        return all.mapValues { $0.withFacts(FactsRules.same()) }
    }()

    /// Plans `activation` of a float tensor on oneDNN's vectorised, threaded
    /// kernel; `false` when oneDNN does not take it (the scalar loop runs).
    private static func onDNNL(_ context: OperationContext, _ activation: DNNLKernels.Activation) throws(RuntimeError) -> Bool {
        let x = try context.input()
        // Rows of the last axis split between threads (at least 16 K values each).
        let width = max(1, x.shape.last ?? 1), rows = x.count / width
        guard x.isFloat, context.outputType().isFloat, x.count > 0, rows * width == x.count,
              let kernel = try? RowSplitKernel(rows: rows, sourceRow: width * 4, destinationRow: width * 4, threads: context.threads,
                                               minimumRows: max(1, 16_384 / width),
                                               make: { rows throws(RuntimeError) in try DNNLKernels.eltwise(activation, count: rows * width, threads: 1) })
        else { return false }
        let out = try context.output(x.shape)
        let from = x.id
        let failure = DNNLKernels.failure(context)
        context.run(reads: [x], writes: [out]) { buffers throws(RuntimeError) in
            guard kernel.run(buffers.raw(from), buffers.raw(out)) else { throw failure }
        }
        return true
    }

    /// Plans `function` (one of `VectorMath`'s loops, in place: GELU's tanh
    /// form, whose oneDNN kernel is slow, docs/runtime.md; SiLU) over a float
    /// tensor in blocks of at least `geluBlock` values per thread of the
    /// team; `false` for other types (the scalar loop runs).
    private static func vectorized(_ context: OperationContext,
                                   _ function: @escaping @Sendable (UnsafeMutablePointer<Float>, Int) -> Void) throws(RuntimeError) -> Bool {
        let x = try context.input()
        guard x.isFloat, context.outputType().isFloat, x.count > 0 else { return false }
        let out = try context.output(x.shape)
        let from = x.id, count = x.count
        let workers = max(1, min(context.threads, count / geluBlock))
        context.run(reads: [x], writes: [out], split: workers > 1 ? "\(workers) blocks" : nil) { buffers in
            let pointers = SourceAndTarget(source: buffers.floats(from), target: buffers.floats(out))
            ThreadTeam.shared.perform(workers, threads: workers) { worker in
                let first = worker * count / workers, end = (worker + 1) * count / workers
                if pointers.target != pointers.source { (pointers.target + first).update(from: pointers.source + first, count: end - first) }
                function(pointers.target + first, end - first)
            }
        }
        return true
    }

    /// Values a thread takes at the least in a standalone GELU.
    static let geluBlock = 16_384

    /// f(x, parameters of x's channel) with channels on axis 1 (rank ≥ 3).
    private static func perChannel(_ context: OperationContext, parameters keys: [String],
                                   _ function: @escaping @Sendable (Float, [Float]) -> Float) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank >= 3 else { throw context.invalid("x has rank \(x.rank); at least 3 is required") }
        let channels = x.shape[1]
        var parameters: [[Float]] = []
        for key in keys {
            guard let values = try context.constant(key)?.floats, values.count == channels || values.count == 1 else {
                throw context.invalid("\(key) needs \(channels) values, one per channel")
            }
            parameters.append(values.count == 1 ? Array(repeating: values[0], count: channels) : values)
        }
        let out = try context.output(x.shape)
        let inner = x.shape[2...].reduce(1, *), count = x.count, from = x.id
        let table = (0..<channels).map { c in parameters.map { $0[c] } }
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
            for index in 0..<count { target[index] = function(source[index], table[(index / inner) % channels]) }
        }
    }
}
