import ModelFeatures

/// How one MIL operation is planned: the parameters it takes, and a function
/// that states its outputs' types and shapes for concrete inputs and adds
/// the kernel that computes them (picked by the inputs' data types).
///
/// Adding an operation is adding one entry to a family's `definitions` (or,
/// for one only the engine's passes make, its `internalDefinitions`).
struct OperationDefinition: Sendable {
    /// Every parameter name a program file may give it, across the opsets.
    let parameters: Set<String>
    /// Parameters only the engine's passes set on it (`max_pool`'s `channels_last`); a file giving one is refused.
    let internalParameters: Set<String>
    /// Whether running it has an effect beyond its outputs (states): never folded.
    var hasEffects = false
    /// Whether the plan memo may take its part of the function's last plan where it reads the same inputs: every
    /// operation without effects, and one whose effect leaves its plan a function of its inputs alone (a view of a
    /// state, a write into one at a place read at run time); never random numbers or control flow.
    let replayable: Bool
    /// How its result relates to the layout of its operands (`ChannelsLastLayout`).
    let layout: LayoutBehavior
    /// Operands whose elements its plan never reads (only their type and
    /// shape): its kernel reads them where they lie at run time, so a plan
    /// of it kept for one constant there serves another of the same shape
    /// (`PlanMemo`: a decoder's rotary tables, sliced for each step's position).
    let readAtRunTime: Set<String>
    let plan: @Sendable (OperationContext) throws(RuntimeError) -> Void
    /// Its outputs' facts (element type, rank, dimensions known at load) from
    /// its operands', without planning (`withFacts`; `FactsRules`).
    var outputFacts: FactsRule?

    init(_ parameters: [String], internal internalParameters: [String] = [], hasEffects: Bool = false, replayable: Bool? = nil,
         layout: LayoutBehavior = .fixed, readAtRunTime: [String] = [], plan: @escaping @Sendable (OperationContext) throws(RuntimeError) -> Void) {
        self.parameters = Set(parameters)
        self.internalParameters = Set(internalParameters)
        self.hasEffects = hasEffects
        self.replayable = replayable ?? !hasEffects
        self.layout = layout
        self.readAtRunTime = Set(readAtRunTime)
        self.plan = plan
    }
}

/// How an operation's result relates to the memory layout of its tensor
/// operands: what a pass choosing layouts (`ChannelsLastLayout`) may do with it.
enum LayoutBehavior: Sendable, Equatable {
    /// Reads and writes MIL's layout (the default): operands are given in it.
    case fixed
    /// Elementwise with scalar parameters: laid out any way, as long as every
    /// tensor operand is laid out the same way, it computes the same elements.
    case elementwise
    /// Reduces over the axes its `axes` parameter names: another layout is
    /// the same reduction over the remapped axes.
    case reducesAxes
}

/// One family of operations (elementwise, convolution, states, …): the MIL
/// operations a program file may name, and the internal ones only the
/// engine's own passes make — fusions, layouts, state views, the network
/// lowering's helpers. Either table may be left out (empty).
protocol OperationFamily: Sendable {
    /// The MIL operations of the family a program file may name.
    static var definitions: [String: OperationDefinition] { get }
    /// Operations only the engine makes; a program file naming one is refused.
    static var internalDefinitions: [String: OperationDefinition] { get }
}

extension OperationFamily {
    static var definitions: [String: OperationDefinition] { [:] }
    static var internalDefinitions: [String: OperationDefinition] { [:] }
}

/// Every operation the tensor engine runs, by name, in two registries: the
/// MIL operations a program file may name (`fileOperations`, all `GraphReader`
/// looks in) and the internal ones the engine makes itself
/// (`internalOperations`), which the planner also plans.
///
/// A name is defined once across both: `merged` refuses a second definition,
/// naming both families. The registries are made from `families` at their
/// first use, which stops the process (in every build) if a name is defined
/// twice; `OperationCoverageTests` merges the same families, so the test suite
/// fails first.
enum OperationRegistry {
    /// The registries: what files may name, and what only the engine makes.
    struct Tables: Sendable {
        var fileOperations: [String: OperationDefinition] = [:]
        var internalOperations: [String: OperationDefinition] = [:]
    }

