import CoreMLSchema
import ModelFeatures
import ModelSpec

/// The rank-N layers of NeuralNetwork.proto (specification 4 on): each keeps
/// the ranks it is given, as the MIL operation it lowers to does. Results a
/// MIL operation gives as integers or bools are cast back to float32 blobs.
extension NetworkLowering {
    /// Layers that are one MIL elementwise operation of their input.
    static let unaryTypes: [UInt32: String] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CEIL.rawValue: "ceil", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLOOR.rawValue: "floor",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIGN.rawValue: "sign", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ROUND.rawValue: "round",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EXP2.rawValue: "exp2", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIN.rawValue: "sin",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COS.rawValue: "cos", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TAN.rawValue: "tan",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ASIN.rawValue: "asin", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACOS.rawValue: "acos",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ATAN.rawValue: "atan", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SINH.rawValue: "sinh",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COSH.rawValue: "cosh", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TANH.rawValue: "tanh",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ATANH.rawValue: "atanh", CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ERF.rawValue: "erf",
    ]

    /// Layers that combine their inputs pairwise with NumPy broadcasting.
    static let binaryTypes: [UInt32: String] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD_BROADCASTABLE.rawValue: "add",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SUBTRACT_BROADCASTABLE.rawValue: "sub",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY_BROADCASTABLE.rawValue: "mul",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_DIVIDE_BROADCASTABLE.rawValue: "real_div",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX_BROADCASTABLE.rawValue: "maximum",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN_BROADCASTABLE.rawValue: "minimum",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POW_BROADCASTABLE.rawValue: "pow",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MOD_BROADCASTABLE.rawValue: "mod",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLOOR_DIV_BROADCASTABLE.rawValue: "floor_div",
    ]

    /// Comparisons (of two inputs, or of one with the layer's `alpha`), as 0/1 floats.
    static let comparisonTypes: [UInt32: String] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EQUAL.rawValue: "equal",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_NOT_EQUAL.rawValue: "not_equal",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_THAN.rawValue: "less",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_EQUAL.rawValue: "less_equal",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GREATER_THAN.rawValue: "greater",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GREATER_EQUAL.rawValue: "greater_equal",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_AND.rawValue: "logical_and",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_OR.rawValue: "logical_or",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_XOR.rawValue: "logical_xor",
    ]

    /// The rank-N reductions.
    static let reductionTypes: [UInt32: String] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM.rawValue: "reduce_sum",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MEAN.rawValue: "reduce_mean",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MAX.rawValue: "reduce_max",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MIN.rawValue: "reduce_min",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_PROD.rawValue: "reduce_prod",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L1.rawValue: "reduce_l1_norm",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L2.rawValue: "reduce_l2_norm",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM_SQUARE.rawValue: "reduce_sum_square",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM.rawValue: "reduce_log_sum",
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM_EXP.rawValue: "reduce_log_sum_exp",
    ]

    private static func unaryLayer(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let x = try b.input()
        b.op(unaryTypes[layer.layer_case.rawValue] ?? "identity", ["x": .value(x)], into: try b.output())
    }

    private static func binaryLayer(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        try b.combine(binaryTypes[layer.layer_case.rawValue] ?? "add", alpha: nil)
    }

    private static func comparisonLayer(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let type = comparisonTypes[layer.layer_case.rawValue] ?? "equal"
        if type.hasPrefix("logical_") {
            let x = b.toBool(try b.input()), y = b.toBool(try b.input(1))
            b.toFloat(b.op(type, ["x": .value(x), "y": .value(y)]), into: try b.output())
            return
        }
        let alpha: Float = switch layer.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EQUAL: layer.equal?.pointee.alpha ?? 0
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_NOT_EQUAL: layer.notequal?.pointee.alpha ?? 0
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_THAN: layer.lessthan?.pointee.alpha ?? 0
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_EQUAL: layer.lessequal?.pointee.alpha ?? 0
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GREATER_THAN: layer.greaterthan?.pointee.alpha ?? 0
        default: layer.greaterequal?.pointee.alpha ?? 0
        }
        let x = try b.input()
        let y: LoweredArgument = b.inputs.count > 1 ? .value(try b.input(1)) : .float(alpha)
        b.toFloat(b.op(type, ["x": .value(x), "y": y]), into: try b.output())
    }

    private static func reductionLayer(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        let (axes, keep, everything): (axes: [Int], keep: Bool, all: Bool) = switch layer.layer_case {
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM: reduceParameters(layer.reducesum?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MEAN: reduceParameters(layer.reducemean?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MAX: reduceParameters(layer.reducemax?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MIN: reduceParameters(layer.reducemin?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_PROD: reduceParameters(layer.reduceprod?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L1: reduceParameters(layer.reducel1?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L2: reduceParameters(layer.reducel2?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM_SQUARE: reduceParameters(layer.reducesumsquare?.pointee)
        case CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM: reduceParameters(layer.reducelogsum?.pointee)
        default: reduceParameters(layer.reducelogsumexp?.pointee)
        }
        let x = try b.input()
        var arguments: [String: LoweredArgument] = ["x": .value(x), "keep_dims": .bool(keep)]
        if !everything { arguments["axes"] = .ints(axes) }
        b.atLeastRank1(b.op(reductionTypes[layer.layer_case.rawValue] ?? "reduce_sum", arguments), into: try b.output())
    }

    static let ndLayers: [UInt32: Lowering] = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CEIL.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLOOR.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIGN.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ROUND.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EXP2.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SIN.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COS.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TAN.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ASIN.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACOS.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ATAN.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SINH.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_COSH.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TANH.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ATANH.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ERF.rawValue: unaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SUBTRACT_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_DIVIDE_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POW_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MOD_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLOOR_DIV_BROADCASTABLE.rawValue: binaryLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EQUAL.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_NOT_EQUAL.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_THAN.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LESS_EQUAL.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GREATER_THAN.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GREATER_EQUAL.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_AND.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_OR.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_XOR.rawValue: comparisonLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MEAN.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MAX.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_MIN.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_PROD.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L1.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_L2.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_SUM_SQUARE.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE_LOG_SUM_EXP.rawValue: reductionLayer,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOGICAL_NOT.rawValue: { b, _ throws(RuntimeError) in
            let x = b.toBool(try b.input())
            b.toFloat(b.op("logical_not", ["x": .value(x)]), into: try b.output())
        },
    ]

    static let moreNDLayers: [UInt32: Lowering] = [
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SOFTMAX_ND.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                b.op("softmax", ["x": .value(x), "axis": .int(Int(l.softmaxnd?.pointee.axis ?? -1))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CLIP.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                b.op("clip", ["x": .value(x), "alpha": .float(l.clip?.pointee.minval ?? 0), "beta": .float(l.clip?.pointee.maxval ?? 0)],
                     into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CLAMPED_RE_LU.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                b.op("clamped_relu", ["x": .value(x), "alpha": .float(l.clampedrelu?.pointee.alpha ?? 0), "beta": .float(l.clampedrelu?.pointee.beta ?? 6)],
                     into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GELU.rawValue: { b, l throws(RuntimeError) in
                let mode = switch l.gelu?.pointee.mode {
                case CORE_ML__SPECIFICATION__GELU_LAYER_PARAMS__GELU_MODE__TANH_APPROXIMATION?: "TANH_APPROXIMATION"
                case CORE_ML__SPECIFICATION__GELU_LAYER_PARAMS__GELU_MODE__SIGMOID_APPROXIMATION?: "SIGMOID_APPROXIMATION"
                default: "EXACT"
                }
                let x = try b.input()
                b.op("gelu", ["x": .value(x), "mode": .string(mode)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ASINH.rawValue: { b, _ throws(RuntimeError) in try b.inverseHyperbolic(plusOne: true) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACOSH.rawValue: { b, _ throws(RuntimeError) in try b.inverseHyperbolic(plusOne: false) },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TRANSPOSE.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                let axes = Self.transposeAxes(l.transpose.map { scalars($0.pointee.axes, $0.pointee.n_axes).map(Int.init) } ?? [], rank: b.rank(x))
                b.op("transpose", ["x": .value(x), "perm": .ints(axes)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT_ND.rawValue: { b, l throws(RuntimeError) in
                b.op("concat", ["values": .values(b.inputs), "axis": .int(Int(l.concatnd?.pointee.axis ?? 0)),
                                "interleave": .bool(l.concatnd?.pointee.interleave != 0)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SPLIT_ND.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.splitnd?.pointee else { throw b.invalid("no parameters") }
                let x = try b.input()
                var arguments: [String: LoweredArgument] = ["x": .value(x), "axis": .int(Int(params.axis))]
                let sizes = scalars(params.splitsizes, params.n_splitsizes).map(Int.init)
                if sizes.isEmpty { arguments["num_splits"] = .int(b.outputs.count) } else { arguments["split_sizes"] = .ints(sizes) }
                b.op("split", arguments, outputs: b.outputs)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_STACK.rawValue: { b, l throws(RuntimeError) in
                b.op("stack", ["values": .values(b.inputs), "axis": .int(Int(l.stack?.pointee.axis ?? 0))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TILE.rawValue: { b, l throws(RuntimeError) in
                // As np.tile (test_tile_cpu): fewer repetitions than axes repeat the last axes, the
                // leading ones once; MIL tile takes one count per axis.
                let x = try b.input(), r = b.rank(x)
                if b.inputs.count >= 2 {
                    // Repetitions computed at run time; a vector shorter than the rank (its length known at
                    // load) gets leading ones.
                    var reps = b.toInt(try b.input(1))
                    if let length = b.length(try b.input(1)), length < r {
                        reps = b.shape([.literal(Array(repeating: 1, count: r - length)), .vector(reps)])
                    }
                    b.op("tile", ["x": .value(x), "reps": .value(reps)], into: try b.output())
                    return
                }
                var reps = l.tile.map { scalars($0.pointee.reps, $0.pointee.n_reps).map(Int.init) } ?? []
                reps = Array(repeating: 1, count: max(0, r - reps.count)) + reps
                b.op("tile", ["x": .value(x), "reps": .ints(reps)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REVERSE.rawValue: { b, l throws(RuntimeError) in
                let codes: [protobuf_c_boolean] = l.reverse.map { scalars($0.pointee.reversedim, $0.pointee.n_reversedim) } ?? []
                let flags = codes.map { $0 != 0 }
                let x = try b.input()
                let axes = flags.enumerated().filter(\.element).map(\.offset)
                b.op("reverse", ["x": .value(x), "axes": .ints(axes)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REVERSE_SEQ.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                let lengths = b.toInt(try b.input(1))
                b.op("reverse_sequence", ["x": .value(x), "lengths": .value(lengths), "seq_axis": .int(Int(l.reverseseq?.pointee.sequenceaxis ?? 0)),
                                          "batch_axis": .int(Int(l.reverseseq?.pointee.batchaxis ?? 0))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE_STATIC.rawValue: sliceStatic,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE_DYNAMIC.rawValue: sliceDynamic,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE_BY_SIZE.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input(), r = b.rank(x)
                let axis = Int(l.slicebysize?.pointee.axis ?? 0), resolved = axis < 0 ? axis + r : axis
                let size = Int(l.slicebysize?.pointee.size ?? 1)
                let zerosBefore = b.shape([.literal(Array(repeating: 0, count: resolved))])
                let begin = b.shape([.vector(zerosBefore), .vector(b.reshape(b.toInt(try b.input(1)), [1])),
                                     .literal(Array(repeating: 0, count: r - resolved - 1))])
                let sizes = b.shape([.literal(Array(repeating: -1, count: resolved) + [size] + Array(repeating: -1, count: r - resolved - 1))])
                b.op("slice_by_size", ["x": .value(x), "begin": .value(begin), "size": .value(sizes)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLIDING_WINDOWS.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.slidingwindows?.pointee else { throw b.invalid("no parameters") }
                let x = try b.input()
                b.op("sliding_windows", ["x": .value(x), "axis": .int(Int(params.axis)), "size": .int(Int(params.windowsize)),
                                         "stride": .int(max(1, Int(params.step)))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GATHER.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input(), indices = b.toInt(try b.input(1))
                let r = max(1, b.rank(x) - 1 + b.rank(indices))
                b.op("gather", ["x": .value(x), "indices": .value(indices), "axis": .int(Int(l.gather?.pointee.axis ?? 0))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GATHER_ALONG_AXIS.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input(), indices = b.toInt(try b.input(1))
                b.op("gather_along_axis", ["x": .value(x), "indices": .value(indices), "axis": .int(Int(l.gatheralongaxis?.pointee.axis ?? 0))],
                     into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GATHER_ND.rawValue: { b, _ throws(RuntimeError) in
                let x = try b.input(), indices = b.toInt(try b.input(1))
                // The rank depends on the indices' last dimension K (rank(indices) - 1 + rank(x) - K), which the
                // facts know for constant, fixed-shape or stacked indices; else the declared output's rank, else K = 1.
                let r = (try? b.declaredRank(of: try b.output())) ?? max(1, b.rank(indices) - 1 + b.rank(x) - 1)
                b.op("gather_nd", ["x": .value(x), "indices": .value(indices)], into: try b.output(), rank: r)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCATTER.rawValue: { b, l throws(RuntimeError) in
                try b.scatter("scatter", axis: Int(l.scatter?.pointee.axis ?? 0), mode: l.scatter?.pointee.mode)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCATTER_ALONG_AXIS.rawValue: { b, l throws(RuntimeError) in
                try b.scatter("scatter_along_axis", axis: Int(l.scatteralongaxis?.pointee.axis ?? 0), mode: l.scatteralongaxis?.pointee.mode)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCATTER_ND.rawValue: { b, l throws(RuntimeError) in
                try b.scatter("scatter_nd", axis: nil, mode: l.scatternd?.pointee.mode)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_TOP_K.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.topk?.pointee else { throw b.invalid("no parameters") }
                let x = try b.input()
                let k: LoweredArgument = b.inputs.count > 1 ? .value(b.reshape(b.toInt(try b.input(1)), [])) : .int(Int(params.k))
                let names = [b.fresh(), b.fresh()]
                b.op("topk", ["x": .value(x), "k": k, "axis": .int(Int(params.axis)), "ascending": .bool(params.usebottomk != 0)],
                     outputs: names)
                b.identity(names[0], into: try b.output(0))
                if b.outputs.count > 1 { b.toFloat(names[1], into: try b.output(1)) }
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ARG_MAX.rawValue: { b, l throws(RuntimeError) in
                try b.argument("reduce_argmax", axis: Int(l.argmax?.pointee.axis ?? 0), removeDim: l.argmax?.pointee.removedim != 0)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ARG_MIN.rawValue: { b, l throws(RuntimeError) in
                try b.argument("reduce_argmin", axis: Int(l.argmin?.pointee.axis ?? 0), removeDim: l.argmin?.pointee.removedim != 0)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ARG_SORT.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                let order = b.op("argsort", ["x": .value(x), "axis": .int(Int(l.argsort?.pointee.axis ?? 0)),
                                             "ascending": .bool(l.argsort?.pointee.descending == 0)])
                b.toFloat(order, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CUM_SUM.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                guard b.inputs.count < 2 else { throw b.unsupported("an axis given as a second input (computed at run time) is not supported") }
                b.op("cumsum", ["x": .value(x), "axis": .int(Int(l.cumsum?.pointee.axis ?? 0)), "exclusive": .bool(l.cumsum?.pointee.excludefinalsum != 0),
                                "reverse": .bool(l.cumsum?.pointee.reverse != 0)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ONE_HOT.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.onehot?.pointee else { throw b.invalid("no parameters") }
                let x = try b.input()
                let size: LoweredArgument = b.inputs.count > 1 ? .value(b.reshape(b.toInt(try b.input(1)), [])) : .int(Int(params.onehotvectorsize))
                b.op("one_hot", ["indices": .value(b.toInt(x)), "one_hot_vector_size": size, "axis": .int(Int(params.axis)),
                                 "on_value": .float(params.onvalue), "off_value": .float(params.offvalue)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EMBEDDING_ND.rawValue: embeddingND,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHED_MATMUL.rawValue: batchedMatMul,
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_GET_SHAPE.rawValue: { b, _ throws(RuntimeError) in
                let x = try b.input()
                let shape = b.op("shape", ["x": .value(x)])
                b.toFloat(shape, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOAD_CONSTANT_ND.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.loadconstantnd?.pointee else { throw b.invalid("no parameters") }
                let shape = scalars(params.shape, params.n_shape).map(Int.init)
                let values = try b.weights(params.data, "data", count: shape.reduce(1, *))
                b.op("identity", ["x": .floats(values, shape: shape)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FILL_LIKE.rawValue: { b, l throws(RuntimeError) in
                let reference = try b.input()
                b.op("fill_like", ["ref_tensor": .value(reference), "value": .float(l.filllike?.pointee.value ?? 0)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FILL_STATIC.rawValue: { b, l throws(RuntimeError) in
                let shape = l.fillstatic.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? []
                b.op("fill", ["shape": .ints(shape), "value": .float(l.fillstatic?.pointee.value ?? 0)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FILL_DYNAMIC.rawValue: { b, l throws(RuntimeError) in
                let shape = try b.input()
                let length = try b.rank(given: shape, of: try b.output())
                b.op("fill", ["shape": .value(b.toInt(shape)), "value": .float(l.filldynamic?.pointee.value ?? 0)], into: try b.output(), rank: length)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BROADCAST_TO_LIKE.rawValue: { b, _ throws(RuntimeError) in
                let x = try b.input(), reference = try b.input(1)
                let zeros = b.op("fill_like", ["ref_tensor": .value(reference), "value": .float(0)])
                b.op("add", ["x": .value(x), "y": .value(zeros)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BROADCAST_TO_STATIC.rawValue: { b, l throws(RuntimeError) in
                let shape = l.broadcasttostatic.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? []
                let x = try b.input()
                let zeros = b.op("fill", ["shape": .ints(shape), "value": .float(0)])
                b.op("add", ["x": .value(x), "y": .value(zeros)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BROADCAST_TO_DYNAMIC.rawValue: { b, _ throws(RuntimeError) in
                let x = try b.input()
                let length = try b.rank(given: try b.input(1), of: try b.output())
                let zeros = b.op("fill", ["shape": .value(b.toInt(try b.input(1))), "value": .float(0)], rank: length)
                b.op("add", ["x": .value(x), "y": .value(zeros)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SQUEEZE.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                let axes = l.squeeze.map { scalars($0.pointee.axes, $0.pointee.n_axes).map(Int.init) } ?? []
                if l.squeeze?.pointee.squeezeall != 0 || axes.isEmpty {
                    // How many axes have size 1 is known when the plan is made: the rank here is the
                    // declared one (else 1), and the plan keeps at least one axis.
                    let length = max(1, (try? b.declaredRank(of: try b.output())) ?? 1)
                    let squeezed = b.op("squeeze", ["x": .value(x)], rank: length)
                    b.op("at_least_rank1", ["x": .value(squeezed)], into: try b.output(), rank: length)
                } else {
                    b.atLeastRank1(b.op("squeeze", ["x": .value(x), "axes": .ints(axes)]),
                                   into: try b.output())
                }
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_EXPAND_DIMS.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                let axes = l.expanddims.map { scalars($0.pointee.axes, $0.pointee.n_axes).map(Int.init) } ?? []
                b.op("expand_dims", ["x": .value(x), "axes": .ints(axes)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLATTEN_TO2_D.rawValue: { b, l throws(RuntimeError) in
                b.op("flatten2d", ["x": .value(try b.input()), "axis": .int(Int(l.flattento2d?.pointee.axis ?? 1))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE_STATIC.rawValue: { b, l throws(RuntimeError) in
                let shape = l.reshapestatic.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? []
                _ = b.reshape(try b.input(), shape, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANK_PRESERVING_RESHAPE.rawValue: { b, l throws(RuntimeError) in
                let shape = l.rankpreservingreshape.map { scalars($0.pointee.targetshape, $0.pointee.n_targetshape).map(Int.init) } ?? []
                _ = b.reshape(try b.input(), shape, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE_LIKE.rawValue: { b, _ throws(RuntimeError) in
                let reference = try b.input(1)
                let shape = b.op("shape", ["x": .value(reference)])
                _ = b.reshape(try b.input(), to: shape, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE_DYNAMIC.rawValue: { b, _ throws(RuntimeError) in
                let length = try b.rank(given: try b.input(1), of: try b.output())
                _ = b.reshape(try b.input(), to: b.toInt(try b.input(1)), rank: length, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONSTANT_PAD.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.constantpad?.pointee else { throw b.invalid("no parameters") }
                guard params.padtogivenoutputsizemode == 0 else { throw b.unsupported("padding to a given output size is not supported yet") }
                let x = try b.input()
                b.op("pad", ["x": .value(x), "pad": .ints(scalars(params.padamounts, params.n_padamounts).map(Int.init)),
                             "mode": .string("constant"), "constant_val": .float(params.value)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_WHERE_BROADCASTABLE.rawValue: { b, _ throws(RuntimeError) in
                let condition = b.toBool(try b.input()), a = try b.input(1), c = try b.input(2)
                b.op("select", ["cond": .value(condition), "a": .value(a), "b": .value(c)], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_WHERE_NON_ZERO.rawValue: { b, _ throws(RuntimeError) in
                let indices = b.op("non_zero", ["x": .value(try b.input())])
                b.toFloat(indices, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MATRIX_BAND_PART.rawValue: { b, l throws(RuntimeError) in
                let x = try b.input()
                b.op("band_part", ["x": .value(x), "lower": .int(Int(l.matrixbandpart?.pointee.numlower ?? -1)),
                                   "upper": .int(Int(l.matrixbandpart?.pointee.numupper ?? -1))], into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOWER_TRIANGULAR.rawValue: { b, l throws(RuntimeError) in
                try b.triangle(k: Int(l.lowertriangular?.pointee.k ?? 0), lower: true)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UPPER_TRIANGULAR.rawValue: { b, l throws(RuntimeError) in
                try b.triangle(k: Int(l.uppertriangular?.pointee.k ?? 0), lower: false)
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LAYER_NORMALIZATION.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.layernormalization?.pointee else { throw b.invalid("no parameters") }
                let shape = scalars(params.normalizedshape, params.n_normalizedshape).map(Int.init)
                let count = shape.reduce(1, *)
                let x = try b.input()
                var arguments: [String: LoweredArgument] = ["x": .value(x), "axes": .ints(Array((-shape.count)...(-1))), "epsilon": .float(params.eps)]
                if let gamma = try b.optionalWeights(params.gamma, "gamma") { arguments["gamma"] = .floats(gamma, shape: gamma.count == count ? shape : [gamma.count]) }
                if let beta = try b.optionalWeights(params.beta, "beta") { arguments["beta"] = .floats(beta, shape: beta.count == count ? shape : [beta.count]) }
                b.op("layer_norm", arguments, into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANGE_STATIC.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.rangestatic?.pointee else { throw b.invalid("no parameters") }
                b.op("range_1d", ["start": .float(params.startvalue), "end": .float(params.endvalue), "step": .float(params.stepsizevalue)],
                     into: try b.output())
            },
            CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RANGE_DYNAMIC.rawValue: { b, l throws(RuntimeError) in
                guard let params = l.rangedynamic?.pointee else { throw b.invalid("no parameters") }
                let end: LoweredArgument = .value(b.reshape(try b.input(0), []))
                let start: LoweredArgument = b.inputs.count > 1 ? .value(b.reshape(try b.input(1), [])) : .float(params.startvalue)
                let step: LoweredArgument = b.inputs.count > 2 ? .value(b.reshape(try b.input(2), [])) : .float(params.stepsizevalue)
                b.op("range_1d", ["start": start, "end": end, "step": step], into: try b.output())
            },
    ]

    private static func reduceParameters<Params: ReduceLayerParameters>(_ params: Params?) -> (axes: [Int], keep: Bool, all: Bool) {
        guard let params else { return ([], true, true) }
        return (params.axisList, params.keepDimensions, params.reduceAll || params.axisList.isEmpty)
    }

    /// A transpose layer's `axes` as a permutation of all `rank` axes. Axes
    /// fewer than the input's rank permute its trailing axes, the leading
    /// (batch) ones staying in place: in a rank-aware network an image input
    /// is `[1, C, H, W]` (RANK4_IMAGE_MAPPING), and coremltools'
    /// `make_image_input(image_format: "NHWC")` puts a `[1, 2, 0]` transpose
    /// after an image made from an `(H, W, C)` array and `[0, 2, 3, 1]` after one
    /// made from `(N, H, W, C)`; Core ML runs both. Other axes are kept as given
    /// (the transpose operation names them if they are not a permutation).
    static func transposeAxes(_ axes: [Int], rank: Int) -> [Int] {
        guard !axes.isEmpty, axes.count < rank, axes.sorted() == Array(0..<axes.count) else { return axes }
        let lead = rank - axes.count
        return Array(0..<lead) + axes.map { $0 + lead }
    }

    private static func sliceStatic(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.slicestatic?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input()
        let squeeze = scalars(params.squeezemasks, params.n_squeezemasks).map { $0 != 0 }
        var arguments: [String: LoweredArgument] = [
            "x": .value(x), "begin": .ints(scalars(params.beginids, params.n_beginids).map(Int.init)),
            "end": .ints(scalars(params.endids, params.n_endids).map(Int.init)),
            "begin_mask": .bools(scalars(params.beginmasks, params.n_beginmasks).map { $0 != 0 }),
            "end_mask": .bools(scalars(params.endmasks, params.n_endmasks).map { $0 != 0 }),
        ]
        let strides = scalars(params.strides, params.n_strides).map(Int.init)
        if !strides.isEmpty { arguments["stride"] = .ints(strides) }
        if !squeeze.isEmpty { arguments["squeeze_mask"] = .bools(squeeze) }
        b.atLeastRank1(b.op("slice_by_index", arguments), into: try b.output())
    }

    private static func sliceDynamic(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.slicedynamic?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input(), r = b.rank(x)
        // coremltools' builder writes five values per parameter by default (masks false, strides 1)
        // whatever the rank; only the first r can be meant (one per axis of x), the rest are its padding.
        func axes<T>(_ values: [T]) -> [T] { values.count > r ? Array(values.prefix(r)) : values }
        let squeeze = axes(scalars(params.squeezemasks, params.n_squeezemasks).map { $0 != 0 })
        var arguments: [String: LoweredArgument] = [
            "x": .value(x), "begin": .value(b.toInt(try b.input(1))),
            "begin_mask": .bools(axes(scalars(params.beginmasks, params.n_beginmasks).map { $0 != 0 })),
            "end_mask": .bools(axes(scalars(params.endmasks, params.n_endmasks).map { $0 != 0 })),
        ]
        arguments["end"] = b.inputs.count > 2 ? .value(b.toInt(try b.input(2))) : .ints(axes(scalars(params.endids, params.n_endids).map(Int.init)))
        if b.inputs.count > 3 {
            arguments["stride"] = .value(b.toInt(try b.input(3)))
        } else {
            let strides = axes(scalars(params.strides, params.n_strides).map(Int.init))
            if !strides.isEmpty { arguments["stride"] = .ints(strides) }
        }
        if !squeeze.isEmpty { arguments["squeeze_mask"] = .bools(squeeze) }
        b.atLeastRank1(b.op("slice_by_index", arguments), into: try b.output())
    }

    private static func embeddingND(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.embeddingnd?.pointee else { throw b.invalid("no parameters") }
        let vocabulary = Int(params.vocabsize), size = Int(params.embeddingsize)
        let weights = try b.weights(params.weights, "weights", count: vocabulary * size, channels: size)
        // Stored [embeddingSize, vocabSize]: the table gathered by index is its transpose.
        var table = [Float](repeating: 0, count: weights.count)
        for e in 0..<size { for v in 0..<vocabulary { table[v * size + e] = weights[e * vocabulary + v] } }
        let x = try b.input()
        // [..., 1] indices → [..., embeddingSize].
        let indices = b.toInt(b.op("squeeze", ["x": .value(x), "axes": .ints([-1])]))
        var rows = b.op("gather", ["x": .floats(table, shape: [vocabulary, size]), "indices": .value(indices), "axis": .int(0)])
        if params.hasbias != 0 {
            rows = b.op("add", ["x": .value(rows), "y": .floats(try b.weights(params.bias, "bias", count: size), shape: [size])])
        }
        b.identity(rows, into: try b.output())
    }

    private static func batchedMatMul(_ b: inout LoweringBuilder, _ layer: Layer) throws(RuntimeError) {
        guard let params = layer.batchedmatmul?.pointee else { throw b.invalid("no parameters") }
        let x = try b.input(), output = try b.output()
        if b.inputs.count > 1 {
            // NeuralNetwork.proto reads a rank-1 first operand as (1, D) and a rank-1 second one as
            // (D, 1), and keeps both axes: (10,) by (10,) gives (1, 1), (4, 10) by (10,) gives (4, 1).
            let first = b.rank(x) == 1 ? b.op("expand_dims", ["x": .value(x), "axes": .ints([0])]) : x
            let y = try b.input(1)
            let second = b.rank(y) == 1 ? b.op("expand_dims", ["x": .value(y), "axes": .ints([1])]) : y
            b.op("matmul", ["x": .value(first), "y": .value(second), "transpose_x": .bool(params.transposea != 0), "transpose_y": .bool(params.transposeb != 0)],
                 into: output)
            return
        }
        // NeuralNetwork.proto: with the weights as the second operand, transposeA and transposeB are ignored.
        let first = Int(params.weightmatrixfirstdimension), second = Int(params.weightmatrixseconddimension)
        // Stored [second, first] (output channels outermost, per-channel quantization scales
        // indexed by them): the product uses their transpose.
        let weights = try b.weights(params.weights, "weights", count: first * second, channels: second)
        let product = b.op("matmul", ["x": .value(x), "y": .floats(weights, shape: [second, first]), "transpose_y": .bool(true)],
                           into: params.hasbias != 0 ? nil : output)
        guard params.hasbias != 0 else { return }
        b.op("add", ["x": .value(product), "y": .floats(try b.weights(params.bias, "bias", count: second), shape: [second])], into: output)
    }
}

extension LoweringBuilder {
    /// `x` as bool (`!= 0`).
    mutating func toBool(_ x: String) -> String {
        op("cast", ["x": .value(x), "dtype": .string("bool")])
    }

    /// `x` named `output`, a rank-0 result made a vector of one (blobs have a rank of at least 1).
    mutating func atLeastRank1(_ x: String, into output: String) {
        if rank(x) <= 0 { _ = reshape(x, [1], into: output) } else { identity(x, into: output) }
    }

    /// The rank of a result whose shape is the values of the rank-1 blob
    /// `shape`: its length when known at load (a `getShape`, a constant, an
    /// input of fixed size, a concatenation of those), else the rank the model
    /// declares for `output`, else `openRank` when no layer reads `output`
    /// (the network only returns it: the plan takes its rank from the values).
    func rank(given shape: String, of output: String) throws(RuntimeError) -> Int {
        if let length = length(shape) { return length }
        if declaredOutputRanks[output] == nil, !blobsRead.contains(output) { return Self.openRank }
        return try declaredRank(of: output)
    }

    /// The rank the model declares for a network output, for layers whose rank comes from values.
    func declaredRank(of blob: String) throws(RuntimeError) -> Int {
        if let rank = declaredOutputRanks[blob] { return rank }
        throw unsupported("the rank of its output depends on values computed at run time, and the model does not declare it")
    }

    /// asinh x = log(x + √(x² + 1)); acosh x = log(x + √(x² − 1)).
    mutating func inverseHyperbolic(plusOne: Bool) throws(RuntimeError) {
        let x = try input()
        let square = op("add", ["x": .value(op("mul", ["x": .value(x), "y": .value(x)])), "y": .float(plusOne ? 1 : -1)])
        let sum = op("add", ["x": .value(x), "y": .value(op("sqrt", ["x": .value(square)]))])
        op("log", ["x": .value(sum)], into: try output())
    }

    /// The index of the largest or smallest value along `axis`, as float32.
    mutating func argument(_ type: String, axis: Int, removeDim: Bool) throws(RuntimeError) {
        let x = try input()
        let index = op(type, ["x": .value(x), "axis": .int(axis), "keep_dims": .bool(!removeDim)])
        atLeastRank1(toFloat(index), into: try output())
    }

    /// `scatter`, `scatter_along_axis` and `scatter_nd` with NeuralNetwork.proto's modes.
    mutating func scatter(_ type: String, axis: Int?, mode: CoreML__Specification__ScatterMode?) throws(RuntimeError) {
        let data = try input()
        var indices = try input(1), updates = try input(2)
        if type == "scatter", let axis, rank(indices) > 1 {
            // NeuralNetwork `scatter` takes indices of any rank (TensorFlow's scatter_update): updates are
            // data's shape with the axis replaced by the indices' shape. MIL's takes a vector of them:
            // the indices flattened, the updates' axes they span merged into one.
            let r = rank(data), spanned = rank(indices)
            let resolved = axis < 0 ? axis + r : axis
            indices = reshape(indices, [-1])
            let merged = shape([.vector(dims(updates, 0, resolved)), .literal([-1]), .vector(dims(updates, resolved + spanned))])
            updates = reshape(updates, to: merged)
        }
        indices = toInt(indices)
        let name = switch mode {
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_ADD?: "add"
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_SUB?: "sub"
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_MUL?: "mul"
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_DIV?: "div"
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_MAX?: "max"
        case CORE_ML__SPECIFICATION__SCATTER_MODE__SCATTER_MIN?: "min"
        default: "update"
        }
        var arguments: [String: LoweredArgument] = ["data": .value(data), "indices": .value(indices), "updates": .value(updates), "mode": .string(name)]
        if let axis { arguments["axis"] = .int(axis) }
        op(type, arguments, into: try output())
    }

    /// The lower (j − i ≤ k) or upper (j − i ≥ k) triangle of the last two dimensions.
    mutating func triangle(k: Int, lower: Bool) throws(RuntimeError) {
        let x = try input()
        if lower, k >= 0 {
            op("band_part", ["x": .value(x), "lower": .int(-1), "upper": .int(k)], into: try output())
        } else if !lower, k <= 0 {
            op("band_part", ["x": .value(x), "lower": .int(-k), "upper": .int(-1)], into: try output())
        } else {
            // Off the main band: the complement of the opposite triangle.
            let band = lower ? op("band_part", ["x": .value(x), "lower": .int(-1), "upper": .int(0)])
                : op("band_part", ["x": .value(x), "lower": .int(0), "upper": .int(-1)])
            // lower with k < 0: keep j − i ≤ k, i.e. the lower triangle minus the |k| nearest diagonals.
            let removed = lower ? op("band_part", ["x": .value(x), "lower": .int(-k - 1), "upper": .int(0)])
                : op("band_part", ["x": .value(x), "lower": .int(0), "upper": .int(k - 1)])
            op("sub", ["x": .value(band), "y": .value(removed)], into: try output())
        }
    }
}

/// The fields every rank-N reduce layer's parameters have.
protocol ReduceLayerParameters {
    var axisList: [Int] { get }
    var keepDimensions: Bool { get }
    var reduceAll: Bool { get }
}

extension CoreML__Specification__ReduceSumLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMeanLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMaxLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceMinLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceProdLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceL1LayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceL2LayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceSumSquareLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceLogSumLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}

extension CoreML__Specification__ReduceLogSumExpLayerParams: ReduceLayerParameters {
    var axisList: [Int] { scalars(axes, n_axes).map(Int.init) }
    var keepDimensions: Bool { keepdims != 0 }
    var reduceAll: Bool { reduceall != 0 }
}
