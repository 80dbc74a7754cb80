import CoreMLSchema
import ModelFeatures
import ModelSpec

/// Decodes a neural-network layer's `WeightParams` to float32 values, in
/// whatever form they are stored (float32, float16, quantized, in a compiled
/// bundle's weight file). The model runtime hands in its decoder, which reads
/// the bundle this module does not open.
package struct NetworkWeightReader {
    /// `(params, layer, role, channels)` → the values, or `nil` when the params hold none;
    /// `channels` groups per-channel quantization parameters (outermost).
    let decode: (UnsafeMutablePointer<CoreML__Specification__WeightParams>?, String, String, Int) throws(RuntimeError) -> [Float]?

    package init(_ decode: @escaping (UnsafeMutablePointer<CoreML__Specification__WeightParams>?, String, String, Int) throws(RuntimeError) -> [Float]?) {
        self.decode = decode
    }
}

/// A neural network lowered onto the tensor engine's graph: one function of
/// MIL operations computing every blob of the network.
struct LoweredNetwork {
    var function: GraphFunction
    /// Whether inputs are read with NeuralNetwork.proto's rank-5 mapping
    /// (`[C]` and `[C, H, W]` as `[1, 1, C, 1, 1]` and `[1, 1, C, H, W]`)
    /// instead of keeping their rank (`EXACT_ARRAY_MAPPING`, images `[1, C, H, W]`).
    var rank5Inputs: Bool
}

/// Lowers NeuralNetwork.proto layers to MIL operations the registry runs
/// (docs/runtime.md, "Neural networks on the tensor engine").
///
/// Every blob keeps a rank known at load (shapes may stay flexible; the one
/// exception, `openRank`, is a result no layer reads whose rank comes from
/// values): the channel-first layers read the last three dimensions as `[C, H, W]`, every
/// dimension before them being batch (`[Seq, B, C, H, W]`), and run on a
/// `[N, C, H, W]` view the lowering makes with shape arithmetic the planner
/// folds; the ND layers keep the ranks they are given. One function per layer
/// kind, in `NetworkLowering.layers`: adding a layer kind is adding one entry.
enum NetworkLowering {
    typealias Layer = CoreML__Specification__NeuralNetworkLayer
    typealias Lowering = @Sendable (inout LoweringBuilder, Layer) throws(RuntimeError) -> Void

