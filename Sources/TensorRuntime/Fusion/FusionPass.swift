/// Rewrites a function's block before any plan is made: chains of
/// operations that one kernel computes at once (a convolution with its bias,
/// activation and residual sum; a batch norm folded into the weights before
/// it) become one fused operation, registered in `OperationRegistry` like
/// any other.
///
/// A rule looks at one operation (its anchor) and the ones around it, and
/// rewrites through `FusionGraph`, which keeps the invariants every rule
/// relies on: a value read anywhere else (another operation, a nested
/// block, the block's outputs) is never fused away, and the values the
/// program names keep their names. Rules apply to the top-level block only,
/// in order, each until it changes nothing more.
///
/// Adding a rule is adding one entry to `rules` (a family's rules live in
/// their own file).
enum FusionPass {
    /// Every rule, in the order they run.
    static let rules: [FusionRule] = ConvolutionFusion.rules + ProductFusion.rules + AttentionFusion.rules + StateFusion.rules
        + DecoderFusion.rules

    /// `block` with `rules` applied.
    static func run(_ block: GraphBlock, rules: [FusionRule] = FusionPass.rules) -> GraphBlock {
        var graph = FusionGraph(block)
        for rule in rules {
            var changed = true
            while changed {
                changed = false
                var index = 0
                while index < graph.count {
                    if graph.operation(at: index) != nil, rule.rewrite(&graph, index) { changed = true }
                    index += 1
                }
            }
        }
        return graph.block
    }
}

/// One fusion: tries to rewrite the graph at the operation at an index,
/// returning whether it did.
struct FusionRule: Sendable {
    /// What the rule fuses, for tests and profiles (`conv + bias`).
    let name: String
    let rewrite: @Sendable (inout FusionGraph, Int) -> Bool

    init(_ name: String, rewrite: @escaping @Sendable (inout FusionGraph, Int) -> Bool) {
        self.name = name
        self.rewrite = rewrite
    }
}

/// A block under rewriting: its operations by index (removed ones are
/// `nil` until the end), who reads each value, and its constants.
struct FusionGraph {
    private var operations: [GraphOperation?]
    /// Constants by name (`const` operations), as the block holds them.
    private(set) var constants: [String: Tensor]
    private let inputs: [(name: String, type: ValueType)]
    private let outputs: [String]
    /// For each value name: the indices of the operations reading it (once per argument).
    private var readers: [String: [Int]] = [:]
    /// For each value name: the index of the operation computing it.
    private var producers: [String: Int] = [:]
    /// Values nested blocks read from outside (never fused away).
    private var readByNestedBlocks: Set<String> = []

    init(_ block: GraphBlock) {
        operations = block.operations
        constants = block.constants
        inputs = block.inputs
        outputs = block.outputs
        index()
    }

    /// The block with every rewrite made.
    /// Constants no operation reads any more (weights a fusion replaced) are dropped.
    var block: GraphBlock {
        let read = Set(readers.keys).union(readByNestedBlocks).union(outputs)
        return GraphBlock(inputs: inputs, operations: operations.compactMap { $0 }, outputs: outputs,
                          constants: constants.filter { read.contains($0.key) })
    }

    /// The number of operation slots (removed ones included).
    var count: Int { operations.count }

    /// The operation at `index`, `nil` if a rewrite removed it.
    func operation(at index: Int) -> GraphOperation? {
        index >= 0 && index < operations.count ? operations[index] : nil
    }

    /// The index of the operation computing `name` (`nil` for inputs and constants).
    func producer(of name: String) -> Int? { producers[name] }

    /// The indices of the operations reading `name`.
    func readers(of name: String) -> [Int] { readers[name] ?? [] }

    /// Whether `name` is read by exactly one argument of one operation and by
    /// nothing else (not a block output, not read by a nested block): a
    /// value a fusion may make disappear.
    func isPrivate(_ name: String) -> Bool {
        readers(of: name).count == 1 && !outputs.contains(name) && !readByNestedBlocks.contains(name)
    }

    /// Whether `name` is read by the operations at `indices` only (once each) and is no output of the block.
    static func readersAre(_ graph: FusionGraph, _ name: String, _ indices: [Int]) -> Bool {
        graph.readers(of: name).sorted() == indices.sorted() && !graph.outputs.contains(name) && !graph.readByNestedBlocks.contains(name)
    }

    /// The operation computing argument `key` of `op` (of `type`, when given),
    /// when `op` is its only reader and it has one output and no nested block:
    /// what a rule may fuse into `op`.
    func privateProducer(of op: GraphOperation, _ key: String, type: String? = nil) -> (index: Int, op: GraphOperation)? {
        guard let name = computed(op, key), isPrivate(name), let index = producer(of: name), let producer = operation(at: index),
              type.map({ producer.type == $0 }) ?? true, producer.outputs.count == 1, producer.blocks.isEmpty
        else { return nil }
        return (index, producer)
    }

    /// The only reader of `name` when `isPrivate(name)`.
    func onlyReader(of name: String) -> Int? {
        isPrivate(name) ? readers(of: name).first : nil
    }

    /// The constant an argument holds: given inline, or naming a constant.
    func constant(_ argument: GraphArgument?) -> Tensor? {
        switch argument {
        case .constant(let tensor)?: tensor
        case .value(let name)?: constants[name]
        case nil: nil
        }
    }

    /// The constant parameter `key` of `op`.
    func constant(_ op: GraphOperation, _ key: String) -> Tensor? { constant(op.arguments[key]?.first) }

    /// The value name parameter `key` of `op` reads, if it reads a computed value (not a constant).
    func computed(_ op: GraphOperation, _ key: String) -> String? {
        guard case .value(let name)? = op.arguments[key]?.first, constants[name] == nil else { return nil }
        return name
    }

    /// Replaces the operations at `indices` with `fused`, placed where the
    /// last of them was (so everything they read is computed before it).
    /// The caller has checked that the values only these operations read
    /// are private to them; `fused` must compute every other output they had
    /// under its name.
    mutating func replace(_ indices: [Int], with fused: GraphOperation) {
        guard let last = indices.max() else { return }
        for index in indices { operations[index] = nil }
        operations[last] = fused
        index()
    }

    /// Puts `op` in place of the operation at `index` (same position).
    mutating func update(_ index: Int, to op: GraphOperation) {
        operations[index] = op
        self.index()
    }

    /// Adds or replaces constant `name`.
    mutating func setConstant(_ name: String, _ tensor: Tensor) {
        constants[name] = tensor
    }

    private mutating func index() {
        readers = [:]
        producers = [:]
        readByNestedBlocks = []
        for (position, op) in operations.enumerated() {
            guard let op else { continue }
            for arguments in op.arguments.values {
                for case .value(let name) in arguments { readers[name, default: []].append(position) }
            }
            for output in op.outputs { producers[output.name] = position }
            for nested in op.blocks { Self.collectReads(of: nested, into: &readByNestedBlocks) }
        }
    }

    private static func collectReads(of block: GraphBlock, into names: inout Set<String>) {
        for op in block.operations {
            for arguments in op.arguments.values {
                for case .value(let name) in arguments { names.insert(name) }
            }
            for nested in op.blocks { collectReads(of: nested, into: &names) }
        }
        names.formUnion(block.outputs)
    }
}
