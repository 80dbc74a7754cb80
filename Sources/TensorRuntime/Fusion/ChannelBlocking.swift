/// Chooses, after `ChannelsLastLayout`, which channels-last convolutions
/// compute in channel blocks: `[N, C/w, H, W, w]`, oneDNN's `nChw8c` or
/// `nChw16c`. Where oneDNN runs its AVX2 kernels, blocks of 8, the layout
/// those kernels are written for: ResNet-18's 3×3 convolutions ran 2 %
/// (56×56×64) to 9 % (7×7×512) faster in blocks than channels-last, its
/// 1×1 ones 2–4 % slower (oneDNN 2.6, `jit:avx2`, one thread). Where it
/// runs its AVX-512 kernels, blocks of 16, the only layout its Winograd
/// kernels read: a 3×3 stride-1 convolution takes about half the time of
/// its direct kernel (`DNNLConvolution.winogradShape`), other 3×3 ones
/// 8–26 % more than channels-last, 1×1 ones about the same. oneDNN has no
/// kernel that reads one layout and writes the other, so a `channel_blocks`
/// conversion goes wherever a value crosses between them.
///
/// Convolutions joined by the values they pass one another (input or
/// residual) form groups. A group computes in blocks when what its
/// convolutions gain outweighs its conversions: each value entering it from
/// elsewhere once, each value it makes that anything else reads once. A
/// ResNet's body is one group with two conversions; a DenseNet layer's two
/// convolutions between channel concatenations, or a MobileNet's pointwise
/// convolutions between depthwise ones, stay channels-last. A value in
/// blocks is named `NAME#blocked`; the channels-last name stays for what
/// reads that layout.
///
/// Runs on the top-level block, by default where oneDNN runs its AVX2 or
/// its AVX-512 kernels.
enum ChannelBlocking {
    static let suffix = "#blocked"
    /// The block widths a blocked image may have.
    static let widths = [8, 16]

    /// Channels per block here: 16 where oneDNN runs its AVX-512 kernels,
    /// 8 elsewhere; tests choose with `chosenWidth`.
    static var width: Int { chosenWidth ?? machineWidth }

    /// The width tests choose (the pass's mechanics hold at either on any machine).
    @TaskLocal static var chosenWidth: Int? = nil

    private static let machineWidth = DNNL.runsAVX512Kernels ? 16 : 8

    /// Whether the pass runs; `nil` (the default) where oneDNN runs AVX2 or AVX-512 kernels. Tests set it.
    @TaskLocal static var enabled: Bool? = nil

    /// Nanoseconds a 3×3 or larger convolution saves per multiply-add in
    /// blocks of 8: 5 % of one at 90 GFLOP/s (45 multiply-adds a nanosecond).
    static let savedPerMultiplyAdd = 0.05 / 45
    /// Nanoseconds a 1×1 convolution loses per multiply-add in blocks of 8 (3 %).
    static let lostPerPointwiseMultiplyAdd = 0.03 / 45
    /// Nanoseconds oneDNN's Winograd saves per multiply-add of the direct
    /// convolution in blocks of 16 (AVX-512, one thread: 1.7 ps at 7×7×512,
    /// 3.5–4.3 ps at 14×14 to 56×56), with `winogradMinimumOutputs` or more.
    static let winogradSavedPerMultiplyAdd = 0.003
    /// Output channels below which Winograd is not counted a gain: with 32
    /// (DenseNet's 3×3 convolutions) it saved 2–3 ps a multiply-add on one
    /// thread, and at two, each thread's 16 channels transforming the whole
    /// input, DenseNet-121 ran 2–3 % slower in blocks than channels-last.
    static let winogradMinimumOutputs = 64
    /// Nanoseconds a direct 3×3 or larger convolution loses per multiply-add
    /// in blocks of 16 (AVX-512, one thread: 0.6–1.75 ps, ResNet-18's strided
    /// 3×3 ones and 7×7×512).
    static let lostPerMultiplyAddIn16 = 0.001
    /// Nanoseconds a conversion takes per element (oneDNN's reorder of
    /// 56×56×64 and ×256 channels-last images into blocks: 0.34–0.48).
    static let conversionPerElement = 0.45