    /// Lowers the network of `model` (a NeuralNetwork, classifier or regressor).
    static func lower(_ model: UnsafePointer<CoreML__Specification__Model>, interface: ModelInterface,
                      weights: NetworkWeightReader) throws(RuntimeError) -> LoweredNetwork {
        let spec = model.pointee
        var layers: [UnsafeMutablePointer<Layer>] = []
        var preprocessors: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkPreprocessing>] = []
        var mapping = CORE_ML__SPECIFICATION__NEURAL_NETWORK_MULTI_ARRAY_SHAPE_MAPPING__RANK5_ARRAY_MAPPING
        var labels: Tensor?
        var probabilities: String?
        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER:
            guard let network = spec.neuralnetworkclassifier?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
            let classifier = NetworkClassifier(network)
            switch classifier.labels {
            case .strings(let names): labels = Tensor(type: .string, shape: [names.count], storage: .strings(names))
            case .int64s(let values): labels = Tensor(ints: values.map { Int32(clamping: $0) }, shape: [values.count])
            }
            probabilities = classifier.probabilities
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            guard let network = spec.neuralnetworkregressor?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
        default:
            guard let network = spec.neuralnetwork?.pointee else { throw .invalidParameters(model: interface.kind, detail: "no network") }
            layers = elements(network.layers, network.n_layers)
            preprocessors = elements(network.preprocessing, network.n_preprocessing)
            mapping = network.arrayinputshapemapping
        }
        let rank5 = mapping != CORE_ML__SPECIFICATION__NEURAL_NETWORK_MULTI_ARRAY_SHAPE_MAPPING__EXACT_ARRAY_MAPPING
        var builder = LoweringBuilder(weights: weights)
        builder.rank5 = rank5
        for description in interface.outputs {
            if case .multiArray(let array) = description.type, !array.shape.isEmpty { builder.declaredOutputRanks[description.name] = array.shape.count }
        }
        var inputs: [(name: String, type: ValueType)] = []
        for description in interface.inputs {
            inputs.append((name: description.name, type: ValueType(element: .float32, shape: nil)))
            // Rank-5 mapping: every input is a [Seq, B, C, H, W] blob.
            let rank: Int
            switch description.type {
            case .image: rank = rank5 ? 5 : 4
            case .multiArray(let array): rank = rank5 ? 5 : max(1, array.shape.count)
            default: rank = rank5 ? 5 : 1
            }
            // A multi-array of fixed shape read as it is declared has every dimension known.
            if !rank5, case .multiArray(let array) = description.type, !array.shape.isEmpty, array.shapeFlexibility == nil {
                builder.facts[description.name] = ValueType(.float32, shape: array.shape.map { Int($0) })
            } else {
                builder.facts[description.name] = ValueType(.float32, rank: rank)
            }
        }
        builder.blobsRead = Self.blobsRead(by: layers).union([probabilities].compactMap { $0 })
        try builder.preprocess(preprocessors, interface: interface)
        for layer in layers {
            try builder.lower(layer.pointee)
        }
        // Blobs the network returns (and the classifier reads) at their rank.
        for name in interface.outputs.map(\.name) + [probabilities].compactMap({ $0 }) { builder.materialize(name) }
        if let labels, let probabilities, let predicted = interface.predictedFeatureName {
            let probabilityOutput = interface.predictedProbabilitiesName ?? probabilities
            builder.operations.append(GraphOperation(
                type: "classify", arguments: ["probabilities": [.value(probabilities)], "classes": [.constant(labels)]],
                outputs: [(name: predicted, type: ValueType(element: labels.type == .string ? .string : .int32, shape: nil)),
                          (name: probabilityOutput, type: ValueType(element: .float32, shape: nil))],
                blocks: []))
        }
        let block = GraphBlock(operations: builder.operations, outputs: interface.outputs.map(\.name), constants: [:])
        return LoweredNetwork(function: GraphFunction(name: "main", inputs: inputs, block: block), rank5Inputs: rank5)
    }

    /// The layer kind's name as NeuralNetwork.proto spells it (`convolution`, `uniDirectionalLSTM`).
    static func kind(of layer: UnsafeMutablePointer<Layer>) -> String {
        layer.pointee.layer_case.rawValue == 0 ? "unset" : MessageView(layer).fieldName(number: layer.pointee.layer_case.rawValue) ?? "unknown"
    }
}

/// An argument of a lowered operation.
enum LoweredArgument {
    case value(String)
    case values([String])
    /// A variadic argument (`concat`'s values) of values and constants.
    case list([LoweredArgument])
    case int(Int)
    case ints([Int])
    case float(Float)
    case floats([Float], shape: [Int])
    case bool(Bool)
    case bools([Bool])
    case string(String)
    case tensor(Tensor)

    var graphArguments: [GraphArgument] {
        switch self {
        case .value(let name): [.value(name)]
        case .values(let names): names.map { .value($0) }
        case .list(let arguments): arguments.flatMap(\.graphArguments)
        case .int(let value): [.constant(Tensor(ints: [Int32(clamping: value)], shape: []))]
        case .ints(let values): [.constant(Tensor(ints: values.map { Int32(clamping: $0) }, shape: [values.count]))]
        case .float(let value): [.constant(Tensor(floats: [value], shape: []))]
        case .floats(let values, let shape): [.constant(Tensor(floats: values, shape: shape))]
        case .bool(let value): [.constant(Tensor(ints: [value ? 1 : 0], shape: [], type: .bool))]
        case .bools(let values): [.constant(Tensor(ints: values.map { $0 ? 1 : 0 }, shape: [values.count], type: .bool))]
        case .string(let value): [.constant(Tensor(type: .string, shape: [], storage: .strings([value])))]
        case .tensor(let tensor): [.constant(tensor)]
        }
    }
}

