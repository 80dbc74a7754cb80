/// An ML program read into plain values: what to compute, not how.
///
/// Functions hold a block of operations; values are named, typed tensors
/// whose dimensions may be unknown until a plan is made for concrete input
/// shapes. Constants (`const` operations and immediate arguments) are kept as
/// `Tensor`s beside the operations.
struct ProgramGraph: Sendable {
    var functions: [String: GraphFunction]
    /// The function run when none is named (`main`, or the model's default).
    var defaultFunction: String
}

struct GraphFunction: Sendable {
    var name: String
    /// The inputs in declaration order, with their declared types.
    var inputs: [(name: String, type: ValueType)]
    var block: GraphBlock
}

struct GraphBlock: Sendable {
    /// Values a nested block receives (loop variables).
    var inputs: [(name: String, type: ValueType)] = []
    var operations: [GraphOperation]
    /// The names of the values the block returns.
    var outputs: [String]
    /// Constants by name: `const` operations and folded `constexpr_*` results.
    var constants: [String: Tensor]

    /// Every value name the block reads: its operations' arguments, its
    /// nested blocks' (at any depth) and its outputs.
    var valuesRead: Set<String> {
        var names = Set(outputs)
        for op in operations {
            for arguments in op.arguments.values {
                for case .value(let name) in arguments { names.insert(name) }
            }
            for inner in op.blocks { names.formUnion(inner.valuesRead) }
        }
        return names
    }
}

/// One argument of an operation: a named value, or a constant given inline.
enum GraphArgument: Sendable {
    case value(String)
    case constant(Tensor)
}

struct GraphOperation: Sendable {
    var type: String
    /// Arguments by parameter name; variadic parameters (`concat`'s `values`) hold several.
    var arguments: [String: [GraphArgument]]
    var outputs: [(name: String, type: ValueType)]
    var blocks: [GraphBlock]
    /// The program's operation a rewrite (a fusion, a layout change) made
    /// this one from: messages name it, not the rewritten form.
    var origin: (name: String, type: String)? = nil

    /// The operation's name: its first output.
    var name: String { outputs.first?.name ?? type }
    /// The name messages use: the program's operation this one came from.
    var reportedName: String { origin?.name ?? name }
    /// The type messages use: the program's operation this one came from.
    var reportedType: String { origin?.type ?? type }

    /// This operation, remembered as the program's `source` (or what `source` came from).
    func rewritten(from source: GraphOperation) -> GraphOperation {
        var result = self
        result.origin = source.origin ?? (source.name, source.type)
        return result
    }
}
