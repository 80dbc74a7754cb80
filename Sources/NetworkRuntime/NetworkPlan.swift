import ModelFeatures

/// What one step of a plan computes, with everything fixed once: shapes,
/// resolved padding, weights in the layout their kernel wants.
enum StepKind: Sendable {
    struct Convolution: Sendable {
        var input: (channels: Int, height: Int, width: Int)
        var output: (channels: Int, height: Int, width: Int)
        var padding: (top: Int, right: Int, bottom: Int, left: Int)
        var kernel: (Int, Int)
        var stride: (Int, Int)
        var dilation: (Int, Int)
        var groups: Int
        /// `[out, kH, kW, in per group]` for XNNPACK.
        var weights: [Float]
        var bias: [Float]?
        /// Clamping fused from a following ReLU / clip.
        var outputRange: (Float, Float)
        /// Set for a transposed convolution: the extra rows and columns at the bottom and right.
        var deconvolutionAdjustment: (Int, Int)? = nil
        /// Input and output are channel-last already (no transposes around XNNPACK).
        var channelsLast = false
        /// The convolution prepared on oneDNN, reading the layout `channelsLast`
        /// says; `nil` runs it on XNNPACK (transposed convolutions, and what
        /// oneDNN does not take).
        var prepared: DNNLKernel?
    }

    struct Pooling: Sendable {
        var kind: LayerOperation.Pooling.Kind
        var channels: Int
        var input: (height: Int, width: Int)
        var output: (height: Int, width: Int)
        var kernel: (Int, Int)
        var stride: (Int, Int)
        /// Padding before the first row and column.
        var padTop: Int
        var padLeft: Int
        var excludePadding: Bool
        var channelsLast = false
    }

    case convolution(Convolution)
    /// `prepared`: the layer on oneDNN (set by the plan), else it runs on XNNPACK.
    case fullyConnected(inputs: Int, outputs: Int, rows: Int, weights: [Float], bias: [Float]?, outputRange: (Float, Float),
                        prepared: DNNLKernel? = nil)
    case channelAffine(scale: [Float], shift: [Float], channels: Int, plane: Int, channelsLast: Bool = false)
    case activation(LayerOperation.Activation, channels: Int, plane: Int, channelsLast: Bool = false)
    /// Between channel-first [C, H, W] and channel-last [H, W, C] storage.
    case layoutChange(toChannelsLast: Bool, channels: Int, plane: Int)
    case pooling(Pooling)
    case softmax(outer: Int, axis: Int, inner: Int)
    /// The same elements under another shape: `count` of them.
    case copy(count: Int)
    case flattenChannelLast(channels: Int, plane: Int)
    case elementwise(Elementwise, alpha: Float?, inputShapes: [[Int]], outputShape: [Int])
    case concat(parts: [Int], outer: Int, inner: Int)
    /// `batch` products; `aMatrices[i]` / `bMatrices[i]` say which matrix of
    /// each operand the i-th product reads (batch dimensions broadcast).
    case matmul(batch: Int, m: Int, k: Int, n: Int, transposeA: Bool, transposeB: Bool, weights: [Float]?, bias: [Float]?,
                aMatrices: [Int], bMatrices: [Int])
    /// A step over one `[C, H, W]` item run for each of `count` items of a
    /// batch: input `i` of item `b` starts at `b × inputStrides[i]` and holds
    /// `inputSizes[i]` floats (a stride of 0 shares one item), the output of
    /// item `b` starts at `b × outputSize`.
    indirect case batched(StepKind, count: Int, inputSizes: [Int], inputStrides: [Int], outputSize: Int)

    enum Elementwise: Sendable { case add, multiply, average, maximum, minimum, subtract, divide, power }

