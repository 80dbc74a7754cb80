import CoreMLSchema
import Foundation
import ModelFeatures
import ModelSpec

/// Reads the main function of an ML program into the same graph of layer
/// operations that neural networks use: constants and `constexpr_*`
/// decompression are evaluated here, once; every other operation becomes a
/// node, and an operation modelc does not run is refused, naming it.
struct ProgramReader {
    private(set) var nodes: [NetworkNode] = []
    private var constants: [String: ProgramConstant] = [:]
    private var materialized: Set<String> = []
    private var counter = 0
    private let values: ProgramValueReader

    /// A `classify` operation ending the program: where the probabilities are,
    /// the labels, and the two outputs it names.
    struct Classification {
        var probabilities: String
        var labels: ClassLabels
        var labelOutput: String
        var probabilitiesOutput: String
    }
    private(set) var classification: Classification?

    /// The names of the function's inputs, and of the values it returns.
    private(set) var inputs: [String] = []
    private(set) var outputs: [String] = []

    init(program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>, modelDirectory: String?) throws(RuntimeError) {
        values = ProgramValueReader(modelDirectory: modelDirectory)
        let functions = elements(program.pointee.functions, program.pointee.n_functions)
        guard let main = functions.first(where: { text($0.pointee.key) == "main" }) ?? functions.first,
              let function = main.pointee.value?.pointee else {
            throw .invalidParameters(model: "mlProgram", detail: "the program has no main function")
        }
        let opset = text(function.opset)
        let blocks = elements(function.block_specializations, function.n_block_specializations)
        guard let block = (blocks.first { text($0.pointee.key) == opset } ?? blocks.first)?.pointee.value?.pointee else {
            throw .invalidParameters(model: "mlProgram", detail: "function main has no block for opset \(opset)")
        }
        inputs = elements(function.inputs, function.n_inputs).map { text($0.pointee.name) }
        outputs = strings(block.outputs, block.n_outputs)
        for operation in elements(block.operations, block.n_operations) {
            try read(operation.pointee)
        }
        // An output that is a constant still has to be produced.
        for output in outputs where constants[output] != nil { _ = try materialize(output) }
    }

    // MARK: Operands

    private enum Operand {
        case variable(String)
        case constant(ProgramConstant)
    }

    private func arguments(_ op: CoreML__Specification__MILSpec__Operation, _ key: String) -> [CoreML__Specification__MILSpec__Argument__Binding] {
        for entry in elements(op.inputs, op.n_inputs) where text(entry.pointee.key) == key {
            guard let argument = entry.pointee.value?.pointee else { return [] }
            return elements(argument.arguments, argument.n_arguments).map(\.pointee)
        }
        return []
    }

    private func operands(_ op: CoreML__Specification__MILSpec__Operation, _ key: String, owner: String) throws(RuntimeError) -> [Operand] {
        var result: [Operand] = []
        for binding in arguments(op, key) {
            if binding.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME {
                let name = text(binding.name)
                result.append(constants[name].map(Operand.constant) ?? .variable(name))
            } else if let value = binding.value?.pointee {
                result.append(.constant(try values.constant(value, owner: owner)))
            }
        }
        if result.isEmpty {
            // iOS 16 constexpr operations keep their parameters as attributes.
            for entry in elements(op.attributes, op.n_attributes) where text(entry.pointee.key) == key {
                if let value = entry.pointee.value?.pointee { result.append(.constant(try values.constant(value, owner: owner))) }
            }
        }
        return result
    }

    private func operand(_ op: CoreML__Specification__MILSpec__Operation, _ key: String, owner: String) throws(RuntimeError) -> Operand? {
        try operands(op, key, owner: owner).first
    }

    /// A parameter that must be known at load.
    private func constant(_ op: CoreML__Specification__MILSpec__Operation, _ key: String, owner: String, kind: String) throws(RuntimeError) -> ProgramConstant? {
        switch try operand(op, key, owner: owner) {
        case .constant(let value): return value
        case .variable: throw .unsupportedLayer(layer: owner, kind: kind, reason: "\(key) computed at run time is not supported (only constants)")
        case nil: return nil
        }
    }