/// Collects the operations of a network being lowered and the rank of every blob.
struct LoweringBuilder {
    let weights: NetworkWeightReader
    var operations: [GraphOperation] = []
    /// What is known of every blob and value computed so far: element type
    /// (blobs are float32; indices and shape vectors int32), rank, and the
    /// dimensions fixed at load (a shape vector's length is what gives a
    /// `fillDynamic` or a `reshapeDynamic` its rank). The operations'
    /// `outputFacts` compute them.
    var facts: [String: ValueType] = [:]
    /// The first error an operation's facts rule gave in the current layer: thrown when the layer's lowering returns.
    private var factsError: RuntimeError?
    /// Whether the network reads multi-arrays with the rank-5 mapping (`[C, H, W]` blobs).
    var rank5 = false
    /// The ranks the model declares for its multi-array outputs.
    var declaredOutputRanks: [String: Int] = [:]
    /// Every blob some layer of the network reads (nested networks included),
    /// and the probabilities a classifier reads: a blob outside it is only returned.
    var blobsRead: Set<String> = []
    /// For each loop whose body is being lowered, innermost last: the blobs of
    /// its `loopBreak` / `loopContinue` flags, `nil` for a loop holding neither.
    var loopFlags: [LoopFlags?] = []

    /// A loop's flags, `[1]` blobs: `broken` (a `loopBreak` ran: the loop
    /// ends) and `skip` (a `loopBreak` or `loopContinue` ran: the rest of
    /// this iteration's body does not).
    struct LoopFlags {
        let broken: String
        let skip: String
    }
    /// The layer being lowered: its name, kind, inputs and outputs.
    private(set) var name = ""
    private(set) var kind = ""
    private(set) var inputs: [String] = []
    private(set) var outputs: [String] = []
    private var counter = 0
    /// The `[N, C, H, W]` views of rank-5-and-up blobs (see `View`), by blob name.
    private var views: [String: View] = [:]

    /// A blob of rank 5 or more (`[Seq, B, C, H, W]`) seen as `[N, C, H, W]`:
    /// `value` holds its numbers under that shape and `lead` is the int32
    /// vector of its leading dimensions (`[Seq, B]`). Consecutive channel-first
    /// layers run on views (`viewLayers`) so that a convolution's activation,
    /// batch norm and residual sum read the convolution itself (and fuse with
    /// it) and the channels-last chains do not end at every layer. A blob
    /// computed on its view only is `pending`: its rank-5 value is made (a
    /// reshape, which the plan makes an alias) when an operation reads it by
    /// name, or when the network returns it.
    struct View {
        let value: String
        let lead: String
        var pending: Bool
    }

    /// Layers whose result keeps the leading dimensions of their inputs and
    /// depends only on their last three (`[C, H, W]`) — the channel-first
    /// layers, and the elementwise rank-N ones (their operands broadcast
    /// from the right) — the same for a `[Seq, B, C, H, W]` blob and its
    /// `[N, C, H, W]` view: they run on views (`lowerOnViews`).
    static let viewLayers: Set<UInt32> = Set<UInt32>([
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONVOLUTION.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_POOLING.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BATCHNORM.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ACTIVATION.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_ADD.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MULTIPLY.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MAX.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MIN.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_AVERAGE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SPLIT.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_PADDING.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UPSAMPLE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESIZE_BILINEAR.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CROP.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SCALE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BIAS.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_UNARY.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_L2NORMALIZE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LRN.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_MVN.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SLICE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REDUCE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_SOFTMAX.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_FLATTEN.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_RESHAPE.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_INNER_PRODUCT.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_REORGANIZE_DATA.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CLIP.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CLAMPED_RE_LU.rawValue,
    ]).union(NetworkLowering.unaryTypes.keys).union(NetworkLowering.binaryTypes.keys)

    /// Control-flow layers: their blocks see blobs by name only.
    static let blockLayers: Set<UInt32> = [
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_BRANCH.rawValue,
        CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_LOOP.rawValue,
    ]

    init(weights: NetworkWeightReader) {
        self.weights = weights
    }