    /// `block` (a function's, whose inputs are `inputs`) with the convolutions that gain from it in channel blocks.
    static func run(_ block: GraphBlock, inputs: [(name: String, type: ValueType)] = []) -> GraphBlock {
        guard enabled ?? (DNNL.runsAVX2Kernels || DNNL.runsAVX512Kernels), DNNL.isAvailable else { return block }
        let blocked = chosen(block, inputs: inputs)
        guard !blocked.isEmpty else { return block }
        return rewritten(block, blocking: blocked)
    }

    /// A convolution that can compute in blocks, with what it reads and writes.
    struct Candidate {
        var index: Int
        /// Its input and its residual (if any): channels-last values.
        var reads: [String]
        var output: String
        var multiplyAdds: Int
        var pointwise: Bool
        var outputChannels: Int
        /// Runs as our Winograd F(2×2, 3×3) (`WinogradConvolution`), as fast in either layout.
        var winograd: Bool = false
        /// Runs as oneDNN's Winograd in blocks of 16, as a direct convolution channels-last.
        var dnnlWinograd: Bool = false

        /// Nanoseconds saved in blocks of `width` (negative: lost).
        func gain(width: Int) -> Double {
            let count = Double(multiplyAdds)
            if width == WinogradConvolution.blockWidth {
                return winograd ? 0 : count * (pointwise ? -lostPerPointwiseMultiplyAdd : savedPerMultiplyAdd)
            }
            if dnnlWinograd { return outputChannels >= winogradMinimumOutputs ? count * winogradSavedPerMultiplyAdd : 0 }
            return pointwise ? 0 : -count * lostPerMultiplyAddIn16
        }
    }

    /// The indices of the operations of `block` that compute in blocks.
    static func chosen(_ block: GraphBlock, inputs: [(name: String, type: ValueType)] = []) -> Set<Int> {
        let uses = Uses(block, inputs: inputs)
        let producer = uses.producer, readers = uses.readers
        let shapes = uses.types.compactMapValues(known)
        let candidates = candidates(block, inputs: inputs, shapes: shapes)
        // Groups: convolutions joined by a value one makes and another reads.
        var parent = Dictionary(uniqueKeysWithValues: candidates.keys.map { ($0, $0) })
        func root(_ index: Int) -> Int {
            var index = index
            while let up = parent[index], up != index { index = up }
            return index
        }
        for candidate in candidates.values {
            for name in candidate.reads {
                if let source = producer[name], candidates[source] != nil { parent[root(source)] = root(candidate.index) }
            }
        }
        var groups: [Int: [Candidate]] = [:]
        for candidate in candidates.values { groups[root(candidate.index), default: []].append(candidate) }

        var result: Set<Int> = []
        for members in groups.values {
            let indices = Set(members.map(\.index))
            let gain = members.reduce(0.0) { $0 + $1.gain(width: width) }
            var crossing: Set<String> = []
            for member in members {
                for name in member.reads where !(producer[name].map(indices.contains) ?? false) { crossing.insert(name) }
                if !(readers[member.output] ?? []).isSubset(of: indices) { crossing.insert(member.output) }
            }
            let cost = Double(crossing.reduce(0) { $0 + (shapes[$1]?.reduce(1, *) ?? 0) }) * conversionPerElement
            if gain > cost { result.formUnion(indices) }
        }
        return result
    }

    /// The operations of `block` that can compute in blocks, by index.
    static func candidates(_ block: GraphBlock, inputs: [(name: String, type: ValueType)] = [],
                           shapes: [String: [Int]]? = nil) -> [Int: Candidate] {
        let shapes = shapes ?? Uses(block, inputs: inputs).types.compactMapValues(known)
        var result: [Int: Candidate] = [:]
        for (index, op) in block.operations.enumerated() {
            if let candidate = candidate(op, index: index, shapes: shapes, constants: block.constants) { result[index] = candidate }
        }
        return result
    }

