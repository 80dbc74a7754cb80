import CoreMLSchema

extension ModelGraph {
    /// The graph of a model read from disk.
    public init(_ file: ModelFile) {
        self = withExtendedLifetime(file.specification) { ModelGraph(model: UnsafePointer(file.specification.root)) }
    }

    init(model: UnsafePointer<CoreML__Specification__Model>) {
        var builder = GraphBuilder()
        let summary = ModelSummary(model, blobs: nil)
        var root = GraphCluster(id: "root", label: summary.modelType ?? "model", nodes: [], clusters: [])
        for input in summary.inputs {
            let node = builder.node(.input, title: input.name, name: "", details: [input.type.graphText])
            builder.define(input.name, node.id)
            root.nodes.append(node)
        }
        builder.content(of: model, summary: summary, into: &root)
        for output in summary.outputs {
            let node = builder.node(.output, title: output.name, name: "", details: [output.type.graphText])
            builder.use(output.name, by: node.id)
            root.nodes.append(node)
        }
        self.init(root: root, edges: builder.edges)
    }
}

/// Walks a model, handing out ids and resolving value names to the nodes
/// that produce them through nested scopes (pipeline stages, blocks).
private struct GraphBuilder {
    private(set) var edges: [GraphEdge] = []
    private var nodeCount = 0
    private var clusterCount = 0
    /// Innermost last: value name → producing node id.
    private var scopes: [[String: String]] = [[:]]
    /// ML-program constants by output name, for folding into their users.
    private var constants: [String: Constant] = [:]

    struct Constant {
        /// `tensor<fp16, [64, 3]>`.
        var type: String
        /// The literal, or nil when stored in a weight file or computed (`constexpr_…`).
        var literal: String?
    }

    mutating func node(_ kind: GraphNode.Kind, title: String, name: String, details: [String], weights: [String] = []) -> GraphNode {
        defer { nodeCount += 1 }
        return GraphNode(id: "n\(nodeCount)", kind: kind, title: title, name: name, details: details, weights: weights)
    }

    mutating func cluster(_ label: String) -> GraphCluster {
        defer { clusterCount += 1 }
        return GraphCluster(id: "cluster_\(clusterCount)", label: label, nodes: [], clusters: [])
    }

    mutating func define(_ name: String, _ id: String) {
        scopes[scopes.count - 1][name] = id
    }

    func lookup(_ name: String) -> String? {
        for scope in scopes.reversed() {
            if let id = scope[name] { return id }
        }
        return nil
    }

    /// An edge from the producer of `name` to `id`, when `name` has one.
    mutating func use(_ name: String, by id: String) {
        guard let producer = lookup(name), producer != id else { return }
        edges.append(GraphEdge(from: producer, to: id, value: name))
    }

    // MARK: Models

    /// The layers, stages, functions or the single node of one model.
    mutating func content(of model: UnsafePointer<CoreML__Specification__Model>, summary: ModelSummary,
                          into cluster: inout GraphCluster) {
        let spec = model.pointee
        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            network(model, summary: summary, into: &cluster)
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR:
            for (index, stage) in ModelSummary.pipelineModels(spec).enumerated() {
                let stageSummary = ModelSummary(UnsafePointer(stage), blobs: nil)
                var frame = self.cluster("stage \(index): \(stageSummary.modelType ?? "model")")
                scopes.append([:])
                content(of: UnsafePointer(stage), summary: stageSummary, into: &frame)
                let produced = stageSummary.outputs.compactMap { output in lookup(output.name).map { (output.name, $0) } }
                scopes.removeLast()
                for (name, id) in produced { define(name, id) }
                cluster.clusters.append(frame)
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM:
            if let program = spec.mlprogram { self.program(program, into: &cluster) }
        default:
            var details: [String] = []
            if let labels = summary.classLabels { details.append("\(labels.count) \(labels.kind) labels") }
            let node = node(.operation, title: summary.modelType ?? "model", name: "", details: details)
            for input in summary.inputs { use(input.name, by: node.id) }
            for output in summary.outputs { define(output.name, node.id) }
            cluster.nodes.append(node)
        }
    }

