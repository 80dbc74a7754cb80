import ModelFeatures

/// How one MIL operation is planned: the parameters it takes, and a function
/// that states its outputs' types and shapes for concrete inputs and adds
/// the kernel that computes them (picked by the inputs' data types).
///
/// Adding an operation is adding one entry to a family's `definitions`.
struct OperationDefinition: Sendable {
    /// Every parameter name the operation takes, across the opsets.
    let parameters: Set<String>
    /// Whether running it has an effect beyond its outputs (states): never folded.
    var hasEffects = false
    let plan: @Sendable (OperationContext) throws(RuntimeError) -> Void

    init(_ parameters: [String], hasEffects: Bool = false, plan: @escaping @Sendable (OperationContext) throws(RuntimeError) -> Void) {
        self.parameters = Set(parameters)
        self.hasEffects = hasEffects
        self.plan = plan
    }
}

/// Every operation the tensor engine runs, by name: the MIL operations a
/// program file may name, and the internal ones the engine makes itself
/// (fused and layout operations of the plan's passes, helpers of the
/// network lowering), which a file may not name.
enum OperationRegistry {
    /// Every family's operations. A name defined twice is a programming error
    /// found at the first use of the registry (and by `OperationCoverageTests`).
    static let definitions: [String: OperationDefinition] = {
        let (all, duplicates) = merged(families)
        precondition(duplicates.isEmpty, "operations defined twice: \(duplicates.sorted())")
        return all
    }()

    static let families: [[String: OperationDefinition]] = [
        ElementwiseOperations.definitions, ActivationOperations.definitions, ReductionOperations.definitions,
        ShapeOperations.definitions, IndexingOperations.definitions, LinearAlgebraOperations.definitions, AttentionOperations.definitions,
        NormalizationOperations.definitions, ConvolutionOperations.definitions, ChannelsLastOperations.definitions,
        ConstexprOperations.definitions, StateOperations.definitions, ResamplingOperations.definitions, SamplingOperations.definitions,
        RearrangementOperations.definitions, ControlFlowOperations.definitions, RecurrentOperations.definitions,
        RandomOperations.definitions, ListOperations.definitions, DetectionOperations.definitions, classify,
    ]

    /// The families' operations in one table, and the names more than one family defines.
    static func merged(_ families: [[String: OperationDefinition]]) -> (all: [String: OperationDefinition], duplicates: Set<String>) {
        var all: [String: OperationDefinition] = [:], duplicates = Set<String>()
        for family in families {
            for (name, definition) in family {
                if all.updateValue(definition, forKey: name) != nil { duplicates.insert(name) }
            }
        }
        return (all, duplicates)
    }

    /// Operations only the engine makes: the plan's fusions and layouts
    /// (`fused_*`, `channel_*`, `layout_transpose`, `spatial_mean`), state
    /// views of the state fusion, and the network lowering's helpers. A
    /// program file naming one is refused as an operation modelc does not run.
    static let internalOperations: Set<String> = [
        "at_least_rank1", "channel_affine", "channel_blocks", "channel_mul", "fused_attention", "fused_conv", "fused_linear",
        "layout_transpose", "read_state_view", "spatial_mean", "update_state_slice",
    ]

    /// Parameters only the engine's layout passes set on public operations
    /// (`max_pool`'s `channels_last`, …); a file giving one is refused.
    static let internalParameters: Set<String> = ["channels_last", "channel_blocked"]

    /// `classify` ends a classifier: the planner reads it (probabilities and labels), no kernel runs.
    private static let classify: [String: OperationDefinition] = [
        "classify": OperationDefinition(["probabilities", "classes"]) { context throws(RuntimeError) in
            throw context.unsupported("classify must be the program's last operation")
        },
    ]

    /// Refuses an operation of a program file that modelc does not run (internal ones included), or
    /// a parameter it does not know (internal ones included).
    static func check(_ op: GraphOperation) throws(RuntimeError) {
        guard let definition = definitions[op.type], !internalOperations.contains(op.type) else {
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "modelc does not run this ML program operation yet")
        }
        for key in op.arguments.keys.sorted() where !definition.parameters.contains(key) || internalParameters.contains(key) {
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "parameter \"\(key)\" is not one modelc knows for this operation")
        }
    }
}