    mutating func lower(_ layer: NetworkLowering.Layer) throws(RuntimeError) {
        name = text(layer.name)
        var copy = layer
        kind = withUnsafeMutablePointer(to: &copy) { NetworkLowering.kind(of: $0) }
        inputs = strings(layer.input, layer.n_input)
        outputs = strings(layer.output, layer.n_output)
        for input in inputs where facts[input] == nil {
            throw .invalidParameters(model: "layer \"\(name)\" (\(kind))", detail: "reads blob \"\(input)\", which no earlier layer or input gives")
        }
        guard let lowering = NetworkLowering.layers[layer.layer_case.rawValue] else {
            throw unsupported(NetworkLowering.noRuleReason)
        }
        if Self.blockLayers.contains(layer.layer_case.rawValue) {
            flushViews()
            try lowering(&self, layer)
            flushViews()
        } else if Self.viewLayers.contains(layer.layer_case.rawValue), !Self.sequenceConcat(layer), let lead = viewLead() {
            try lowerOnViews(lowering, layer, lead: lead)
        } else {
            try lowering(&self, layer)
        }
        if let factsError {
            self.factsError = nil
            throw factsError
        }
        for output in outputs where facts[output] == nil {
            throw .invalidParameters(model: "layer \"\(name)\" (\(kind))", detail: "computed no blob \"\(output)\"")
        }
    }

    // MARK: Views

    /// Whether `layer` concatenates along the sequence axis (which a view merges into its batch).
    private static func sequenceConcat(_ layer: NetworkLowering.Layer) -> Bool {
        layer.layer_case == CORE_ML__SPECIFICATION__NEURAL_NETWORK_LAYER__LAYER_CONCAT && layer.concat?.pointee.sequenceconcat ?? 0 != 0
    }

    /// The leading-dimensions vector the current layer's inputs share when
    /// it can run on their views: every input of rank 4 or more has the same
    /// rank (5 or more) and a view with that vector (an input without one
    /// gets one when it is the only such input); inputs of rank 3 or less
    /// broadcast over `[C, H, W]` alike in both. `nil` otherwise.
    private mutating func viewLead() -> String? {
        let wide = inputs.filter { rank($0) >= 4 }
        guard let first = wide.first, rank(first) >= 5, wide.allSatisfy({ rank($0) == rank(first) }) else { return nil }
        if views[first] == nil, wide.allSatisfy({ $0 == first }) { makeView(first) }
        guard let lead = views[first]?.lead, wide.allSatisfy({ views[$0]?.lead == lead }) else { return nil }
        return lead
    }

    /// Gives `x` (rank 5 or more, computed by name) its `[N, C, H, W]` view.
    @discardableResult
    private mutating func makeView(_ x: String) -> View {
        let lead = dims(x, 0, -3)
        let flat = reshape(x, to: shape([.literal([-1]), .vector(dims(x, -3))]))
        let view = View(value: flat, lead: lead, pending: false)
        views[x] = view
        return view
    }

    /// Runs `lowering` with the layer's inputs replaced by their views and
    /// its outputs by fresh rank-4 values, which become the views of the
    /// layer's outputs (pending: of the inputs' leading dimensions).
    private mutating func lowerOnViews(_ lowering: NetworkLowering.Lowering, _ layer: NetworkLowering.Layer, lead: String) throws(RuntimeError) {
        let blobInputs = inputs, blobOutputs = outputs
        let blobRank = inputs.map(rank).max() ?? 5
        inputs = inputs.map { views[$0]?.value ?? $0 }
        outputs = outputs.map { _ in fresh() }
        defer { (inputs, outputs) = (blobInputs, blobOutputs) }
        try lowering(&self, layer)
        for (blob, value) in zip(blobOutputs, outputs) {
            guard rank(value) == 4 else { throw invalid("computed \"\(blob)\" on a [N, C, H, W] view with rank \(rank(value))") }
            facts[blob] = ValueType(.float32, rank: blobRank)
            views[blob] = View(value: value, lead: lead, pending: true)
        }
    }

    /// Makes `blob`'s own value from its view if it is pending: its view
    /// reshaped to its leading dimensions and the view's last three.
    mutating func materialize(_ blob: String) {
        guard var view = views[blob], view.pending else { return }
        view.pending = false
        views[blob] = view
        let r = rank(blob)
        let target = shape([.vector(view.lead), .vector(dims(view.value, 1))])
        operations.append(GraphOperation(type: "reshape", arguments: ["x": [.value(view.value)], "shape": [.value(target)]],
                                         outputs: [(name: blob, type: ValueType(element: .float32, shape: Self.declared(rank: r)))], blocks: []))
    }

