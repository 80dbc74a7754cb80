/// Decides where values are stored channel-last: the output of every
/// convolution (XNNPACK's layout), and of the steps after it that do not care
/// about the order (activations, per-channel affine, pooling, same-shape
/// elementwise, channel softmax). A step that needs channel-first order gets a
/// layout change inserted before it, once per value; the values the engine
/// reads are given back channel-first.
struct LayoutPass {
    typealias Step = (layer: String, kind: StepKind, inputs: [String], output: String)

    private(set) var shapes: [String: [Int]]
    /// Values stored channel-last.
    private var channelsLast: Set<String> = []
    /// Converted copies made so far: (value, to channel-last) → name.
    private var converted: [String: String] = [:]
    private(set) var exported: [String: String] = [:]

    init(shapes: [String: [Int]]) {
        self.shapes = shapes
    }

    /// (C, H, W) of a value, leading dimensions folded into C.
    private func chw(_ name: String) -> (Int, Int, Int) { channelsHeightWidth(shapes[name] ?? []) }

    /// Whether both orders are the same bytes (one channel, or one pixel).
    private func orderFree(_ name: String) -> Bool {
        let (c, h, w) = chw(name)
        return c == 1 || h * w == 1
    }

    private func isLast(_ name: String) -> Bool { channelsLast.contains(name) && !orderFree(name) }

    /// `name` stored as asked, inserting a layout change when needed.
    private mutating func ensure(_ name: String, last: Bool, into steps: inout [Step], layer: String) -> String {
        if orderFree(name) || isLast(name) == last { return name }
        let key = name + (last ? "@channels-last" : "@channels-first")
        if converted[key] == nil {
            let (c, h, w) = chw(name)
            shapes[key] = shapes[name]
            steps.append((layer, .layoutChange(toChannelsLast: last, channels: c, plane: h * w), [name], key))
            if last { channelsLast.insert(key) }
            converted[key] = key
        }
        return key
    }

    mutating func run(_ input: [Step], keep: Set<String>) -> [Step] {
        var steps: [Step] = []
        for step in input {
            var kind = step.kind
            var inputs = step.inputs
            var outputLast = false
            switch kind {
            case .convolution(var conv):
                inputs[0] = ensure(inputs[0], last: true, into: &steps, layer: step.layer)
                conv.channelsLast = true
                kind = .convolution(conv)
                outputLast = true
            case .pooling(var pooling):
                pooling.channelsLast = isLast(inputs[0])
                kind = .pooling(pooling)
                outputLast = pooling.channelsLast
            case .channelAffine(let scale, let shift, let channels, let plane, _):
                outputLast = isLast(inputs[0])
                kind = .channelAffine(scale: scale, shift: shift, channels: channels, plane: plane, channelsLast: outputLast)
            case .activation(let activation, let channels, let plane, _):
                outputLast = isLast(inputs[0])
                kind = .activation(activation, channels: channels, plane: plane, channelsLast: outputLast)
            case .softmax(let outer, let axis, let inner) where isLast(inputs[0]):
                let (c, h, w) = chw(inputs[0])
                if outer == 1, axis == c, inner == h * w {
                    kind = .softmax(outer: h * w, axis: c, inner: 1)
                    outputLast = true
                } else {
                    inputs[0] = ensure(inputs[0], last: false, into: &steps, layer: step.layer)
                }
            case .elementwise(_, _, let inputShapes, let outputShape)
                where inputShapes.allSatisfy({ $0.reduce(1, *) == outputShape.reduce(1, *) }) && inputs.contains(where: isLast):
                // Same-shape elementwise works on either order, as long as all inputs share it.
                inputs = inputs.map { ensure($0, last: true, into: &steps, layer: step.layer) }
                outputLast = true
            case .copy where isLast(inputs[0]):
                // A reshape that keeps (C, H, W) keeps the order; others need channel-first.
                let sameBlob = chw(inputs[0]) == chw(step.output)
                if sameBlob { outputLast = true } else { inputs[0] = ensure(inputs[0], last: false, into: &steps, layer: step.layer) }
            default:
                inputs = inputs.map { ensure($0, last: false, into: &steps, layer: step.layer) }
            }
            steps.append((step.layer, kind, inputs, step.output))
            if outputLast { channelsLast.insert(step.output) }
        }
        for name in keep.sorted() where shapes[name] != nil {
            exported[name] = ensure(name, last: false, into: &steps, layer: "output")
        }
        return steps
    }
}