    /// The name of a value a node reads: a variable, or a constant made into a node.
    private mutating func name(_ operand: Operand?, owner: String, role: String) throws(RuntimeError) -> String {
        switch operand {
        case .variable(let name): return name
        case .constant(let value):
            counter += 1
            let name = "\(owner).\(role).const\(counter)"
            nodes.append(NetworkNode(name: name, kind: "const", inputs: [], outputs: [name],
                                     operation: .loadConstant(shape: value.shape.isEmpty ? [1] : value.shape, values: value.floats)))
            return name
        case nil:
            throw .invalidParameters(model: "operation \"\(owner)\"", detail: "input \(role) is missing")
        }
    }

    private mutating func materialize(_ constantName: String) throws(RuntimeError) -> String {
        guard !materialized.contains(constantName), let value = constants[constantName] else { return constantName }
        materialized.insert(constantName)
        nodes.append(NetworkNode(name: constantName, kind: "const", inputs: [], outputs: [constantName],
                                 operation: .loadConstant(shape: value.shape.isEmpty ? [1] : value.shape, values: value.floats)))
        return constantName
    }

    private mutating func add(_ name: String, _ kind: String, _ inputs: [String], _ outputs: [String], _ operation: LayerOperation) {
        nodes.append(NetworkNode(name: name, kind: kind, inputs: inputs, outputs: outputs, operation: operation))
    }

    /// Adds `operation` reading `input` and writing a fresh intermediate value.
    private mutating func intermediate(_ owner: String, _ kind: String, _ inputs: [String], _ operation: LayerOperation) -> String {
        counter += 1
        let name = "\(owner).step\(counter)"
        add(owner, kind, inputs, [name], operation)
        return name
    }

    // MARK: Operations