    /// Makes every pending blob's value and forgets the views (before and
    /// after a control-flow layer, whose blocks read and write blobs by name).
    mutating func flushViews() {
        for blob in views.keys.sorted() { materialize(blob) }
        views = [:]
    }

    /// The shape an operation declares for a result of rank `rank`: the rank
    /// for `[N, C, H, W]` results (so that the channels-last layout sees
    /// them), dimensions unknown until a plan is made; none otherwise.
    static func declared(rank: Int) -> [Int?]? { rank == 4 ? [nil, nil, nil, nil] : nil }

    /// The rank of a blob no layer reads whose rank depends on values computed
    /// at run time (`rank(given:of:)`): nothing in the lowering needs it, and
    /// its operation declares no shape.
    static let openRank = -1

    /// Makes the values of the pending blobs `arguments` read by name.
    private mutating func materializeReads(_ arguments: [String: LoweredArgument]) {
        func names(_ argument: LoweredArgument) -> [String] {
            switch argument {
            case .value(let name): [name]
            case .values(let names): names
            case .list(let arguments): arguments.flatMap(names)
            default: []
            }
        }
        for argument in arguments.values {
            for name in names(argument) where views[name]?.pending == true { materialize(name) }
        }
    }

    /// Forgets the views of blobs an operation redefines.
    private mutating func redefine(_ names: [String]) {
        for name in names { views[name] = nil }
    }

    /// Lowers the layers of a nested network (a branch) into operations of
    /// their own: the operations, the blobs the layers write (in order) and
    /// the facts after them. The builder's operations and current layer are kept.
    mutating func nested(_ network: CoreML__Specification__NeuralNetwork) throws(RuntimeError)
        -> (operations: [GraphOperation], written: [String], facts: [String: ValueType]) {
        let saved = (operations, facts, name, kind, inputs, outputs, views)
        defer { (operations, facts, name, kind, inputs, outputs, views) = saved }
        operations = []
        views = [:]
        var written: [String] = []
        let layers = ModelSpec.elements(network.layers, network.n_layers)
        for (index, layer) in layers.enumerated() {
            try lower(layer.pointee)
            written += outputs
            // After a layer that may end the iteration (a loopBreak, a loopContinue, a branch
            // holding one), the rest of the network runs only while the loop's skip flag is 0.
            if let flags = loopFlags.last ?? nil, index + 1 < layers.count, NetworkLowering.interruptsLoop(layer),
               let first = network.layers {
                var rest = network
                rest.layers = first + (index + 1)
                rest.n_layers = network.n_layers - (index + 1)
                flushViews()
                written += try NetworkLowering.conditional(&self, on: flags.skip, yes: CoreML__Specification__NeuralNetwork(), no: rest)
                break
            }
        }
        flushViews()
        return (operations, written, facts)
    }

    /// Counts `blobs` among the current layer's outputs: the blobs a branch's
    /// or a loop's networks write that are visible after it, so that a loop
    /// or branch around it carries them too.
    mutating func wrote(_ blobs: [String]) {
        outputs += blobs.filter { !outputs.contains($0) }
    }

    /// Sets the innermost loop's flags to 1: `skip`, and `broken` too when
    /// `breaking` (`loopBreak`; `loopContinue` sets `skip` only). They are
    /// the layer's outputs, so a branch holding it passes them on.
    mutating func setLoopFlags(breaking: Bool) throws(RuntimeError) {
        guard let flags = loopFlags.last ?? nil else { throw invalid("outside the body network of a loop") }
        let names = breaking ? [flags.broken, flags.skip] : [flags.skip]
        for name in names { op("fill", ["shape": .ints([1]), "value": .float(1)], into: name) }
        wrote(names)
    }

    // MARK: Errors

    /// The layer cannot run as given (exit 94 at load).
    func unsupported(_ reason: String) -> RuntimeError { .unsupportedLayer(layer: name, kind: kind, reason: reason) }

    /// The layer's parameters contradict each other or its inputs.
    func invalid(_ detail: String) -> RuntimeError { .invalidParameters(model: "layer \"\(name)\" (\(kind))", detail: detail) }

    // MARK: Blobs

    /// The layer's input `index`.
    func input(_ index: Int = 0) throws(RuntimeError) -> String {
        guard index < inputs.count else { throw invalid("needs input \(index + 1), it has \(inputs.count)") }
        return inputs[index]
    }