    /// A name two families define (or one family in both its tables): a programming error.
    struct DuplicateOperation: Error, Equatable, CustomStringConvertible {
        let name: String
        /// The tables defining it, `Family.definitions` or `Family.internalDefinitions`, in `families` order.
        let first: String, second: String

        var description: String { "operation \"\(name)\" is defined twice: in \(first) and in \(second)" }
    }

    static let families: [any OperationFamily.Type] = [
        ElementwiseOperations.self, ActivationOperations.self, ReductionOperations.self, ShapeOperations.self,
        IndexingOperations.self, LinearAlgebraOperations.self, AttentionOperations.self, NormalizationOperations.self,
        ConvolutionOperations.self, ChannelsLastOperations.self, ConstexprOperations.self, StateOperations.self,
        ResamplingOperations.self, SamplingOperations.self, RearrangementOperations.self, ControlFlowOperations.self,
        RecurrentOperations.self, RandomOperations.self, ListOperations.self, DetectionOperations.self, ClassifierOperations.self,
        DecoderOperations.self,
    ]

    static let tables: Tables = {
        do throws(DuplicateOperation) {
            return try merged(families)
        } catch {
            preconditionFailure(error.description)
        }
    }()

    /// The MIL operations a program file may name.
    static var fileOperations: [String: OperationDefinition] { tables.fileOperations }
    /// The operations only the engine's passes and the network lowering make.
    static var internalOperations: [String: OperationDefinition] { tables.internalOperations }

    /// The operation the planner plans for `name`, a file's or an internal one.
    static func definition(_ name: String) -> OperationDefinition? {
        tables.fileOperations[name] ?? tables.internalOperations[name]
    }

    /// The facts of `op`'s outputs from its operands' facts (`known`, by
    /// name) and the program's named constants, without planning; `nil`
    /// where its definition has no rule. Where a parameter deciding them is
    /// computed at run time, nothing is known but the declared element types.
    static func outputFacts(of op: GraphOperation, known: @escaping (String) -> ValueType?,
                            constants: @escaping (String) -> Tensor? = { _ in nil }) throws(RuntimeError) -> [ValueType]? {
        guard let rule = definition(op.type)?.outputFacts else { return nil }
        let context = FactsContext(op: op, known: known, constants: constants)
        let facts = try rule(context)
        guard !context.unresolved else { return op.outputs.map { .unknownRank($0.type.element) } }
        return facts
    }

    /// The families' operations in the two registries.
    ///
    /// - Throws: `DuplicateOperation` for the first name defined a second time, naming both tables.
    static func merged(_ families: [any OperationFamily.Type]) throws(DuplicateOperation) -> Tables {
        var tables = Tables(), places: [String: String] = [:]
        for family in families {
            for (table, isInternal) in [(family.definitions, false), (family.internalDefinitions, true)] {
                let place = "\(family).\(isInternal ? "internalDefinitions" : "definitions")"
                for (name, definition) in table.sorted(by: { $0.key < $1.key }) {
                    if let first = places.updateValue(place, forKey: name) {
                        throw DuplicateOperation(name: name, first: first, second: place)
                    }
                    if isInternal {
                        tables.internalOperations[name] = definition
                    } else {
                        tables.fileOperations[name] = definition
                    }
                }
            }
        }
        return tables
    }

    /// Refuses an operation of a program file that modelc does not run or that only the engine makes,
    /// or a parameter it does not know or that only the engine sets.
    static func check(_ op: GraphOperation) throws(RuntimeError) {
        guard let definition = fileOperations[op.type] else {
            let reason = internalOperations[op.type] == nil ? "modelc does not run this ML program operation yet"
                : "an operation internal to modelc's tensor engine, which a program file cannot name"
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: reason)
        }
        for key in op.arguments.keys.sorted() where !definition.parameters.contains(key) {
            let reason = definition.internalParameters.contains(key)
                ? "parameter \"\(key)\" is internal to modelc's tensor engine; a program file cannot set it"
                : "parameter \"\(key)\" is not one modelc knows for this operation"
            throw .unsupportedLayer(layer: op.name, kind: op.type, reason: reason)
        }
    }
}

/// `classify` ends a classifier: the planner reads it (probabilities and labels), no kernel runs.
enum ClassifierOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "classify": OperationDefinition(["probabilities", "classes"]) { context throws(RuntimeError) in
            throw context.unsupported("classify must be the program's last operation")
        },
    ]
}
