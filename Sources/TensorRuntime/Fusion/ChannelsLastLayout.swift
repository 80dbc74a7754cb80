/// Chooses the layout of a program's 2-D image tensors: convolutions and
/// pooling on oneDNN run fastest on `[N, H, W, C]` (its jit kernels; on
/// `[N, C, H, W]` it falls back to image-to-column products), so chains of
/// them, and the elementwise operations, channel concatenations, per-channel
/// normalizations and spatial reductions between them, compute their values
/// channels-last. A `layout_transpose` converts at the edges only: where a
/// value enters such a chain, and where an operation that needs MIL's layout
/// (or the function's result) reads one.
///
/// A value computed channels-last is named `NAME#channels_last`; its MIL
/// layout keeps the program's name `NAME` and exists only if something reads
/// it. Runs after the fusions, on the top-level block, and only when oneDNN
/// is there.
enum ChannelsLastLayout {
    static let suffix = "#channels_last"

    /// MIL's axis → the channels-last axis, for rank 4.
    static let axisMap = [0, 3, 1, 2]

    /// `block` (a function's, whose inputs are `inputs`) with its layout chosen.
    static func run(_ block: GraphBlock, inputs: [(name: String, type: ValueType)] = []) -> GraphBlock {
        guard DNNL.isAvailable else { return block }
        var pass = Pass(block: block, inputs: inputs)
        pass.rewrite()
        return pass.result
    }

    private struct Pass {
        let block: GraphBlock
        var operations: [GraphOperation] = []
        var constants: [String: Tensor]
        /// Values with a channels-last version, by MIL name.
        var channelsLast: [String: String] = [:]
        /// Values computed channels-last only (their MIL layout not made yet).
        var missing: Set<String> = []
        var result: GraphBlock { GraphBlock(inputs: block.inputs, operations: operations, outputs: block.outputs, constants: constants) }
        /// Rank of each computed value, when declared.
        var ranks: [String: Int] = [:]
        /// Element type of each computed value.
        var elements: [String: ElementType] = [:]

        init(block: GraphBlock, inputs: [(name: String, type: ValueType)]) {
            self.block = block
            constants = block.constants
            for input in block.inputs + inputs {
                ranks[input.name] = input.type.shape?.count
                elements[input.name] = input.type.element
            }
        }

        mutating func rewrite() {
            let changed = Self.candidates(block)
            guard changed else {
                operations = block.operations
                return
            }
            for op in block.operations {
                for output in op.outputs {
                    ranks[output.name] = output.type.shape?.count
                    elements[output.name] = output.type.element
                }
                if let converted = convert(op) {
                    operations.append(converted)
                } else {
                    operations.append(restore(op))
                }
            }
            for name in block.outputs { restoreValue(name) }
        }

        /// Whether the block has a convolution this pass would lay out channels-last at all.
        static func candidates(_ block: GraphBlock) -> Bool {
            block.operations.contains { op in
                ["conv", "fused_conv"].contains(op.type) && op.outputs.first?.type.shape?.count == 4
            }
        }

        // MARK: Values

        func isConstant(_ argument: GraphArgument) -> Tensor? {
            switch argument {
            case .constant(let tensor): tensor
            case .value(let name): constants[name]
            }
        }

        /// The channels-last name of `name`, adding its transpose if it has none yet.
        mutating func channelsLastValue(_ name: String) -> String {
            if let existing = channelsLast[name] { return existing }
            let target = name + ChannelsLastLayout.suffix
            operations.append(transpose(from: name, to: target, toChannelsLast: true))
            channelsLast[name] = target
            elements[target] = elements[name]
            return target
        }

        /// Makes the MIL layout of `name` if it was computed channels-last only.
        mutating func restoreValue(_ name: String) {
            guard missing.contains(name), let source = channelsLast[name] else { return }
            operations.append(transpose(from: source, to: name, toChannelsLast: false))
            missing.remove(name)
        }