    private mutating func read(_ op: CoreML__Specification__MILSpec__Operation) throws(RuntimeError) {
        let kind = text(op.type)
        let outputNames = elements(op.outputs, op.n_outputs).map { text($0.pointee.name) }
        guard let output = outputNames.first else { return }
        let owner = output
        func number(_ key: String, _ fallback: Float) throws(RuntimeError) -> Float {
            try constant(op, key, owner: owner, kind: kind)?.scalar ?? fallback
        }
        func x() throws(RuntimeError) -> Operand? { try operand(op, "x", owner: owner) }
        func variable(_ key: String = "x") throws(RuntimeError) -> String {
            switch try operand(op, key, owner: owner) {
            case .variable(let name): return name
            case .constant: throw .unsupportedLayer(layer: owner, kind: kind, reason: "a constant \(key) is not supported here")
            case nil: throw .invalidParameters(model: "operation \"\(owner)\" (\(kind))", detail: "input \(key) is missing")
            }
        }
        switch kind {
        case "const":
            guard let value = try constant(op, "val", owner: owner, kind: kind) else {
                throw .invalidParameters(model: "operation \"\(owner)\" (const)", detail: "no value")
            }
            constants[output] = value
        case "constexpr_affine_dequantize", "constexpr_lut_to_dense", "constexpr_blockwise_shift_scale", "constexpr_cast",
             "constexpr_sparse_to_dense":
            var parameters: [String: ProgramConstant] = [:]
            for key in Decompression.parameterNames {
                if let value = try constant(op, key, owner: owner, kind: kind) { parameters[key] = value }
            }
            constants[output] = try Decompression(kind: kind, owner: owner, parameters: parameters).value()
        case "classify":
            guard outputNames.count == 2, case .variable(let probabilities)? = try operand(op, "probabilities", owner: owner),
                  let classes = try constant(op, "classes", owner: owner, kind: kind) else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "classify needs computed probabilities and constant classes")
            }
            let labels: ClassLabels = classes.strings.isEmpty ? .int64s(classes.floats.map { Int64($0) }) : .strings(classes.strings)
            classification = Classification(probabilities: probabilities, labels: labels,
                                            labelOutput: outputNames[0], probabilitiesOutput: outputNames[1])
        case "identity":
            let input = try name(x(), owner: owner, role: "x")
            add(owner, kind, [input], [output], .expandDims(axes: []))
        case "linear":
            guard let weight = try constant(op, "weight", owner: owner, kind: kind), weight.shape.count == 2 else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "the weight must be a constant matrix")
            }
            let bias = try constant(op, "bias", owner: owner, kind: kind)?.floats
            add(owner, kind, [try variable()], [output], .linear(outputs: weight.shape[0], inputs: weight.shape[1], weights: weight.floats, bias: bias))
        case "matmul":
            let transposeX = try constant(op, "transpose_x", owner: owner, kind: kind)?.scalar ?? 0 != 0
            let transposeY = try constant(op, "transpose_y", owner: owner, kind: kind)?.scalar ?? 0 != 0
            let left = try name(operand(op, "x", owner: owner), owner: owner, role: "x")
            if case .constant(let y)? = try operand(op, "y", owner: owner), y.shape.count == 2 {
                // Kept as [N, K], as the kernel reads batched-matmul weights.
                let (k, n) = transposeY ? (y.shape[1], y.shape[0]) : (y.shape[0], y.shape[1])
                let stored = transposeY ? y.floats : Self.transposed(y.floats, rows: k, columns: n)
                add(owner, kind, [left], [output], .batchedMatMul(transposeA: transposeX, transposeB: true, weights: stored, first: k, second: n, bias: nil))
            } else {
                let right = try name(operand(op, "y", owner: owner), owner: owner, role: "y")
                add(owner, kind, [left, right], [output], .batchedMatMul(transposeA: transposeX, transposeB: transposeY, weights: nil, first: 0, second: 0, bias: nil))
            }
        case "conv", "conv_transpose":
            try convolution(op, kind: kind, owner: owner, output: output, input: try variable())
        case "max_pool", "avg_pool", "l2_pool":
            try pooling(op, kind: kind, owner: owner, output: output, input: try variable())
        case "relu": add(owner, kind, [try variable()], [output], .activation(.relu))
        case "relu6": add(owner, kind, [try variable()], [output], .activation(.clip(low: 0, high: 6)))
        case "sigmoid": add(owner, kind, [try variable()], [output], .activation(.sigmoid))
        case "tanh": add(owner, kind, [try variable()], [output], .activation(.tanh))
        case "softplus": add(owner, kind, [try variable()], [output], .activation(.softplus))
        case "softsign": add(owner, kind, [try variable()], [output], .activation(.softsign))
        case "silu": add(owner, kind, [try variable()], [output], .activation(.silu))
        case "elu": add(owner, kind, [try variable()], [output], .activation(.elu(alpha: try number("alpha", 1))))
        case "leaky_relu": add(owner, kind, [try variable()], [output], .activation(.leakyRelu(alpha: try number("alpha", 0.01))))
        case "thresholded_relu": add(owner, kind, [try variable()], [output], .activation(.thresholdedRelu(alpha: try number("alpha", 1))))
        case "clip": add(owner, kind, [try variable()], [output], .activation(.clip(low: try number("alpha", 0), high: try number("beta", 1))))
        case "sigmoid_hard": add(owner, kind, [try variable()], [output], .activation(.sigmoidHard(alpha: try number("alpha", 0.2), beta: try number("beta", 0.5))))
        case "linear_activation": add(owner, kind, [try variable()], [output], .activation(.linear(alpha: try number("alpha", 1), beta: try number("beta", 0))))
        case "scaled_tanh": add(owner, kind, [try variable()], [output], .activation(.scaledTanh(alpha: try number("alpha", 1), beta: try number("beta", 1))))
        case "gelu":
            let mode: LayerOperation.Activation.GeluMode = switch try constant(op, "mode", owner: owner, kind: kind)?.string {
            case "TANH_APPROXIMATION": .tanh
            case "SIGMOID_APPROXIMATION": .sigmoid
            default: .exact
            }
            add(owner, kind, [try variable()], [output], .activation(.gelu(mode)))
        case "abs", "exp", "log", "sqrt", "rsqrt", "inverse":
            let operation: LayerOperation.Unary = switch kind {
            case "abs": .abs
            case "exp": .exp
            case "log": .log
            case "sqrt": .sqrt
            case "rsqrt": .rsqrt
            default: .inverse
            }
            let epsilon = try number("epsilon", kind == "log" ? 0 : 1e-12)
            add(owner, kind, [try variable()], [output], .unary(operation, scale: 1, shift: 0, epsilon: epsilon))
        case "softmax":
            add(owner, kind, [try variable()], [output], .softmax(axis: Int(try number("axis", -1))))
        case "add", "sub", "mul", "real_div", "maximum", "minimum", "pow":
            let operation: StepKind.Elementwise = switch kind {
            case "add": .add
            case "sub": .subtract
            case "mul": .multiply
            case "real_div": .divide
            case "maximum": .maximum
            case "minimum": .minimum
            default: .power
            }
            let left = try name(operand(op, "x", owner: owner), owner: owner, role: "x")
            let right = try name(operand(op, "y", owner: owner), owner: owner, role: "y")
            add(owner, kind, [left, right], [output], .binary(operation))
        case "reshape":
            guard let shape = try constant(op, "shape", owner: owner, kind: kind) else { throw .invalidParameters(model: "operation \"\(owner)\"", detail: "no shape") }
            // A 0 copies the dimension at the same distance from the end: iOS 17's rule, and
            // the same as iOS 15's where that allows a 0 (as many dimensions as the input).
            add(owner, kind, [try variable()], [output], .reshapeStatic(shape.ints, zerosFromEnd: true))
        case "transpose":
            add(owner, kind, [try variable()], [output], .transpose(try constant(op, "perm", owner: owner, kind: kind)?.ints ?? []))
        case "squeeze":
            let axes = try constant(op, "axes", owner: owner, kind: kind)?.ints
            add(owner, kind, [try variable()], [output], .squeeze(axes: axes ?? [], all: axes == nil))
        case "expand_dims":
            add(owner, kind, [try name(x(), owner: owner, role: "x")], [output], .expandDims(axes: try constant(op, "axes", owner: owner, kind: kind)?.ints ?? []))
        case "concat":
            let parts = try operands(op, "values", owner: owner)
            var names: [String] = []
            for (index, part) in parts.enumerated() { names.append(try name(part, owner: owner, role: "values[\(index)]")) }
            let interleave = try constant(op, "interleave", owner: owner, kind: kind)?.scalar ?? 0 != 0
            add(owner, kind, names, [output], .concatND(axis: Int(try number("axis", 0)), interleave: interleave))
        case "split":
            let axis = Int(try number("axis", 0))
            let sizes = try constant(op, "split_sizes", owner: owner, kind: kind)?.ints
            add(owner, kind, [try variable()], outputNames, .splitAxis(sizes: sizes, parts: outputNames.count, axis: axis))
        case "slice_by_index":
            func list(_ key: String) throws(RuntimeError) -> [Int] { try constant(op, key, owner: owner, kind: kind)?.ints ?? [] }
            func mask(_ key: String) throws(RuntimeError) -> [Bool] { try list(key).map { $0 != 0 } }
            add(owner, kind, [try variable()], [output], .sliceByIndex(begin: try list("begin"), end: try list("end"), stride: try list("stride"),
                                                                      beginMask: try mask("begin_mask"), endMask: try mask("end_mask"),
                                                                      squeezeMask: try mask("squeeze_mask")))
        case "pad":
            let pads = try constant(op, "pad", owner: owner, kind: kind)?.ints ?? []
            let mode: LayerOperation.PaddingMode = switch try constant(op, "mode", owner: owner, kind: kind)?.string {
            case "reflect": .reflection
            case "replicate": .replication
            default: .constant(try number("constant_val", 0))
            }
            add(owner, kind, [try variable()], [output], .padConstant(pads: pads, mode: mode))
        case "gather":
            guard let indices = try constant(op, "indices", owner: owner, kind: kind) else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "indices computed at run time are not supported")
            }
            add(owner, kind, [try variable()], [output], .gatherConstant(indices: indices.ints, indexShape: indices.shape, axis: Int(try number("axis", 0)),
                                                                         batchDims: Int(try number("batch_dims", 0))))
        case "batch_norm", "instance_norm":
            try normalization(op, kind: kind, owner: owner, output: output, input: try variable())
        case "layer_norm":
            let axes = try constant(op, "axes", owner: owner, kind: kind)?.ints ?? [-1]
            let rank = elements(op.outputs, op.n_outputs).first?.pointee.type?.pointee.tensortype?.pointee.n_dimensions ?? 0
            let trailing = Set(axes.map { $0 < 0 ? $0 + rank : $0 })
            guard trailing == Set((rank - axes.count)..<rank) else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "normalizing over axes \(axes) that are not the last ones is not supported")
            }
            add(owner, kind, [try variable()], [output], .layerNorm(axes: axes.count, gamma: try constant(op, "gamma", owner: owner, kind: kind)?.floats,
                                                                    beta: try constant(op, "beta", owner: owner, kind: kind)?.floats,
                                                                    epsilon: try number("epsilon", 1e-5)))
        case "reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1_norm", "reduce_l2_norm",
             "reduce_sum_square", "reduce_log_sum", "reduce_argmax":
            let mode: LayerOperation.ReduceMode = switch kind {
            case "reduce_mean": .average
            case "reduce_sum": .sum
            case "reduce_max": .max
            case "reduce_min": .min
            case "reduce_prod": .product
            case "reduce_l1_norm": .l1
            case "reduce_l2_norm": .l2
            case "reduce_sum_square": .sumSquare
            case "reduce_log_sum": .logSum
            default: .argmax
            }
            var axes = try constant(op, "axes", owner: owner, kind: kind)?.ints ?? []
            if kind == "reduce_argmax" { axes = [Int(try number("axis", -1))] }
            let keep = try number("keep_dims", 0) != 0
            add(owner, kind, [try variable()], [output], .reduceAxes(mode, axes: axes, keepDimensions: keep))
        case "cast":
            let type = try constant(op, "dtype", owner: owner, kind: kind)?.string ?? "fp32"
            switch type {
            // x may be a constant (a constexpr's result, say): it is then loaded as a value.
            case "fp32", "fp16", "fp64": add(owner, kind, [try name(x(), owner: owner, role: "x")], [output], .expandDims(axes: []))
            case "int32", "int64", "int16", "int8", "uint8", "uint16":
                add(owner, kind, [try name(x(), owner: owner, role: "x")], [output], .castToInteger)
            default: throw .unsupportedLayer(layer: owner, kind: kind, reason: "casting to \(type) is not supported")
            }
        case "upsample_nearest_neighbor", "upsample_bilinear":
            let height = try number("scale_factor_height", 1), width = try number("scale_factor_width", 1)
            guard height == height.rounded(), width == width.rounded(), height >= 1, width >= 1 else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "fractional scale factors are not supported")
            }
            // align_corners defaults to true; half_pixel_centers (iOS 16) to !align_corners. Neither:
            // input position = output position / scale, as the neural-network layer's default.
            let alignCorners = try number("align_corners", 1) != 0
            let halfPixel = try number("half_pixel_centers", alignCorners ? 0 : 1) != 0
            let mode: LayerOperation.UpsampleMode = kind == "upsample_nearest_neighbor" ? .nearest
                : (alignCorners ? .bilinearAlignCorners : (halfPixel ? .bilinearHalfPixel : .bilinearDefault))
            add(owner, kind, [try variable()], [output], .upsample(height: Int(height), width: Int(width), mode: mode))
        default:
            throw .unsupportedLayer(layer: owner, kind: kind, reason: "modelc does not run this ML program operation yet")
        }
    }

    private mutating func convolution(_ op: CoreML__Specification__MILSpec__Operation, kind: String, owner: String, output: String,
                                      input: String) throws(RuntimeError) {
        let transposed = kind == "conv_transpose"
        guard let weight = try constant(op, "weight", owner: owner, kind: kind), weight.shape.count == 3 || weight.shape.count == 4 else {
            throw .unsupportedLayer(layer: owner, kind: kind, reason: "the weight must be a constant of rank 3 or 4")
        }
        let oneDimensional = weight.shape.count == 3
        let kernel = oneDimensional ? (1, weight.shape[2]) : (weight.shape[2], weight.shape[3])
        func pair(_ key: String, _ fallback: Int) throws(RuntimeError) -> (Int, Int) {
            let values = try constant(op, key, owner: owner, kind: kind)?.ints ?? []
            if oneDimensional { return (1, values.first ?? fallback) }
            return values.count == 2 ? (values[0], values[1]) : (fallback, fallback)
        }
        let groups = Int(try constant(op, "groups", owner: owner, kind: kind)?.scalar ?? 1)
        let padding = try Self.padding(try constant(op, "pad_type", owner: owner, kind: kind)?.string ?? "valid",
                                       try constant(op, "pad", owner: owner, kind: kind)?.ints ?? [], oneDimensional: oneDimensional)
        // conv_transpose weights are [in, out / groups, kH, kW], as Core ML's deconvolution layers.
        let outputShape = try constant(op, "output_shape", owner: owner, kind: kind)?.ints ?? []
        // The output's [H, W] when given ([1, L] for one dimension).
        let spatial: [Int] = outputShape.isEmpty ? [] : (oneDimensional ? [1, outputShape.last ?? 0] : Array(outputShape.suffix(2)))
        let convolution = LayerOperation.Convolution(
            outputChannels: transposed ? weight.shape[1] * max(1, groups) : weight.shape[0],
            kernelChannels: transposed ? weight.shape[0] : weight.shape[1], groups: max(1, groups),
            kernel: kernel, stride: try pair("strides", 1), dilation: try pair("dilations", 1), padding: padding,
            weights: weight.floats, bias: try constant(op, "bias", owner: owner, kind: kind)?.floats,
            isDeconvolution: transposed, outputShape: spatial)
        // [1, C, H, W] (or [1, C, L] as [1, C, 1, L]) in, the same rank out.
        if oneDimensional {
            let source = intermediate(owner, kind, [input], .expandDims(axes: [2]))
            let computed = intermediate(owner, kind, [source], .convolution(convolution))
            add(owner, kind, [computed], [output], .squeeze(axes: [2], all: false))
        } else {
            add(owner, kind, [input], [output], .convolution(convolution))
        }
    }

    private mutating func pooling(_ op: CoreML__Specification__MILSpec__Operation, kind: String, owner: String, output: String, input: String) throws(RuntimeError) {
        let sizes = try constant(op, "kernel_sizes", owner: owner, kind: kind)?.ints ?? []
        let strides = try constant(op, "strides", owner: owner, kind: kind)?.ints ?? []
        guard sizes.count == 2 else {
            throw .unsupportedLayer(layer: owner, kind: kind, reason: "only 2-D pooling is supported (kernel \(sizes))")
        }
        guard try constant(op, "ceil_mode", owner: owner, kind: kind)?.scalar ?? 0 == 0 else {
            throw .unsupportedLayer(layer: owner, kind: kind, reason: "ceil_mode is not supported")
        }
        let padding = try Self.padding(try constant(op, "pad_type", owner: owner, kind: kind)?.string ?? "valid",
                                       try constant(op, "pad", owner: owner, kind: kind)?.ints ?? [], oneDimensional: false)
        let pooling = LayerOperation.Pooling(
            kind: kind == "max_pool" ? .max : (kind == "avg_pool" ? .average : .l2),
            kernel: (sizes[0], sizes[1]), stride: strides.count == 2 ? (strides[0], strides[1]) : (1, 1), padding: padding, global: false,
            excludePadding: try constant(op, "exclude_padding_from_average", owner: owner, kind: kind)?.scalar ?? 0 != 0)
        add(owner, kind, [input], [output], .pooling(pooling))
    }

    private mutating func normalization(_ op: CoreML__Specification__MILSpec__Operation, kind: String, owner: String, output: String, input: String) throws(RuntimeError) {
        let epsilon = try constant(op, "epsilon", owner: owner, kind: kind)?.scalar ?? 1e-5
        let gamma = try constant(op, "gamma", owner: owner, kind: kind)
        let beta = try constant(op, "beta", owner: owner, kind: kind)
        var scale: [Float], shift: [Float]
        var source = input
        // gamma and beta are [C]: shaped [C, 1, …] to broadcast over x's [N, C, …].
        let rank = elements(op.outputs, op.n_outputs).first?.pointee.type?.pointee.tensortype?.pointee.n_dimensions ?? 4
        if kind == "batch_norm" {
            guard let mean = try constant(op, "mean", owner: owner, kind: kind), let variance = try constant(op, "variance", owner: owner, kind: kind) else {
                throw .unsupportedLayer(layer: owner, kind: kind, reason: "mean and variance must be constants")
            }
            scale = variance.floats.enumerated().map { index, value in (gamma?.floats[index] ?? 1) / (value + epsilon).squareRoot() }
            shift = mean.floats.enumerated().map { index, value in (beta?.floats[index] ?? 0) - value * scale[index] }
        } else {
            // Each (n, c) normalized over the rest; a rank-3 [N, C, L] as [N, C, 1, L].
            let planes = rank == 3 ? intermediate(owner, kind, [input], .expandDims(axes: [2])) : input
            source = intermediate(owner, kind, [planes], .meanVarianceNormalize(acrossChannels: false, normalizeVariance: true, epsilon: epsilon))
            if rank == 3 { source = intermediate(owner, kind, [source], .squeeze(axes: [2], all: false)) }
            scale = gamma?.floats ?? []
            shift = beta?.floats ?? []
        }
        let trailing = [Int](repeating: 1, count: max(0, Int(rank) - 2))
        var steps: [(operation: LayerOperation, values: [Float], role: String)] = []
        if !scale.isEmpty { steps.append((.binary(.multiply), scale, "scale")) }
        if !shift.isEmpty { steps.append((.binary(.add), shift, "shift")) }
        guard !steps.isEmpty else {
            add(owner, kind, [source], [output], .expandDims(axes: []))
            return
        }
        for (index, (operation, values, role)) in steps.enumerated() {
            let constantName = try name(.constant(ProgramConstant(shape: [values.count] + trailing, floats: values)), owner: owner, role: role)
            if index == steps.count - 1 {
                add(owner, kind, [source, constantName], [output], operation)
            } else {
                source = intermediate(owner, kind, [source, constantName], operation)
            }
        }
    }

    private static func padding(_ type: String, _ pad: [Int], oneDimensional: Bool) throws(RuntimeError) -> LayerOperation.Padding {
        switch type {
        case "same": return .same(bottomRightHeavy: true)
        case "same_lower": return .same(bottomRightHeavy: false)
        case "custom":
            if oneDimensional, pad.count == 2 { return .valid(top: 0, bottom: 0, left: pad[0], right: pad[1]) }
            guard pad.count == 4 else { return .valid(top: 0, bottom: 0, left: 0, right: 0) }
            return .valid(top: pad[0], bottom: pad[1], left: pad[2], right: pad[3])
        default:
            return .valid(top: 0, bottom: 0, left: 0, right: 0)
        }
    }

    static func transposed(_ values: [Float], rows: Int, columns: Int) -> [Float] {
        var result = [Float](repeating: 0, count: values.count)
        for row in 0..<rows { for column in 0..<columns { result[column * rows + row] = values[row * columns + column] } }
        return result
    }
}