    /// The layer's output `index`.
    func output(_ index: Int = 0) throws(RuntimeError) -> String {
        guard index < outputs.count else { throw invalid("needs output \(index + 1), it has \(outputs.count)") }
        return outputs[index]
    }

    /// The rank of a blob or value; `openRank` where it waits for values computed at run time.
    func rank(_ blob: String) -> Int {
        guard let known = facts[blob] else { return 1 }
        return known.rank ?? Self.openRank
    }

    /// The element type of a value the lowering made (blobs the network reads or writes are float32).
    func element(_ value: String) -> ElementType { facts[value]?.element ?? .float32 }

    /// The length of a vector known at load (a `getShape`, a constant, an input of fixed size, their arithmetic).
    func length(_ value: String) -> Int? {
        guard let known = facts[value], known.rank == 1 else { return nil }
        return known.dimension(0)
    }

    /// A name for an intermediate value of the current layer.
    mutating func fresh() -> String {
        counter += 1
        return "\(name)#\(counter)"
    }

    // MARK: Operations

    /// The facts of `operation`'s results from its definition's rule and what is known so far. Apart from
    /// `op`, so that the table the rule reads is let go before `op` adds to it (no copy of it per operation).
    private func derivedFacts(of operation: GraphOperation) throws(RuntimeError) -> [ValueType] {
        let known = facts
        guard let derived = try OperationRegistry.outputFacts(of: operation, known: { known[$0] }) else {
            throw unsupported("the lowering makes a \(operation.type), whose definition gives no facts of its results")
        }
        guard derived.count == operation.outputs.count else {
            throw invalid("\(operation.type) gives \(derived.count) results, the lowering names \(operation.outputs.count)")
        }
        return derived
    }

    /// Adds a MIL operation with one output (named `output`, or a fresh
    /// name); its output's name. Its element type and rank are the
    /// operation's `outputFacts`; `rank` is used only where those leave the
    /// rank to values computed at run time (the rank the model declares).
    @discardableResult
    mutating func op(_ type: String, _ arguments: [String: LoweredArgument], into output: String? = nil, rank: Int? = nil) -> String {
        op(type, arguments, outputs: [output ?? fresh()], ranks: rank.map { [$0] })[0]
    }

    /// Adds a MIL operation with several outputs; their names.
    @discardableResult
    mutating func op(_ type: String, _ arguments: [String: LoweredArgument], outputs names: [String], ranks hints: [Int]? = nil) -> [String] {
        materializeReads(arguments)
        var operation = GraphOperation(type: type, arguments: arguments.mapValues(\.graphArguments),
                                       outputs: names.map { (name: $0, type: ValueType(element: .float32, shape: nil)) }, blocks: [])
        var results: [ValueType] = []
        do throws(RuntimeError) {
            results = try derivedFacts(of: operation)
        } catch {
            factsError = factsError ?? error
            results = names.map { _ in .unknownRank(.float32) }
        }
        for index in results.indices where results[index].rank == nil {
            if let hint = hints?[index], hint != Self.openRank { results[index] = ValueType(results[index].element, rank: hint) }
        }
        for (index, result) in results.enumerated() {
            operation.outputs[index].type = ValueType(element: result.element, shape: result.rank.flatMap(Self.declared(rank:)))
        }
        operations.append(operation)
        redefine(names)
        for (name, result) in zip(names, results) { facts[name] = result }
        return names
    }

    /// `x` as float32 (NeuralNetwork.proto blobs are float32 whatever an operation computes).
    @discardableResult
    mutating func toFloat(_ x: String, into output: String? = nil) -> String {
        op("cast", ["x": .value(x), "dtype": .string("fp32")], into: output)
    }

    /// `x` as int32 (indices), truncated toward zero.
    mutating func toInt(_ x: String) -> String {
        op("cast", ["x": .value(x), "dtype": .string("int32")])
    }

    /// A copy of `x` under the name `output` (a layer whose output only renames its input).
    mutating func identity(_ x: String, into output: String) {
        op("identity", ["x": .value(x)], into: output)
    }