        func transpose(from source: String, to target: String, toChannelsLast: Bool) -> GraphOperation {
            GraphOperation(type: "layout_transpose",
                           arguments: ["x": [.value(source)], "channels_last": [.constant(Tensor(ints: [toChannelsLast ? 1 : 0], shape: [], type: .bool))]],
                           outputs: [(target, ValueType(element: elements[source] ?? .float32, shape: nil))], blocks: [])
        }

        /// `op` reading the MIL layout of every value it (and its nested blocks) reads.
        mutating func restore(_ op: GraphOperation) -> GraphOperation {
            for arguments in op.arguments.values {
                for case .value(let name) in arguments { restoreValue(name) }
            }
            let nested = op.blocks.reduce(into: Set<String>()) { $0.formUnion($1.valuesRead) }
            for name in nested.sorted() { restoreValue(name) }
            return op
        }

        /// Marks `op`'s output as computed channels-last under a new name.
        mutating func renameOutput(_ op: inout GraphOperation) {
            let name = op.outputs[0].name
            let target = name + ChannelsLastLayout.suffix
            if op.origin == nil { op.origin = (name, op.type) }
            var type = op.outputs[0].type
            if let shape = type.shape, shape.count == 4 { type.shape = [shape[0], shape[2], shape[3], shape[1]] }
            op.outputs[0] = (target, type)
            channelsLast[name] = target
            elements[target] = type.element
            missing.insert(name)
        }

        /// A constant operand of an elementwise operation, broadcast against
        /// rank-4 tensors: made rank 4 and laid out channels-last.
        static func permuted(_ tensor: Tensor) -> Tensor? {
            guard tensor.shape.count <= 4, tensor.type != .string else { return nil }
            if tensor.count == 1 { return tensor }
            let shape = Array(repeating: 1, count: 4 - tensor.shape.count) + tensor.shape
            let (n, c, h, w) = (shape[0], shape[1], shape[2], shape[3])
            var order: [Int] = []
            order.reserveCapacity(tensor.count)
            for a in 0..<n { for y in 0..<h { for x in 0..<w { for k in 0..<c { order.append(((a * c + k) * h + y) * w + x) } } } }
            let target = [n, h, w, c]
            switch tensor.storage {
            case .floats, .mapped, .packed:
                let values = tensor.floats
                return Tensor(type: tensor.type, shape: target, storage: .floats(order.map { values[$0] }))
            case .ints(let values): return Tensor(type: tensor.type, shape: target, storage: .ints(order.map { values[$0] }))
            case .strings: return nil
            }
        }

        // MARK: Operations

        /// `op` computing channels-last, or `nil` to keep it in MIL's layout.
        /// Operations with a channels-last form of their own each have their rewrite; the others go by their
        /// definition's `LayoutBehavior`.
        mutating func convert(_ op: GraphOperation) -> GraphOperation? {
            let layout = OperationRegistry.definition(op.type)?.layout ?? .fixed
            guard op.blocks.isEmpty, op.outputs.count == 1, op.outputs[0].type.shape?.count == 4 else {
                return layout == .reducesAxes ? reduction(op) : nil
            }
            switch op.type {
            case "conv", "fused_conv": return convolution(op)
            case "max_pool", "avg_pool": return pooling(op)
            case "concat": return concat(op)
            case "batch_norm": return batchNorm(op)
            case "channel_affine": return affine(op)
            default:
                switch layout {
                case .elementwise: return elementwiseOperation(op)
                case .reducesAxes: return reduction(op)
                case .fixed: return nil
                }
            }
        }

