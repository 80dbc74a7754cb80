import Foundation
import ModelFeatures

/// Convolution (1-, 2- and 3-D, groups, dilations, every pad type) as
/// image-to-column plus OpenBLAS products, and pooling (max, average, L2)
/// with `ceil_mode`.
enum ConvolutionOperations {
    static let definitions: [String: OperationDefinition] = [
        "conv": OperationDefinition(["x", "weight", "bias", "strides", "pad_type", "pad", "dilations", "groups"]) { context throws(RuntimeError) in
            try convolution(context)
        },
        "conv_transpose": OperationDefinition(["x", "weight", "bias", "strides", "pad_type", "pad", "dilations", "groups", "output_shape"]) { context throws(RuntimeError) in
            try transposedConvolution(context)
        },
        "max_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode"]) { context throws(RuntimeError) in
            try pool(context, mode: .max)
        },
        "avg_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode", "exclude_padding_from_average"]) { context throws(RuntimeError) in
            try pool(context, mode: .average)
        },
        "l2_pool": OperationDefinition(["x", "kernel_sizes", "strides", "pad_type", "pad", "ceil_mode"]) { context throws(RuntimeError) in
            try pool(context, mode: .l2)
        },
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

    private static func convolution(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input(), weight = try context.input("weight")
        let spatial = x.rank - 2
        guard spatial >= 1, spatial <= 3, weight.rank == x.rank else {
            throw context.invalid("x \(x.shape) and weight \(weight.shape): 1-, 2- or 3-D convolution needs equal ranks 3 to 5")
        }
        let groups = try context.int("groups", 1)
        let inputs = x.shape[1], outputs = weight.shape[0], perGroup = weight.shape[1]
        guard groups >= 1, inputs == perGroup * groups, outputs % groups == 0 else {
            throw context.invalid("\(inputs) input channels, weight \(weight.shape), \(groups) groups")
        }
        let kernel = Array(weight.shape[2...])
        let strides = try context.ints("strides") ?? Array(repeating: 1, count: spatial)
        let dilations = try context.ints("dilations") ?? Array(repeating: 1, count: spatial)
        guard strides.count == spatial, dilations.count == spatial else { throw context.invalid("strides and dilations need \(spatial) values") }
        let input = Array(x.shape[2...])
        let (before, output) = try geometry(context, input: input, kernel: kernel, strides: strides, dilations: dilations, ceilMode: false)
        let bias = try context.optional("bias")
        if let bias, bias.count != outputs { throw context.invalid("bias has \(bias.count) values for \(outputs) output channels") }
        let out = try context.output([x.shape[0], outputs] + output)
        let batch = x.shape[0], kernelCount = kernel.reduce(1, *), outCount = output.reduce(1, *), inCount = input.reduce(1, *)
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
        _ = LinearAlgebraOperations.singleThreaded
        context.run(reads: [x, weight] + (bias.map { [$0] } ?? []), writes: [out]) { buffers in
            var columns = [Float](repeating: 0, count: pointwise ? 0 : rows * outCount)
            let source = buffers.floats(from), weights = buffers.floats(w), target = buffers.floats(out)
            columns.withUnsafeMutableBufferPointer { pointer in
                for n in 0..<batch {
                    for g in 0..<groups {
                        let image = source + (n * inputs + g * perGroup) * inCount
                        var matrix = UnsafePointer(image)
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
        let spatial = x.rank - 2
        guard spatial >= 1, spatial <= 3 else { throw context.invalid("x has rank \(x.rank); pooling needs 3 to 5") }
        guard let kernel = try context.ints("kernel_sizes"), kernel.count == spatial else { throw context.invalid("kernel_sizes needs \(spatial) values") }
        let strides = try context.ints("strides") ?? Array(repeating: 1, count: spatial)
        let input = Array(x.shape[2...])
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
        let out = try context.output(Array(x.shape.prefix(2)) + output)
        let planes = x.shape[0] * x.shape[1], inCount = input.reduce(1, *), outCount = output.reduce(1, *)
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
        let table = windows, from = x.id
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.floats(from), target = buffers.floats(out)
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
}