    /// output[i] = input[indices[i]], or `constant` where the index is -1.
    case gather(indices: [Int32], constant: Float)
    case upsampleBilinear(channels: Int, input: (Int, Int), output: (Int, Int), mode: LayerOperation.UpsampleMode)
    /// y = x × scale + bias, each of shape (c, h, w) with ones broadcast over `input`.
    case scaleBias(scale: [Float]?, scaleShape: [Int], bias: [Float]?, biasShape: [Int], input: [Int])
    case unary(LayerOperation.Unary, scale: Float, shift: Float, epsilon: Float)
    case l2Normalize(epsilon: Float, count: Int)
    case lrn(alpha: Float, beta: Float, size: Int, k: Float, channels: Int, plane: Int)
    case meanVarianceNormalize(acrossChannels: Bool, normalizeVariance: Bool, epsilon: Float, channels: Int, plane: Int)
    case reduce(LayerOperation.ReduceMode, outer: Int, axis: Int, inner: Int, epsilon: Float)
    case embedding(inputDim: Int, outputs: Int, rows: Int, weights: [Float], bias: [Float]?)
    case constant([Float])
    case dot(cosine: Bool, count: Int)
    case layerNorm(rows: Int, size: Int, gamma: [Float]?, beta: [Float]?, epsilon: Float)
    case truncate
    case instanceNorm(channels: Int, plane: Int, gamma: [Float], beta: [Float], epsilon: Float)
    /// Reduces each run of `axis` elements of the input read through `table`.
    case reduceGathered(LayerOperation.ReduceMode, table: [Int32], axis: Int)
}

/// One step: its kind, where it reads and where it writes (arena slots).
struct PlanStep: Sendable {
    let layer: String
    let kind: StepKind
    let inputs: [Int]
    let output: Int
}

/// The plan for one set of input shapes: steps in order, every value's shape,
/// and an arena of slots that values share once they are dead. Made once per
/// input shape and immutable afterwards.
struct NetworkPlan: Sendable {
    let steps: [PlanStep]
    /// Floats each arena slot holds.
    let slotSizes: [Int]
    let shapes: [String: [Int]]
    let slots: [String: Int]
    /// The largest channel-last scratch a convolution needs (input and output), in floats.
    let scratch: (input: Int, output: Int)
    /// For each value the engine reads, the value holding it channel-first.
    let exported: [String: String]

    /// The layers whose weights only their prepared kernel holds now: emptied
    /// in the graph as each was prepared, so the weights never exist twice.
    let parked: [String: DNNLKernel]

