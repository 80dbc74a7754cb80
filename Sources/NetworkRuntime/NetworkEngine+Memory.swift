import ModelFeatures

extension NetworkEngine {
    /// Bytes the engine holds now: the graph's decoded weights; each plan's
    /// prepared weights (re-laid out for their kernels, oneDNN's reordered
    /// ones included; a buffer the plan shares with the graph counted once);
    /// and every prediction state made
    /// for a plan, idle or running (`NetworkPlan.stateBytes`). It grows as
    /// plans are made for new input shapes and as concurrent predictions need
    /// more states, and never shrinks while the engine lives.
    public var residentBytes: Int {
        var bytes = ResidentBytes()
        for node in graph.withLock({ $0.graph.nodes }) {
            for parameter in node.operation.parameters { bytes.add(parameter) }
        }
        for entry in plans.withLock({ Array($0.values) }) {
            for step in entry.plan.steps {
                for parameter in step.kind.parameters { bytes.add(parameter) }
                if let prepared = step.kind.prepared { bytes.add(bytes: prepared.preparedBytes) }
                if case .gather(let indices, _) = step.kind.unbatched { bytes.add(indices) }
            }
            bytes.add(bytes: entry.statesMade.load(ordering: .relaxed) * entry.plan.stateBytes)
        }
        return bytes.total
    }
}

extension NetworkPlan {
    /// Bytes one prediction state for this plan holds: the arena's slots, the
    /// convolutions' channel-last scratch, its oneDNN scratchpads, and its
    /// XNNPACK operators' packed weights (counted as the weights and biases
    /// they pack; XNNPACK's own padding and bookkeeping are not counted).
    var stateBytes: Int {
        var floats = slotSizes.reduce(0, +) + max(1, scratch.input) + max(1, scratch.output)
        var bytes = 0
        for step in steps {
            switch step.kind.unbatched {
            case .convolution(let conv) where conv.prepared == nil: floats += conv.weights.count + (conv.bias?.count ?? 0)
            case .fullyConnected(_, _, _, let weights, let bias, _, nil): floats += weights.count + (bias?.count ?? 0)
            default: break
            }
            bytes += step.kind.prepared?.scratchpadBytes ?? 0
        }
        return floats * MemoryLayout<Float>.stride + bytes
    }
}

extension LayerOperation {
    /// The parameter arrays a layer holds: weights, biases, constants.
    var parameters: [[Float]?] {
        switch self {
        case .convolution(let conv): [conv.weights, conv.bias]
        case .innerProduct(_, _, let weights, let bias): [weights, bias]
        case .channelAffine(let scale, let shift): [scale, shift]
        case .activation(let activation): activation.parameters
        case .batchedMatMul(_, _, let weights, _, _, let bias): [weights, bias]
        case .scaleBias(let scale, _, let bias, _): [scale, bias]
        case .embedding(_, _, let weights, let bias): [weights, bias]
        case .embeddingND(_, _, let weights, let bias): [weights, bias]
        case .loadConstant(_, let values): [values]
        default: []
        }
    }
}

extension LayerOperation.Activation {
    /// Per-channel parameters (PReLU, parametric softplus).
    var parameters: [[Float]?] {
        switch self {
        case .prelu(let alpha): [alpha]
        case .parametricSoftplus(let alpha, let beta): [alpha, beta]
        default: []
        }
    }
}

extension StepKind {
    /// The step's layer as prepared on oneDNN, if it was.
    var prepared: DNNLKernel? {
        switch self {
        case .convolution(let conv): conv.prepared
        case .fullyConnected(_, _, _, _, _, _, let prepared): prepared
        default: nil
        }
    }

    /// The float parameter arrays a step holds.
    var parameters: [[Float]?] {
        switch self {
        case .convolution(let conv): [conv.weights, conv.bias]
        case .fullyConnected(_, _, _, let weights, let bias, _, _): [weights, bias]
        case .channelAffine(let scale, let shift, _, _, _): [scale, shift]
        case .activation(let activation, _, _, _): activation.parameters
        case .matmul(_, _, _, _, _, _, let weights, let bias, _, _): [weights, bias]
        case .batched(let inner, _, _, _, _): inner.parameters
        case .scaleBias(let scale, _, let bias, _, _): [scale, bias]
        case .layerNorm(_, _, let gamma, let beta, _): [gamma, beta]
        case .instanceNorm(_, _, let gamma, let beta, _): [gamma, beta]
        case .embedding(_, _, _, let weights, let bias): [weights, bias]
        case .constant(let values): [values]
        default: []
        }
    }
}