    /// The dimensions of `type` when every one is known.
    static func known(_ type: ValueType) -> [Int]? {
        guard let shape = type.shape else { return nil }
        let dims = shape.compactMap { $0 }
        return dims.count == shape.count ? dims : nil
    }

    /// Which operation of a block makes each value, which read it (the
    /// block's result as -1; an operation reading it in a nested block too),
    /// and each value's type: as declared, and for the layout changes
    /// `ChannelsLastLayout` adds, from their input's.
    struct Uses {
        var producer: [String: Int] = [:]
        var readers: [String: Set<Int>] = [:]
        var types: [String: ValueType] = [:]

        init(_ block: GraphBlock, inputs: [(name: String, type: ValueType)] = []) {
            for input in block.inputs + inputs { types[input.name] = input.type }
            for (index, op) in block.operations.enumerated() {
                for output in op.outputs {
                    producer[output.name] = index
                    types[output.name] = output.type
                }
                if op.type == "layout_transpose", op.outputs.count == 1, op.outputs[0].type.shape == nil,
                   case .value(let x)? = op.arguments["x"]?.first, let shape = types[x]?.shape, shape.count == 4,
                   case .constant(let flag)? = op.arguments["channels_last"]?.first {
                    let order = (flag.scalar ?? 0) != 0 ? [0, 2, 3, 1] : [0, 3, 1, 2]
                    types[op.outputs[0].name]?.shape = order.map { shape[$0] }
                }
                for arguments in op.arguments.values {
                    for case .value(let name) in arguments { readers[name, default: []].insert(index) }
                }
                for inner in op.blocks {
                    for name in inner.valuesRead { readers[name, default: []].insert(index) }
                }
            }
            for name in block.outputs { readers[name, default: []].insert(-1) }
        }
    }

    /// `op` as a candidate: a channels-last 2-D convolution, one group,
    /// no dilation, channels in whole blocks, at most one residual, every
    /// post-operation one oneDNN applies, all shapes known.
    static func candidate(_ op: GraphOperation, index: Int, shapes: [String: [Int]], constants: [String: Tensor]) -> Candidate? {
        func constant(_ key: String) -> Tensor? {
            switch op.arguments[key]?.first {
            case .constant(let tensor)?: tensor
            case .value(let name)?: constants[name]
            case nil: nil
            }
        }
        guard op.type == "fused_conv", op.blocks.isEmpty, op.outputs.count == 1, (constant("channels_last")?.scalar ?? 0) != 0,
              case .value(let x)? = op.arguments["x"]?.first, constants[x] == nil,
              let input = shapes[x], input.count == 4, let output = shapes[op.outputs[0].name], output.count == 4,
              let weight = constant("weight")?.shape, weight.count == 4, weight[1] == input[3], weight[0] == output[3],
              input[3] % width == 0, output[3] % width == 0,
              (constant("groups")?.scalar ?? 1) == 1, (constant("dilations")?.ints ?? []).allSatisfy({ $0 == 1 })
        else { return nil }
        var reads = [x]
        let residuals = op.arguments["residuals"] ?? []
        guard residuals.count <= 1 else { return nil }
        for argument in residuals {
            guard case .value(let name) = argument, constants[name] == nil, shapes[name] == output else { return nil }
            reads.append(name)
        }
        let kinds = constant("activations")?.strings ?? []
        let alphas = constant("alphas")?.floats ?? [], betas = constant("betas")?.floats ?? []
        guard alphas.count == kinds.count, betas.count == kinds.count,
              kinds.indices.allSatisfy({ kinds[$0] == "add" || DNNLConvolution.steps(kind: kinds[$0], alpha: alphas[$0], beta: betas[$0]) != nil })
        else { return nil }
        let taps = weight[2] * weight[3]
        let strides = constant("strides")?.ints ?? [1, 1]
        let winograd = width == WinogradConvolution.blockWidth
            && WinogradConvolution.applies(kernel: Array(weight[2...]), strides: strides, dilations: [1, 1],
                                           groups: 1, inputs: input[3], outputs: output[3], output: [output[1], output[2]])
        // oneDNN is asked with the padding that centres the kernel (the plan asks again with the convolution's own).
        let centred = (0..<2).map { axis -> Int in
            let stride = strides.count == 2 ? strides[axis] : 1
            let reach = (output[axis + 1] - 1) * stride + weight[axis + 2]
            return max(0, (reach - input[axis + 1]) / 2)
        }
        let geometry = DNNLConvolution.Geometry(input: [input[0], input[3], input[1], input[2]], output: [output[0], output[3], output[1], output[2]],
                                                weightShape: weight, groups: 1, strides: strides, dilations: [1, 1], padBefore: centred,
                                                channelsLast: false, channelBlock: width)
        return Candidate(index: index, reads: reads, output: op.outputs[0].name, multiplyAdds: output.reduce(1, *) * input[3] * taps,
                         pointwise: taps == 1, outputChannels: output[3], winograd: winograd, dnnlWinograd: width != WinogradConvolution.blockWidth && DNNLConvolution.runsWinograd(geometry))
    }