    /// The dimensions `begin..<end` of `x`'s shape (negative counts from the
    /// end), as an int32 vector the planner knows once shapes are.
    mutating func dims(_ x: String, _ begin: Int, _ end: Int? = nil) -> String {
        let shape = op("shape", ["x": .value(x)])
        let r = rank(x)
        let from = begin < 0 ? max(0, begin + r) : min(begin, r)
        let to = end.map { $0 < 0 ? max(0, $0 + r) : min($0, r) } ?? r
        return op("slice_by_index", ["x": .value(shape), "begin": .ints([from]), "end": .ints([to])])
    }

    /// Joins int32 vectors (and literal dimensions) into one shape vector.
    mutating func shape(_ parts: [ShapePart]) -> String {
        let arguments: [LoweredArgument] = parts.map { part in
            switch part {
            case .vector(let name): .value(name)
            case .literal(let values): .ints(values)
            }
        }
        if arguments.count == 1, case .vector(let name) = parts[0] { return name }
        return op("concat", ["values": .list(arguments), "axis": .int(0)])
    }

    enum ShapePart {
        case vector(String)
        case literal([Int])
    }

    /// `x` reshaped to the shape vector `shape` (its length the result's rank;
    /// `rank` where that length waits for values computed at run time).
    mutating func reshape(_ x: String, to shape: String, rank: Int? = nil, into output: String? = nil) -> String {
        op("reshape", ["x": .value(x), "shape": .value(shape)], into: output, rank: rank)
    }

    /// `x` reshaped to literal dimensions (0 copies, -1 infers).
    mutating func reshape(_ x: String, _ dims: [Int], into output: String? = nil) -> String {
        op("reshape", ["x": .value(x), "shape": .ints(dims)], into: output)
    }

    // MARK: Channel-first layers

    /// `x` seen as `[N, C, H, W]` (NeuralNetwork.proto's channel-first rule:
    /// the last three dimensions are C, H, W, missing ones count as 1, every
    /// dimension before them is batch), and the way back for a result of the
    /// same leading dimensions.
    mutating func batched(_ x: String) -> (value: String, restore: (inout LoweringBuilder, String, String?) -> String) {
        let r = rank(x)
        switch r {
        case 4:
            return (x, { builder, y, output in
                guard let output else { return y }
                // The operation that just computed `y` computes `output` instead (no copy).
                if y != x, let last = builder.operations.indices.last, builder.operations[last].outputs.count == 1,
                   builder.operations[last].outputs[0].name == y {
                    builder.operations[last].outputs[0].name = output
                    builder.redefine([output])
                    builder.facts[output] = builder.facts[y]
                    return output
                }
                builder.identity(y, into: output)
                return output
            })
        case ..<4:
            let value = op("expand_dims", ["x": .value(x), "axes": .ints(Array(0..<(4 - r)))])
            let keep = max(r, 3)
            return (value, { builder, y, output in
                builder.op("squeeze", ["x": .value(y), "axes": .ints(Array(0..<(4 - keep)))], into: output)
            })
        default:
            let view = views[x] ?? makeView(x)
            let (flat, lead) = (view.value, view.lead)
            return (flat, { builder, y, output in
                let yTail = builder.dims(y, 1)
                return builder.reshape(y, to: builder.shape([.vector(lead), .vector(yTail)]), into: output)
            })
        }
    }

    /// Runs `body` on `x` as `[N, C, H, W]` and names the result `output`, of `x`'s leading dimensions.
    mutating func channelFirst(_ x: String, into output: String,
                               _ body: (inout LoweringBuilder, String) throws(RuntimeError) -> String) throws(RuntimeError) {
        let (value, restore) = batched(x)
        let y = try body(&self, value)
        _ = restore(&self, y, output)
    }

    /// The channel-first rank of a result: at least 3.
    func channelRank(_ x: String) -> Int { max(rank(x), 3) }

    /// `x` with at least three dimensions (leading 1s added): the `[..., C, H, W]` view.
    mutating func atLeastRank3(_ x: String) -> String {
        let r = rank(x)
        guard r < 3 else { return x }
        return op("expand_dims", ["x": .value(x), "axes": .ints(Array(0..<(3 - r)))])
    }

    // MARK: Weights