        mutating func convolution(_ op: GraphOperation) -> GraphOperation? {
            guard case .value(let x)? = op.arguments["x"]?.first, constants[x] == nil, ranks[x] == 4,
                  let weight = op.arguments["weight"]?.first, isConstant(weight) != nil,
                  op.arguments["bias"]?.first.map({ isConstant($0) != nil }) ?? true
            else { return nil }
            var result = op
            if op.type == "conv" {
                result = op.rewritten(from: op)
                result.type = "fused_conv"
            }
            for (index, argument) in (op.arguments["residuals"] ?? []).enumerated() {
                guard case .value(let name) = argument, ranks[name] == 4 else { return nil }
                result.arguments["residuals"]?[index] = .value(channelsLastValue(name))
            }
            result.arguments["x"] = [.value(channelsLastValue(x))]
            result.arguments["channels_last"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
            renameOutput(&result)
            return result
        }

        mutating func pooling(_ op: GraphOperation) -> GraphOperation? {
            guard case .value(let x)? = op.arguments["x"]?.first, constants[x] == nil, ranks[x] == 4 else { return nil }
            // What oneDNN pools the way MIL does: an average counting padding has no ceil-mode overhang.
            if op.type == "avg_pool" {
                let exclude = op.arguments["exclude_padding_from_average"]?.first.flatMap(isConstant)?.scalar ?? 0
                let ceil = op.arguments["ceil_mode"]?.first.flatMap(isConstant)?.scalar ?? 0
                guard exclude != 0 || ceil == 0 else { return nil }
            }
            guard channelsLast[x] != nil else { return nil }
            var result = op
            result.arguments["x"] = [.value(channelsLastValue(x))]
            result.arguments["channels_last"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
            renameOutput(&result)
            return result
        }

        /// An elementwise operation on channels-last operands: when one
        /// computed operand is channels-last, the other rank-4 ones are transposed to join it.
        mutating func elementwiseOperation(_ op: GraphOperation) -> GraphOperation? {
            // Floats only: a comparison's bool result stays in MIL's layout (layout transposes move floats).
            guard op.outputs[0].type.element.isFloat else { return nil }
            var result = op
            var any = false
            let computed = op.arguments.values.flatMap { $0 }.compactMap { argument -> String? in
                if case .value(let name) = argument, constants[name] == nil { return name }
                return nil
            }
            guard computed.contains(where: { channelsLast[$0] != nil }), computed.allSatisfy({ ranks[$0] == 4 }) else { return nil }
            // Every tensor constant must lay out channels-last too, before any transpose is added.
            for key in ["x", "y"] {
                for argument in op.arguments[key] ?? [] {
                    if let tensor = isConstant(argument), tensor.count != 1, !tensor.type.isFloat || tensor.shape.count > 4 { return nil }
                }
            }
            for (key, arguments) in op.arguments {
                for (index, argument) in arguments.enumerated() {
                    if let tensor = isConstant(argument) {
                        guard ["x", "y"].contains(key) else { continue }
                        if tensor.count == 1 { continue }
                        guard tensor.type.isFloat, let permuted = Self.permuted(tensor) else { return nil }
                        result.arguments[key]?[index] = .constant(permuted)
                        continue
                    }
                    guard case .value(let name) = argument, ranks[name] == 4 else { return nil }
                    result.arguments[key]?[index] = .value(channelsLastValue(name))
                    any = true
                }
            }
            guard any else { return nil }
            if op.type == "mul" { result.type = "channel_mul" }
            renameOutput(&result)
            return result
        }

        mutating func concat(_ op: GraphOperation) -> GraphOperation? {
            guard let axis = op.arguments["axis"]?.first.flatMap(isConstant)?.scalar,
                  (op.arguments["interleave"]?.first.flatMap(isConstant)?.scalar ?? 0) == 0,
                  let values = op.arguments["values"], !values.isEmpty
            else { return nil }
            let resolved = Int(axis) < 0 ? Int(axis) + 4 : Int(axis)
            guard resolved >= 0, resolved < 4 else { return nil }
            // When some operands are channels-last, the others (rank 4) are transposed to join them.
            guard values.contains(where: { if case .value(let name) = $0 { channelsLast[name] != nil } else { false } }) else { return nil }
            var converted: [GraphArgument] = []
            for argument in values {
                guard case .value(let name) = argument, constants[name] == nil, ranks[name] == 4 else { return nil }
                converted.append(.value(channelsLastValue(name)))
            }
            var result = op
            result.arguments["values"] = converted
            result.arguments["axis"] = [.constant(Tensor(ints: [Int32(ChannelsLastLayout.axisMap[resolved])], shape: []))]
            renameOutput(&result)
            return result
        }

        /// A per-channel scale and shift on a channels-last value: the same with `channels_last`.
        mutating func affine(_ op: GraphOperation) -> GraphOperation? {
            guard case .value(let x)? = op.arguments["x"]?.first, let layout = channelsLast[x], ranks[x] == 4, (op.arguments["residuals"] ?? []).isEmpty else { return nil }
            var result = op
            result.arguments["x"] = [.value(layout)]
            result.arguments["channels_last"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
            renameOutput(&result)
            return result
        }

        /// A batch norm with constant statistics on a channels-last value:
        /// a multiply and an add by `[1, 1, 1, C]` constants.
        mutating func batchNorm(_ op: GraphOperation) -> GraphOperation? {
            guard case .value(let x)? = op.arguments["x"]?.first, channelsLast[x] != nil,
                  let mean = op.arguments["mean"]?.first.flatMap(isConstant)?.floats,
                  let variance = op.arguments["variance"]?.first.flatMap(isConstant)?.floats
            else { return nil }
            let channels = mean.count
            let gamma = op.arguments["gamma"]?.first.flatMap(isConstant)?.floats ?? Array(repeating: 1, count: channels)
            let beta = op.arguments["beta"]?.first.flatMap(isConstant)?.floats ?? Array(repeating: 0, count: channels)
            let epsilon = op.arguments["epsilon"]?.first.flatMap(isConstant)?.scalar.map(Float.init) ?? 1e-5
            guard variance.count == channels, gamma.count == channels, beta.count == channels else { return nil }
            // As the batch_norm kernel computes them, in Float.
            let scale = (0..<channels).map { gamma[$0] / (variance[$0] + epsilon).squareRoot() }
            let shift = (0..<channels).map { beta[$0] - mean[$0] * scale[$0] }
            let name = op.outputs[0].name
            var multiply = GraphOperation(type: "mul", arguments: ["x": [.value(channelsLastValue(x))],
                                                                   "y": [.constant(Tensor(floats: scale, shape: [1, 1, 1, channels]))]],
                                          outputs: [(name + "#scaled", op.outputs[0].type)], blocks: [])
            renameOutput(&multiply)
            let scaled = channelsLast[name + "#scaled"] ?? name
            operations.append(multiply)
            var add = GraphOperation(type: "add", arguments: ["x": [.value(scaled)], "y": [.constant(Tensor(floats: shift, shape: [1, 1, 1, channels]))]],
                                     outputs: [(name, op.outputs[0].type)], blocks: [])
            renameOutput(&add)
            return add
        }

        /// A reduction over a channels-last value with its axes remapped:
        /// channels-last with `keep_dims`, MIL's layout when it reduces exactly the spatial axes away.
        mutating func reduction(_ op: GraphOperation) -> GraphOperation? {
            guard case .value(let x)? = op.arguments["x"]?.first, let layout = channelsLast[x], ranks[x] == 4,
                  let axes = op.arguments["axes"]?.first.flatMap(isConstant)?.ints,
                  Set(op.arguments.keys).isSubset(of: ["x", "axes", "keep_dims"])
            else { return nil }
            let keep = (op.arguments["keep_dims"]?.first.flatMap(isConstant)?.scalar ?? 0) != 0
            let resolved = axes.map { $0 < 0 ? $0 + 4 : $0 }
            guard resolved.allSatisfy({ $0 >= 0 && $0 < 4 }) else { return nil }
            var result = op
            result.arguments["x"] = [.value(layout)]
            result.arguments["axes"] = [.constant(Tensor(ints: resolved.map { Int32(ChannelsLastLayout.axisMap[$0]) }, shape: [resolved.count]))]
            if keep {
                if op.type == "reduce_mean", Set(resolved) == [2, 3] {
                    result = GraphOperation(type: "spatial_mean", arguments: ["x": [.value(layout)]], outputs: op.outputs, blocks: [])
                }
                renameOutput(&result)
                return result
            }
            // [N, C] either way when the two spatial axes go.
            guard Set(resolved) == [2, 3] else { return nil }
            return result
        }
    }
}