    /// `block` with the operations at `blocking` computing in channel
    /// blocks and a `channel_blocks` conversion where a value crosses layouts:
    /// into blocks just before the first blocked reader, out of blocks just
    /// after the blocked operation that makes a value something else reads.
    static func rewritten(_ block: GraphBlock, blocking: Set<Int>) -> GraphBlock {
        let uses = Uses(block)
        let readers = uses.readers, types = uses.types
        var operations: [GraphOperation] = []
        var inBlocks: [String: String] = [:]
        for (index, op) in block.operations.enumerated() {
            guard blocking.contains(index) else {
                operations.append(op)
                continue
            }
            var result = op
            for key in ["x", "residuals"] {
                for (position, argument) in (op.arguments[key] ?? []).enumerated() {
                    guard case .value(let name) = argument else { continue }
                    if inBlocks[name] == nil {
                        let target = name + suffix
                        operations.append(conversion(from: name, to: target, type: blocks(of: types[name]), toBlocks: true))
                        inBlocks[name] = target
                    }
                    result.arguments[key]?[position] = .value(inBlocks[name] ?? name)
                }
            }
            result.arguments["channels_last"] = nil
            result.arguments["channel_blocked"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
            if result.origin == nil { result.origin = (op.name, op.type) }
            let name = op.outputs[0].name, target = name + suffix
            result.outputs[0] = (target, blocks(of: op.outputs[0].type))
            inBlocks[name] = target
            operations.append(result)
            if !(readers[name] ?? []).isSubset(of: blocking) {
                operations.append(conversion(from: target, to: name, type: op.outputs[0].type, toBlocks: false))
            }
        }
        return GraphBlock(inputs: block.inputs, operations: operations, outputs: block.outputs, constants: block.constants)
    }

    /// A channels-last `[N, H, W, C]` type in blocks: `[N, C/w, H, W, w]`.
    static func blocks(of type: ValueType?) -> ValueType {
        var result = type ?? ValueType(element: .float32, shape: nil)
        if let shape = result.shape, shape.count == 4 {
            result.shape = [shape[0], shape[3].map { $0 / width }, shape[1], shape[2], width]
        }
        return result
    }

    static func conversion(from source: String, to target: String, type: ValueType, toBlocks: Bool) -> GraphOperation {
        GraphOperation(type: "channel_blocks",
                       arguments: ["x": [.value(source)], "to_blocks": [.constant(Tensor(ints: [toBlocks ? 1 : 0], shape: [], type: .bool))],
                                   "width": [.constant(Tensor(ints: [Int32(width)], shape: []))]],
                       outputs: [(target, type)], blocks: [])
    }
}