    private mutating func network(_ model: UnsafePointer<CoreML__Specification__Model>, summary: ModelSummary,
                                  into cluster: inout GraphCluster) {
        let view = MessageView(model)
        guard let type = summary.modelType, let network = view.message(named: type) else { return }
        let reader = NeuralNetworkReader(network: network)
        var weightsByLayer: [String: [WeightTensor]] = [:]
        for weight in reader.weights { weightsByLayer[weight.layer, default: []].append(weight) }
        let layerViews = network.message(fieldsNamed: "layers")
        var last: String?
        for (layer, layerView) in zip(reader.layers, layerViews) {
            let parameters = layerView.message(named: layer.kind)
            let details = parameters.map { $0.scalarSummary(limit: 6) } ?? []
            let weights = (weightsByLayer[layer.name] ?? []).map { $0.graphText(parameters: parameters, kind: layer.kind) }
            let node = node(.operation, title: layer.kind, name: layer.name, details: details, weights: weights)
            for input in layer.inputs { use(input, by: node.id) }
            for output in layer.outputs { define(output, node.id) }
            cluster.nodes.append(node)
            last = node.id
        }
        // A classifier's label and probabilities come from a step after the layers.
        let missing = summary.outputs.filter { lookup($0.name) == nil }
        guard !missing.isEmpty, let labels = summary.classLabels else { return }
        let probabilityLayer = network.typeName == "CoreML.Specification.NeuralNetworkClassifier"
            ? text(network.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkClassifier.self).pointee.labelprobabilitylayername)
            : ""
        let classifier = node(.operation, title: "classifier", name: "", details: ["\(labels.count) \(labels.kind) labels"])
        if !probabilityLayer.isEmpty, lookup(probabilityLayer) != nil {
            use(probabilityLayer, by: classifier.id)
        } else if let last {
            edges.append(GraphEdge(from: last, to: classifier.id, value: reader.layers.last?.outputs.first ?? ""))
        }
        for output in missing { define(output.name, classifier.id) }
        cluster.nodes.append(classifier)
    }

    // MARK: ML programs

    private mutating func program(_ program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>,
                                  into cluster: inout GraphCluster) {
        let functions = sortedEntries(program.pointee.functions, program.pointee.n_functions, key: \.key, value: \.value)
        for (name, function) in functions {
            guard let function else { continue }
            let opset = text(function.pointee.opset)
            let blocks = sortedEntries(function.pointee.block_specializations, function.pointee.n_block_specializations,
                                       key: \.key, value: \.value)
            guard let block = (blocks.first { $0.key == opset } ?? blocks.first)?.value else { continue }
            // A program of one function is drawn without a frame around it
            // (the root's label names the function): a cluster spanning the
            // whole graph costs Graphviz more than the rest of the layout.
            let label = "func \(name)<\(ProgramTextPrinter.opsetName(opset))>"
            let framed = functions.count > 1
            var frame = framed ? self.cluster(label) : GraphCluster(id: cluster.id, label: cluster.label, nodes: [], clusters: [])
            if !framed { cluster.label += " · " + label }
            scopes.append([:])
            constants = [:]
            for input in elements(function.pointee.inputs, function.pointee.n_inputs) {
                let inputName = text(input.pointee.name)
                if let outer = lookup(inputName) {
                    define(inputName, outer)
                } else {
                    let node = node(.input, title: inputName, name: "", details: [MILTextFormat.type(input.pointee.type)])
                    define(inputName, node.id)
                    frame.nodes.append(node)
                }
            }
            operations(of: block, into: &frame)
            let outputs = strings(block.pointee.outputs, block.pointee.n_outputs).compactMap { output in
                lookup(output).map { (output, $0) }
            }
            scopes.removeLast()
            // The first function's outputs are the model's (functions of a
            // multifunction program share output names).
            for (output, id) in outputs where lookup(output) == nil { define(output, id) }
            if framed {
                cluster.clusters.append(frame)
            } else {
                cluster.nodes += frame.nodes
                cluster.clusters += frame.clusters
            }
        }
    }

    private mutating func operations(of block: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>,
                                     into cluster: inout GraphCluster) {
        for operation in elements(block.pointee.operations, block.pointee.n_operations) {
            self.operation(operation, into: &cluster)
        }
    }

    private mutating func operation(_ operation: UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation>,
                                    into cluster: inout GraphCluster) {
        let op = operation.pointee
        let type = text(op.type)
        let outputs = elements(op.outputs, op.n_outputs)
        if type == "const" || type.hasPrefix("constexpr_") {
            let value = sortedEntries(op.attributes, op.n_attributes, key: \.key, value: \.value).first { $0.key == "val" }?.value
            for output in outputs {
                let literal = type == "const" ? value.flatMap(Self.literal) : nil
                constants[text(output.pointee.name)] = Constant(
                    type: type == "const" ? MILTextFormat.type(output.pointee.type) : "\(type) → \(MILTextFormat.type(output.pointee.type))",
                    literal: literal)
            }
            return
        }
        var details: [String] = []
        var weights: [String] = []
        var uses: [String] = []
        for (key, argument) in sortedEntries(op.inputs, op.n_inputs, key: \.key, value: \.value) {
            guard let argument else { continue }
            for binding in elements(argument.pointee.arguments, argument.pointee.n_arguments) {
                switch binding.pointee.binding_case {
                case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME:
                    let name = text(binding.pointee.name)
                    if let constant = constants[name] {
                        if let literal = constant.literal { details.append("\(key) = \(literal)") } else { weights.append("\(key): \(constant.type)") }
                    } else {
                        uses.append(name)
                    }
                case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE:
                    if let literal = Self.literal(binding.pointee.value) {
                        details.append("\(key) = \(literal)")
                    } else {
                        weights.append("\(key): \(MILTextFormat.type(binding.pointee.value?.pointee.type))")
                    }
                default:
                    break
                }
            }
        }
        let types = outputs.map { MILTextFormat.type($0.pointee.type) }
        if !types.isEmpty { details.append("→ " + types.joined(separator: ", ")) }
        let name = outputs.first.map { text($0.pointee.name) } ?? ""
        let node = node(.operation, title: type, name: name, details: details, weights: weights)
        for use in uses { self.use(use, by: node.id) }
        cluster.nodes.append(node)
        for (index, block) in elements(op.blocks, op.n_blocks).enumerated() {
            var frame = self.cluster("\(type) \(name) · block \(index)")
            scopes.append([:])
            for input in elements(block.pointee.inputs, block.pointee.n_inputs) {
                let inputName = text(input.pointee.name)
                let inputNode = self.node(.input, title: inputName, name: "", details: [MILTextFormat.type(input.pointee.type)])
                define(inputName, inputNode.id)
                frame.nodes.append(inputNode)
            }
            operations(of: block, into: &frame)
            for output in strings(block.pointee.outputs, block.pointee.n_outputs) { use(output, by: node.id) }
            scopes.removeLast()
            cluster.clusters.append(frame)
        }
        for output in outputs { define(text(output.pointee.name), node.id) }
    }

    /// The literal of an immediate value short enough to print; nil for a
    /// weight-file value or a long tensor.
    private static func literal(_ value: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>?) -> String? {
        guard let value, value.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE else { return nil }
        let literal = MILTextFormat.literal(value)
        return literal.count <= 40 ? literal : nil
    }
}