    /// The values of a weight the layer requires, `count` of them.
    func weights(_ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>?, _ role: String, count: Int,
                 channels: Int = 1) throws(RuntimeError) -> [Float] {
        guard var values = try weights.decode(params, name, role, channels) else { throw invalid("\(role) has no values") }
        // Sub-byte codes fill their last byte with padding bits.
        if values.count > count, values.count - count < 8, params?.pointee.n_floatvalue == 0 { values.removeLast(values.count - count) }
        guard values.count == count else { throw invalid("\(role) holds \(values.count) values, expected \(count)") }
        return values
    }

    /// The values of a weight, if it holds any.
    func optionalWeights(_ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>?, _ role: String) throws(RuntimeError) -> [Float]? {
        guard let values = try weights.decode(params, name, role, 1), !values.isEmpty else { return nil }
        return values
    }

    // MARK: Preprocessing

    /// Image inputs scaled, biased per channel and the mean image subtracted, in place of the input.
    mutating func preprocess(_ preprocessors: [UnsafeMutablePointer<CoreML__Specification__NeuralNetworkPreprocessing>],
                             interface: ModelInterface) throws(RuntimeError) {
        name = "preprocessing"
        kind = "preprocessing"
        for preprocessor in preprocessors {
            var feature = text(preprocessor.pointee.featurename)
            if feature.isEmpty, let image = interface.inputs.first(where: { if case .image = $0.type { true } else { false } }) {
                feature = image.name
            }
            guard let description = interface.inputs.first(where: { $0.name == feature }) else { continue }
            let space: ImageColorSpace = if case .image(let type) = description.type { type.space } else { .rgb }
            let gray = space.isGrayscale
            let r = rank(feature)
            let channelShape = Array(repeating: 1, count: max(0, r - 3)) + [gray ? 1 : 3, 1, 1]
            if preprocessor.pointee.preprocessor_case == CORE_ML__SPECIFICATION__NEURAL_NETWORK_PREPROCESSING__PREPROCESSOR_SCALER,
               let scaler = preprocessor.pointee.scaler?.pointee {
                let scale = scaler.channelscale == 0 ? 1 : scaler.channelscale
                let bgr = space == .bgr
                let biases: [Float] = gray ? [scaler.graybias]
                    : (bgr ? [scaler.bluebias, scaler.greenbias, scaler.redbias] : [scaler.redbias, scaler.greenbias, scaler.bluebias])
                // x · 1 + 0 is x: nothing to compute.
                if scale == 1, biases.allSatisfy({ $0 == 0 }) { continue }
                if r >= 4 {
                    // On [N, C, H, W] (the input's view at rank 5): one scale and shift per channel,
                    // which the plan runs as one channel_affine laid out like the convolution after it.
                    let view = r == 4 ? nil : (views[feature] ?? makeView(feature))
                    let channels = biases.count
                    let result = op("batch_norm", ["x": .value(view?.value ?? feature), "mean": .floats(Array(repeating: 0, count: channels), shape: [channels]),
                                                   "variance": .floats(Array(repeating: 1, count: channels), shape: [channels]),
                                                   "gamma": .floats(Array(repeating: scale, count: channels), shape: [channels]),
                                                   "beta": .floats(biases, shape: [channels]), "epsilon": .float(0)],
                                    into: view == nil ? feature : nil)
                    if let view { views[feature] = View(value: result, lead: view.lead, pending: true) }
                    continue
                }
                let scaled = op("mul", ["x": .value(feature), "y": .float(scale)])
                op("add", ["x": .value(scaled), "y": .floats(biases, shape: channelShape)], into: feature)
            } else if let mean = preprocessor.pointee.meanimage?.pointee {
                let values: [Float] = scalars(mean.meanimage, mean.n_meanimage)
                let trailing: [Int]
                if case .image(let type) = description.type {
                    trailing = [gray ? 1 : 3, Int(type.height), Int(type.width)]
                } else {
                    trailing = [values.count]
                }
                guard trailing.reduce(1, *) == values.count else {
                    throw .invalidParameters(model: "preprocessing of \"\(feature)\"", detail: "a mean image of \(values.count) values for \(trailing)")
                }
                let shape = Array(repeating: 1, count: max(0, r - trailing.count)) + trailing
                op("sub", ["x": .value(feature), "y": .floats(values, shape: shape)], into: feature)
            }
        }
    }
}
