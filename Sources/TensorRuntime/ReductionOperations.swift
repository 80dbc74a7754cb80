import Foundation
import ModelFeatures

/// Reductions over any set of axes (`reduce_*`), `softmax`, `cumsum`,
/// `topk` and `argsort`. Sums are accumulated in double.
enum ReductionOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = {
        var all: [String: OperationDefinition] = [:]
        for mode in ["sum", "mean", "prod", "max", "min", "l1_norm", "l2_norm", "sum_square", "log_sum", "log_sum_exp"] {
            all["reduce_" + mode] = OperationDefinition(["x", "axes", "keep_dims"], layout: .reducesAxes) { context throws(RuntimeError) in
                try reduce(context, mode: mode)
            }.withFacts(FactsRules.reduction())
        }
        for mode in ["argmax", "argmin"] {
            all["reduce_" + mode] = OperationDefinition(["x", "axis", "keep_dims", "output_dtype"]) { context throws(RuntimeError) in
                try reduce(context, mode: mode)
            }.withFacts { context throws(RuntimeError) in
                let type = ElementType(milName: context.string("output_dtype", "int32")) ?? .int32
                return try FactsRules.reduction(element: type, defaultAxis: -1)(context)
            }
        }
        all["softmax"] = OperationDefinition(["x", "axis"]) { context throws(RuntimeError) in try softmax(context) }
            .withFacts(FactsRules.same())
        all["cumsum"] = OperationDefinition(["x", "axis", "exclusive", "reverse"]) { context throws(RuntimeError) in try cumsum(context) }
            .withFacts(FactsRules.same())
        all["topk"] = OperationDefinition(["x", "k", "axis", "ascending", "sort", "return_indices", "output_indices_dtype"]) { context throws(RuntimeError) in
            try sortAlong(context, top: true)
        }.withFacts { context throws(RuntimeError) in
            let x = try context.input()
            var values = x
            if var dims = x.shape {
                let axis = try context.axis(context.int("axis", -1), rank: dims.count)
                dims[axis] = context.has("k") ? context.constant("k").flatMap(\.scalar).map { Int($0) } : 1
                values.shape = dims
            }
            guard context.bool("return_indices", true) else { return [values] }
            return [values, values.with(ElementType(milName: context.string("output_indices_dtype", "int32")) ?? .int32)]
        }
        all["argsort"] = OperationDefinition(["x", "axis", "ascending"]) { context throws(RuntimeError) in try sortAlong(context, top: false) }
            .withFacts(FactsRules.same(element: .int32))
        return all
    }()

    /// Offsets into a tensor of `shape` for every index of the kept axes
    /// (outer, row-major) and of the reduced axes (inner).
    static func split(_ shape: [Int], reducing axes: Set<Int>) -> (outer: [Int32], inner: [Int32]) {
        let strides = Shapes.strides(shape)
        let kept = shape.indices.filter { !axes.contains($0) }, reduced = shape.indices.filter { axes.contains($0) }
        // The offsets of every index over `list`'s axes, in row-major order, a run of the last axis at a
        // time (a decoder's every step plans its norms and softmax anew, and a closure per element was a
        // tenth of that planning).
        func table(_ list: [Int]) -> [Int32] {
            let sizes = list.map { shape[$0] }, steps = list.map { strides[$0] }
            var result = [Int32]()
            result.reserveCapacity(sizes.reduce(1, *))
            let last = steps.last ?? 0
            Shapes.walk(sizes, [steps]) { _, offsets, run in
                for i in 0..<run { result.append(Int32(offsets[0] + i * last)) }
            }
            return result
        }
        return (table(kept), table(reduced))
    }

    private static func reduce(_ context: OperationContext, mode: String) throws(RuntimeError) {
        let x = try context.input()
        let keep = try context.bool("keep_dims", false)
        var axes = Set<Int>()
        if mode == "argmax" || mode == "argmin" {
            axes.insert(try context.axis(try context.int("axis", -1), rank: x.rank))
        } else if let given = try context.ints("axes") {
            for axis in given { axes.insert(try context.axis(axis, rank: x.rank, key: "axes")) }
        } else {
            axes = Set(x.shape.indices)
        }
        let shape = keep ? x.shape.indices.map { axes.contains($0) ? 1 : x.shape[$0] } : x.shape.indices.filter { !axes.contains($0) }.map { x.shape[$0] }
        let (outer, inner) = split(x.shape, reducing: axes)
        let out = try context.output(shape)
        let from = x.id, isFloat = x.isFloat, outFloat = context.outputType().isFloat
        let n = inner.count
        // The accumulation, decided once (not per element).
        let square = mode == "l2_norm" || mode == "sum_square", absolute = mode == "l1_norm"
        let contiguous = inner.enumerated().allSatisfy { Int($1) == $0 }
        // The mode, read once (a string switch per output value was 4 % of a small ShuffleNet's time).
        let kind: ReductionKind = switch mode {
        case "argmax": .argmax
        case "argmin": .argmin
        case "max": .max
        case "min": .min
        case "prod": .product
        case "log_sum_exp": .logSumExp
        default: .sum
        }
        let finish: ReductionFinish = switch mode {
        case "mean": .mean
        case "l2_norm": .squareRoot
        case "log_sum": .logarithm
        default: .none
        }
        context.run(reads: [x], writes: [out]) { buffers in
            @inline(__always) func load(_ index: Int) -> Double {
                isFloat ? Double(buffers.floats(from)[index]) : Double(buffers.ints(from)[index])
            }
            for (o, base) in outer.enumerated() {
                let start = Int(base)
                var result: Double
                switch kind {
                case .argmax, .argmin:
                    var best = 0, bestValue = load(start + Int(inner[0]))
                    for i in 1..<max(n, 1) where n > 1 {
                        let value = load(start + Int(inner[i]))
                        if kind == .argmax ? value > bestValue : value < bestValue { best = i; bestValue = value }
                    }
                    result = Double(best)
                case .max:
                    result = -.infinity
                    for i in 0..<n { result = max(result, load(start + Int(inner[i]))) }
                case .min:
                    result = .infinity
                    for i in 0..<n { result = min(result, load(start + Int(inner[i]))) }
                case .product:
                    result = 1
                    for i in 0..<n { result *= load(start + Int(inner[i])) }
                case .logSumExp:
                    var largest = -Double.infinity
                    for i in 0..<n { largest = max(largest, load(start + Int(inner[i]))) }
                    var sum = 0.0
                    for i in 0..<n { sum += Foundation.exp(load(start + Int(inner[i])) - largest) }
                    result = largest + Foundation.log(sum)
                case .sum:
                    var sum = 0.0
                    if contiguous, isFloat, !square, !absolute {
                        // A plain sum over consecutive floats (a spatial mean): no index table.
                        let source = buffers.floats(from) + start
                        for i in 0..<n { sum += Double(source[i]) }
                    } else {
                        for i in 0..<n {
                            let value = load(start + Int(inner[i]))
                            sum += absolute ? abs(value) : (square ? value * value : value)
                        }
                    }
                    switch finish {
                    case .mean: result = sum / Double(max(n, 1))
                    case .squareRoot: result = sum.squareRoot()
                    case .logarithm: result = Foundation.log(sum)
                    case .none: result = sum
                    }
                }
                if outFloat { buffers.floats(out)[o] = Float(result) } else { buffers.ints(out)[o] = Int32(clamping: Int64(result.isFinite ? result : 0)) }
            }
        }
    }

    private static func softmax(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        let axis = try context.axis(try context.int("axis", -1), rank: x.rank)
        let out = try context.output(x.shape)
        // Along the last axis: rows split between threads (BERT's and GPT-2's attention when not fused).
        if x.isFloat, x.rank >= 1, axis == x.rank - 1, x.count > 0, let width = x.shape.last,
           let kernel = try? RowSplitKernel(rows: x.count / width, sourceRow: width * 4, destinationRow: width * 4, threads: context.threads,
                                            minimumRows: max(1, 16_384 / width),
                                            make: { rows throws(RuntimeError) in try DNNLKernels.softmax(shape: [rows, width], axis: 1, threads: 1) }) {
            let from = x.id
            let failure = DNNLKernels.failure(context)
            context.run(reads: [x], writes: [out]) { buffers throws(RuntimeError) in
                guard kernel.run(buffers.raw(from), buffers.raw(out)) else { throw failure }
            }
            return
        }
        if x.isFloat, x.rank >= 1, let kernel = try? DNNLKernels.softmax(shape: x.shape, axis: axis, threads: 1) {
            let from = x.id
            let failure = DNNLKernels.failure(context)
            context.run(reads: [x], writes: [out]) { buffers throws(RuntimeError) in
                guard kernel.run(buffers.raw(from), buffers.raw(out)) else { throw failure }
            }
            return
        }
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        let from = x.id
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
            for o in 0..<outer {
                for i in 0..<inner {
                    let base = o * n * inner + i
                    var largest = -Float.infinity
                    for j in 0..<n { largest = max(largest, source[base + j * inner]) }
                    var sum = 0.0
                    for j in 0..<n {
                        let value = exp(source[base + j * inner] - largest)
                        target[base + j * inner] = value
                        sum += Double(value)
                    }
                    let inverse = Float(1 / sum)
                    for j in 0..<n { target[base + j * inner] *= inverse }
                }
            }
        }
    }

    private static func cumsum(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        let axis = try context.axis(try context.int("axis", 0), rank: x.rank)
        let exclusive = try context.bool("exclusive", false), reverse = try context.bool("reverse", false)
        let out = try context.output(x.shape)
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        let from = x.id, isFloat = x.isFloat
        context.run(reads: [x], writes: [out]) { buffers in
            for o in 0..<outer {
                for i in 0..<inner {
                    var sum = 0.0, integer: Int32 = 0
                    for step in 0..<n {
                        let j = reverse ? n - 1 - step : step
                        let index = (o * n + j) * inner + i
                        if isFloat {
                            let value = Double(buffers.floats(from)[index])
                            if exclusive { buffers.floats(out)[index] = Float(sum); sum += value } else { sum += value; buffers.floats(out)[index] = Float(sum) }
                        } else {
                            let value = buffers.ints(from)[index]
                            if exclusive { buffers.ints(out)[index] = integer; integer &+= value } else { integer &+= value; buffers.ints(out)[index] = integer }
                        }
                    }
                }
            }
        }
    }

    /// `topk` (values and indices of the k first along an axis) and `argsort`.
    /// Equal values keep their order (a stable sort).
    private static func sortAlong(_ context: OperationContext, top: Bool) throws(RuntimeError) {
        let x = try context.input()
        let axis = try context.axis(try context.int("axis", -1), rank: x.rank)
        let ascending = try context.bool("ascending", false)
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        var count = n
        if top {
            count = try context.int("k", 1)
            if count < 0 { count += n }
            guard count >= 0, count <= n else { throw context.invalid("k \(count) for an axis of size \(n)") }
            // sort = false allows any order; the sorted one is among them.
            _ = try context.bool("sort", true)
        }
        var shape = x.shape
        shape[axis] = count
        let valuesOut: Int? = top ? try context.output(shape) : nil
        let returnIndices = top ? try context.bool("return_indices", true) : true
        let indicesOut: Int? = returnIndices && context.op.outputs.count > (top ? 1 : 0) ? try context.output(shape, type: .int32) : nil
        let from = x.id, isFloat = x.isFloat, k = count
        context.run(reads: [x], writes: [valuesOut, indicesOut].compactMap { $0 }) { buffers in
            var order = [Int](repeating: 0, count: n)
            var keys = [Double](repeating: 0, count: n)
            for o in 0..<outer {
                for i in 0..<inner {
                    for j in 0..<n {
                        let index = (o * n + j) * inner + i
                        keys[j] = isFloat ? Double(buffers.floats(from)[index]) : Double(buffers.ints(from)[index])
                        order[j] = j
                    }
                    order.sort { a, b in
                        if keys[a] == keys[b] { return a < b }
                        return ascending ? keys[a] < keys[b] : keys[a] > keys[b]
                    }
                    for j in 0..<k {
                        let target = (o * k + j) * inner + i
                        let source = (o * n + order[j]) * inner + i
                        if let valuesOut { buffers.ints(valuesOut)[target] = buffers.ints(from)[source] }
                        if let indicesOut { buffers.ints(indicesOut)[target] = Int32(order[j]) }
                    }
                }
            }
        }
    }
}

/// What a reduction computes over its values, decided when it is planned.
private enum ReductionKind {
    case argmax, argmin, max, min, product, logSumExp
    /// A sum (of values, absolute values or squares), then `ReductionFinish`.
    case sum
}

/// What a summing reduction does with its sum.
private enum ReductionFinish {
    case mean, squareRoot, logarithm, none
}
