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

/// Every operation the tensor engine runs, by MIL name.
enum OperationRegistry {
    static let definitions: [String: OperationDefinition] = {
        var all: [String: OperationDefinition] = [:]
        for family in [ElementwiseOperations.definitions, ActivationOperations.definitions, ReductionOperations.definitions,
                       ShapeOperations.definitions, IndexingOperations.definitions, LinearAlgebraOperations.definitions, AttentionOperations.definitions,
                       NormalizationOperations.definitions, ConvolutionOperations.definitions, ConstexprOperations.definitions,
                       StateOperations.definitions, ResamplingOperations.definitions, SamplingOperations.definitions, RearrangementOperations.definitions, ControlFlowOperations.definitions, RecurrentOperations.definitions, RandomOperations.definitions, ListOperations.definitions, DetectionOperations.definitions, classify] {
            all.merge(family) { first, _ in first }
        }
        return all
    }()

    /// `classify` ends a classifier: the planner reads it (probabilities and labels), no kernel runs.
    private static let classify: [String: OperationDefinition] = [
        "classify": OperationDefinition(["probabilities", "classes"]) { context throws(RuntimeError) in
            throw context.unsupported("classify must be the program's last operation")
        },
    ]

    /// Refuses an operation modelc does not run, or a parameter it does not know.
    static func check(_ op: GraphOperation) throws(RuntimeError) {
        guard let definition = definitions[op.type] else {
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "modelc does not run this ML program operation yet")
        }
        for key in op.arguments.keys.sorted() where !definition.parameters.contains(key) {
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: "parameter \"\(key)\" is not one modelc knows for this operation")
        }
    }
}