extension FeatureType {
    /// A short type line for a graph node: `image 224×224 RGB`, `FLOAT32 [1, 10]`.
    var graphText: String {
        switch self {
        case .int64: "int64"
        case .double: "double"
        case .string: "string"
        case .image(let image): "image \(image.width)×\(image.height) \(image.space.schemaName)"
        case .multiArray(let array): "\(array.dataType) [\(array.shape.map(String.init).joined(separator: ", "))]"
        case .dictionary(let keyType): "dictionary<\(keyType.replacingOccurrences(of: "KeyType", with: ""))>"
        case .sequence(let sequence): "sequence<\(sequence.elementType.replacingOccurrences(of: "Type", with: ""))>"
        case .state(let array): "state \(array.dataType) [\(array.shape.map(String.init).joined(separator: ", "))]"
        case .unset: "unset"
        }
    }
}

extension WeightTensor {
    /// `weights: float32 [16, 3, 3, 3]`: the shape where the layer's
    /// parameters give it (convolution, inner product, batch norm), else the count.
    func graphText(parameters: MessageView?, kind: String) -> String {
        let type = quantizationBits.map { "\(storage.rawValue) \($0)-bit" } ?? storage.rawValue
        return "\(role): \(type) [\(shape(parameters: parameters, kind: kind).map(String.init).joined(separator: ", "))]"
    }

    private func shape(parameters: MessageView?, kind: String) -> [Int] {
        guard let parameters else { return [count] }
        func value(_ name: String) -> Int? { parameters.integer(named: name) }
        switch (kind, role) {
        case ("convolution", "weights"):
            if let out = value("outputChannels"), let channels = value("kernelChannels") {
                let kernel = parameters.integers(named: "kernelSize")
                let candidate = [out, channels] + kernel
                if candidate.reduce(1, *) == count { return candidate }
            }
        case ("innerProduct", "weights"), ("embedding", "weights"):
            if let out = value("outputChannels"), let input = value("inputChannels"), out * input == count {
                return [out, input]
            }
        default:
            break
        }
        return [count]
    }
}