    /// Works out shapes, fuses activations into the layer before them when
    /// that layer's output is used only there, prepares convolutions and
    /// fully connected layers on oneDNN for `threads` threads (emptying their
    /// weights in `graph`, see `parked`), and assigns slots.
    init(graph: inout NetworkGraph, inputShapes: [String: [Int]], keep: Set<String>, threads: Int) throws(RuntimeError) {
        var shapes = inputShapes
        var kinds: [(layer: String, kind: StepKind, inputs: [String], output: String)] = []
        var uses: [String: Int] = [:]
        for node in graph.nodes { for input in node.inputs { uses[input, default: 0] += 1 } }

        var scratchIn = 0, scratchOut = 0
        var nodeIndex = 0
        while nodeIndex < graph.nodes.count {
            let node = graph.nodes[nodeIndex]
            nodeIndex += 1
            var inputShapesOfNode: [[Int]] = []
            for input in node.inputs {
                guard let shape = shapes[input] else {
                    throw .invalidParameters(model: "layer \"\(node.name)\" (\(node.kind))", detail: "input \"\(input)\" is not produced by any earlier layer or input")
                }
                inputShapesOfNode.append(shape)
            }
            let produced = try ShapeRules(node: node, inputs: inputShapesOfNode).steps()
            guard produced.count == node.outputs.count, let outputName = node.outputs.first else {
                throw .invalidParameters(model: "layer \"\(node.name)\" (\(node.kind))", detail: "\(node.outputs.count) outputs, the layer makes \(produced.count)")
            }
            if produced.count > 1 {
                for ((kind, shape), output) in zip(produced, node.outputs) {
                    shapes[output] = shape
                    kinds.append((node.name, kind, node.inputs, output))
                }
                continue
            }
            var (kind, shape) = produced[0]
            var output = outputName
            // Fuse a following ReLU or clip into a convolution or inner product.
            if nodeIndex < graph.nodes.count, uses[outputName] == 1, !keep.contains(outputName) {
                let next = graph.nodes[nodeIndex]
                if next.inputs == [outputName], next.outputs.count == 1, case .activation(let activation) = next.operation,
                   let range = Self.clampRange(activation), kind.acceptsOutputRange {
                    kind = kind.withOutputRange(range)
                    output = next.outputs[0]
                    nodeIndex += 1
                }
            }
            shapes[output] = shape
            kinds.append((node.name, kind, node.inputs, output))
        }

        var layouts = LayoutPass(shapes: shapes)
        kinds = layouts.run(kinds, keep: keep)
        shapes = layouts.shapes
        exported = layouts.exported
        // Convolutions and fully connected layers are prepared on oneDNN now
        // that their layouts are known. A layer that is one prepared step
        // gives its weights up to the kernel there and then.
        var stepsOfLayer: [String: Int] = [:]
        for step in kinds { stepsOfLayer[step.layer, default: 0] += 1 }
        var parked: [String: DNNLKernel] = [:]
        for index in kinds.indices {
            switch kinds[index].kind {
            // A prepared layer keeps only oneDNN's copy of its weights.
            case .convolution(var conv):
                conv.prepared = DNNLKernel.convolution(conv, threads: threads)
                if conv.prepared != nil { conv.weights = [] }
                kinds[index].kind = .convolution(conv)
            case .fullyConnected(let inputs, let outputs, let rows, let weights, let bias, let range, _):
                let prepared = DNNLKernel.fullyConnected(inputs: inputs, outputs: outputs, rows: rows, weights: weights, bias: bias,
                                                         outputRange: range, threads: threads)
                kinds[index].kind = .fullyConnected(inputs: inputs, outputs: outputs, rows: rows, weights: prepared == nil ? weights : [],
                                                    bias: bias, outputRange: range, prepared: prepared)
            default:
                break
            }
            // Emptied layer by layer, not at the end, so that at no point are
            // all the weights held twice.
            let layer = kinds[index].layer
            if let kernel = kinds[index].kind.prepared, stepsOfLayer[layer] == 1, graph.holdsPreparableWeights(layer) {
                parked[layer] = kernel
                graph.replaceWeights([layer: []])
            }
        }
        for step in kinds {
            if case .convolution(let conv) = step.kind.unbatched, !conv.channelsLast, conv.prepared == nil {
                scratchIn = max(scratchIn, conv.input.channels * conv.input.height * conv.input.width)
                scratchOut = max(scratchOut, conv.output.channels * conv.output.height * conv.output.width)
            }
        }

        // Slots: a value's slot is free again after the last step reading it.
        var lastUse: [String: Int] = [:]
        for (index, step) in kinds.enumerated() { for input in step.inputs { lastUse[input] = index } }
        var slotSizes: [Int] = []
        var free: [Int] = []
        var slots: [String: Int] = [:]
        func assign(_ name: String) {
            let size = max(1, shapes[name]?.reduce(1, *) ?? 1)
            if let position = free.indices.min(by: { abs(slotSizes[free[$0]] - size) < abs(slotSizes[free[$1]] - size) }) {
                let slot = free.remove(at: position)
                slotSizes[slot] = max(slotSizes[slot], size)
                slots[name] = slot
            } else {
                slots[name] = slotSizes.count
                slotSizes.append(size)
            }
        }
        for name in inputShapes.keys.sorted() { assign(name) }
        var steps: [PlanStep] = []
        for (index, step) in kinds.enumerated() {
            assign(step.output)
            steps.append(PlanStep(layer: step.layer, kind: step.kind,
                                  inputs: step.inputs.compactMap { slots[$0] }, output: slots[step.output] ?? 0))
            for input in Set(step.inputs) where lastUse[input] == index && !keep.contains(input) {
                if let slot = slots[input], slot != slots[step.output] { free.append(slot) }
            }
        }
        self.parked = parked
        self.steps = steps
        self.slotSizes = slotSizes
        self.shapes = shapes
        self.slots = slots
        scratch = (scratchIn, scratchOut)
    }

    private static func clampRange(_ activation: LayerOperation.Activation) -> (Float, Float)? {
        switch activation {
        case .relu: (0, .infinity)
        case .clip(let low, let high): (low, high)
        default: nil
        }
    }
}

extension StepKind {
    /// The step one item of a batched step runs (the step itself otherwise).
    var unbatched: StepKind {
        if case .batched(let inner, _, _, _, _) = self { return inner.unbatched }
        return self
    }

    var acceptsOutputRange: Bool {
        switch self {
        case .convolution, .fullyConnected: true
        default: false
        }
    }

    func withOutputRange(_ range: (Float, Float)) -> StepKind {
        switch self {
        case .convolution(var conv):
            conv.outputRange = (max(conv.outputRange.0, range.0), min(conv.outputRange.1, range.1))
            return .convolution(conv)
        case .fullyConnected(let inputs, let outputs, let rows, let weights, let bias, let current, _):
            return .fullyConnected(inputs: inputs, outputs: outputs, rows: rows, weights: weights, bias: bias,
                                   outputRange: (max(current.0, range.0), min(current.1, range.1)))
        default:
            return self
        }
    }
}