extension MessageView {
    /// The scalar fields that are set (non-zero), as `name = value`, at most
    /// `limit`; repeated scalar fields of up to 8 values as `[a, b]`; a set
    /// oneof message by its case name.
    func scalarSummary(limit: Int) -> [String] {
        var items: [String] = []
        for field in fields where items.count < limit {
            let name = String(cString: field.name)
            if field.type == PROTOBUF_C_TYPE_MESSAGE {
                if field.flags & UInt32(PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue) != 0, !messages(in: field).isEmpty {
                    items.append(name)
                }
                continue
            }
            if field.label == PROTOBUF_C_LABEL_REPEATED {
                let count = (pointer + Int(field.quantifier_offset)).load(as: Int.self)
                guard count > 0, count <= 8, let array = (pointer + Int(field.offset)).load(as: UnsafeRawPointer?.self) else { continue }
                let values = (0..<count).compactMap { scalarText(field, at: array + $0 * scalarStride(field)) }
                if values.count == count { items.append("\(name) = [\(values.joined(separator: ", "))]") }
                continue
            }
            if let value = scalarText(field, at: pointer + Int(field.offset)), !Self.isZero(value) {
                items.append("\(name) = \(value)")
            }
        }
        return items
    }

    /// The value of the integer field `name`, if it is one and set.
    func integer(named name: String) -> Int? {
        guard let field = field(named: name)?.pointee, field.label != PROTOBUF_C_LABEL_REPEATED,
              let text = scalarText(field, at: pointer + Int(field.offset)) else { return nil }
        return Int(text)
    }

    /// The values of the repeated integer field `name`.
    func integers(named name: String) -> [Int] {
        guard let field = field(named: name)?.pointee, field.label == PROTOBUF_C_LABEL_REPEATED else { return [] }
        let count = (pointer + Int(field.quantifier_offset)).load(as: Int.self)
        guard count > 0, let array = (pointer + Int(field.offset)).load(as: UnsafeRawPointer?.self) else { return [] }
        return (0..<count).compactMap { scalarText(field, at: array + $0 * scalarStride(field)).flatMap { Int($0) } }
    }

    private static func isZero(_ text: String) -> Bool {
        text == "0" || text == "0.0" || text == "false" || text == "\"\""
    }

    private func scalarStride(_ field: ProtobufCFieldDescriptor) -> Int {
        switch field.type {
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64, PROTOBUF_C_TYPE_UINT64,
             PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_DOUBLE, PROTOBUF_C_TYPE_STRING:
            8
        default:
            4
        }
    }

    private func scalarText(_ field: ProtobufCFieldDescriptor, at address: UnsafeRawPointer) -> String? {
        switch field.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SFIXED32:
            return String(address.loadUnaligned(as: Int32.self))
        case PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_FIXED32:
            return String(address.loadUnaligned(as: UInt32.self))
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64:
            return String(address.loadUnaligned(as: Int64.self))
        case PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64:
            return String(address.loadUnaligned(as: UInt64.self))
        case PROTOBUF_C_TYPE_FLOAT:
            return String(address.loadUnaligned(as: Float.self))
        case PROTOBUF_C_TYPE_DOUBLE:
            return String(address.loadUnaligned(as: Double.self))
        case PROTOBUF_C_TYPE_BOOL:
            return address.loadUnaligned(as: Int32.self) != 0 ? "true" : "false"
        case PROTOBUF_C_TYPE_ENUM:
            let value = address.loadUnaligned(as: Int32.self)
            guard let descriptor = field.descriptor else { return String(value) }
            let enumDescriptor = descriptor.assumingMemoryBound(to: ProtobufCEnumDescriptor.self)
            guard let entry = protobuf_c_enum_descriptor_get_value(enumDescriptor, value) else { return String(value) }
            return value == 0 ? "0" : String(cString: entry.pointee.name)
        case PROTOBUF_C_TYPE_STRING:
            guard let string = address.load(as: UnsafePointer<CChar>?.self) else { return nil }
            let value = String(cString: string)
            return value.count <= 24 ? MILTextFormat.quoted(value) : nil
        default:
            return nil
        }
    }
}
