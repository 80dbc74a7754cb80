import CoreMLSchema
import ModelSpec

/// The main function of an ML program cut at one variable: the operations
/// that variable needs (in their order, dead ones removed), the variable's
/// declared type, and how it was chosen.
///
/// The operations point into the base's tree, which must outlive the cut.
struct ProgramCut {
    let program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>
    let functionName: String
    let function: UnsafeMutablePointer<CoreML__Specification__MILSpec__Function>
    let opset: String
    let block: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>
    /// The kept top-level operations, in program order.
    let operations: [UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation>]
    /// Top-level operations other than `const`, in the base and kept.
    let baseOperations: Int
    let keptOperations: Int
    let feature: String
    /// The feature's declared dimensions.
    let shape: [Int64]
    /// The feature's declared MIL type, when it is float16: the cut then ends
    /// in a `cast` to float32 (the classifier takes float32).
    let float16Type: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorType>?
    /// The cut's output: the feature, or its float32 cast.
    var output: String { float16Type == nil ? feature : feature + "_fp32" }
    /// The operation reading the feature in the base (automatic choice), e.g. `"dense2" (linear)`.
    let consumer: String?

    /// Operations a classification head passes its value through unchanged
    /// in meaning, with the input that carries it.
    private static let headPassThrough: [String: String] = [
        "classify": "probabilities", "softmax": "x", "sigmoid": "x", "reshape": "x", "squeeze": "x",
        "expand_dims": "x", "flatten2d": "x", "cast": "x", "identity": "x",
    ]

    /// Cuts the main function (or the first) of `program` at `featureOutput`,
    /// or at the input of its final `linear`/`matmul` when `nil`.
    ///
    /// - Throws: `CutRefusal` naming what is missing.
    init(program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>, featureOutput: String?) throws(CutRefusal) {
        self.program = program
        let functions = elements(program.pointee.functions, program.pointee.n_functions)
        guard let entry = functions.first(where: { text($0.pointee.key) == "main" }) ?? functions.first,
              let function = entry.pointee.value else {
            throw CutRefusal(reason: "the ML program has no main function")
        }
        functionName = text(entry.pointee.key)
        self.function = function
        let opset = text(function.pointee.opset)
        self.opset = opset
        let blocks = elements(function.pointee.block_specializations, function.pointee.n_block_specializations)
        guard let block = (blocks.first { text($0.pointee.key) == opset } ?? blocks.first)?.pointee.value else {
            throw CutRefusal(reason: "function \(text(entry.pointee.key)) has no block for opset \(opset)")
        }
        self.block = block
        let operations = elements(block.pointee.operations, block.pointee.n_operations)
        baseOperations = operations.count { text($0.pointee.type) != "const" }
        var producer: [String: Int] = [:]
        for (index, operation) in operations.enumerated() {
            for output in elements(operation.pointee.outputs, operation.pointee.n_outputs) {
                producer[text(output.pointee.name)] = index
            }
        }
        let inputs = Set(elements(function.pointee.inputs, function.pointee.n_inputs).map { text($0.pointee.name) })

        var consumer: String?
        let feature: String
        if let featureOutput {
            guard producer[featureOutput] != nil else {
                if inputs.contains(featureOutput) {
                    throw CutRefusal(reason: "\"\(featureOutput)\" is a model input, not an operation output")
                }
                let last = operations.suffix(4).compactMap { $0.pointee.outputs?[0] }.map { "\"\(text($0.pointee.name))\"" }
                throw CutRefusal(reason: "no operation of function \(functionName) produces \"\(featureOutput)\" "
                                 + "(the last operations produce \(last.joined(separator: ", ")))")
            }
            feature = featureOutput
        } else {
            var current = strings(block.pointee.outputs, block.pointee.n_outputs).first
            var found: String?
            var steps = 0
            while let name = current, let index = producer[name], steps <= operations.count {
                steps += 1
                let operation = operations[index].pointee
                let kind = text(operation.type)
                if let carrier = Self.headPassThrough[kind] {
                    current = Self.variable(operation, carrier)
                    continue
                }
                if kind == "linear" || kind == "matmul" {
                    // The variable operand (a matmul's weights are a constant).
                    let candidates = kind == "linear" ? ["x"] : ["x", "y"]
                    found = candidates.compactMap { Self.variable(operation, $0) }.first { name in
                        producer[name].map { text(operations[$0].pointee.type) != "const" } ?? inputs.contains(name)
                    }
                    consumer = "\"\(name)\" (\(kind))"
                }
                break
            }
            guard let found, producer[found] != nil else {
                throw CutRefusal(reason: "its final operations are not a linear or matmul classifier; "
                                 + "name the feature vector with --feature-output")
            }
            feature = found
        }
        self.feature = feature
        self.consumer = consumer

        guard let producerIndex = producer[feature],
              let declared = elements(operations[producerIndex].pointee.outputs, operations[producerIndex].pointee.n_outputs)
                .first(where: { text($0.pointee.name) == feature }),
              let type = declared.pointee.type?.pointee,
              type.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE,
              let tensorType = type.tensortype else {
            throw CutRefusal(reason: "\"\(feature)\" is not a tensor")
        }
        let tensor = tensorType.pointee
        var shape: [Int64] = []
        for dimension in elements(tensor.dimensions, tensor.n_dimensions) {
            guard dimension.pointee.dimension_case == CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT,
                  let size = dimension.pointee.constant?.pointee.size, size > 0, size <= UInt64(Int32.max) else {
                throw CutRefusal(reason: "\"\(feature)\" has a dimension of unknown size")
            }
            shape.append(Int64(size))
        }
        self.shape = shape.isEmpty ? [1] : shape
        switch tensor.datatype {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32:
            float16Type = nil
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16:
            float16Type = tensorType
        default:
            throw CutRefusal(reason: "\"\(feature)\" holds \(milDataTypeName(tensor.datatype)) values; "
                             + "only a FLOAT32 or FLOAT16 feature vector can feed the classifier")
        }

        // The operations the feature depends on, nested blocks included.
        var needed: Set<String> = [feature]
        var keep: [Int] = []
        for index in stride(from: producerIndex, through: 0, by: -1) {
            let outputs = elements(operations[index].pointee.outputs, operations[index].pointee.n_outputs).map { text($0.pointee.name) }
            guard outputs.contains(where: needed.contains) else { continue }
            keep.append(index)
            Self.collectReferences(of: operations[index], into: &needed)
        }
        self.operations = keep.reversed().map { operations[$0] }
        keptOperations = self.operations.count { text($0.pointee.type) != "const" }
    }

    /// The variable bound to the input `key` of `operation`, when it is one name.
    private static func variable(_ operation: CoreML__Specification__MILSpec__Operation, _ key: String) -> String? {
        for entry in elements(operation.inputs, operation.n_inputs) where text(entry.pointee.key) == key {
            guard let argument = entry.pointee.value?.pointee,
                  let binding = elements(argument.arguments, argument.n_arguments).first?.pointee,
                  binding.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME else { return nil }
            return text(binding.name)
        }
        return nil
    }

    /// Every name `operation` reads, its nested blocks' operations and outputs included.
    private static func collectReferences(of operation: UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation>,
                                          into names: inout Set<String>) {
        for entry in elements(operation.pointee.inputs, operation.pointee.n_inputs) {
            guard let argument = entry.pointee.value?.pointee else { continue }
            for binding in elements(argument.arguments, argument.n_arguments)
            where binding.pointee.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME {
                names.insert(text(binding.pointee.name))
            }
        }
        for block in elements(operation.pointee.blocks, operation.pointee.n_blocks) {
            names.formUnion(strings(block.pointee.outputs, block.pointee.n_outputs))
            for nested in elements(block.pointee.operations, block.pointee.n_operations) {
                collectReferences(of: nested, into: &names)
            }
        }
    }

    /// `cast(x: feature, dtype: "fp32")`, named and written as coremltools writes one.
    private func castMessage(from type: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorType>,
                             arena: MessageArena) -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation> {
        func stringValue(_ string: String) -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Value> {
            let strings: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorValue__RepeatedStrings> =
                arena.message(core_ml__specification__milspec__tensor_value__repeated_strings__init) { strings in
                    strings.n_values = 1
                    strings.values = arena.strings([string])
                }
            let tensor: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorValue> = arena.message(core_ml__specification__milspec__tensor_value__init) { tensor in
                tensor.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS
                tensor.strings = strings
            }
            let immediate: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value__ImmediateValue> =
                arena.message(core_ml__specification__milspec__value__immediate_value__init) { immediate in
                    immediate.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR
                    immediate.tensor = tensor
                }
            let stringType: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorType> = arena.message(core_ml__specification__milspec__tensor_type__init) { type in
                type.datatype = CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING
            }
            let valueType: UnsafeMutablePointer<CoreML__Specification__MILSpec__ValueType> = arena.message(core_ml__specification__milspec__value_type__init) { type in
                type.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
                type.tensortype = stringType
            }
            return arena.message(core_ml__specification__milspec__value__init) { value in
                value.type = valueType
                value.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE
                value.immediatevalue = immediate
            }
        }
        func input(_ key: String, _ fill: (inout CoreML__Specification__MILSpec__Argument__Binding) -> Void)
            -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation__InputsEntry> {
            let binding: UnsafeMutablePointer<CoreML__Specification__MILSpec__Argument__Binding> =
                arena.message(core_ml__specification__milspec__argument__binding__init, fill)
            let argument: UnsafeMutablePointer<CoreML__Specification__MILSpec__Argument> = arena.message(core_ml__specification__milspec__argument__init) { argument in
                argument.n_arguments = 1
                argument.arguments = arena.pointers([binding])
            }
            return arena.message(core_ml__specification__milspec__operation__inputs_entry__init) { entry in
                entry.key = arena.string(key)
                entry.value = argument
            }
        }
        let x = input("x") { binding in
            binding.binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME
            binding.name = arena.string(feature)
        }
        let dtype = input("dtype") { binding in
            binding.binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE
            binding.value = stringValue("fp32")
        }
        let source = type.pointee
        let float32: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorType> = arena.message(core_ml__specification__milspec__tensor_type__init) { float32 in
            float32.datatype = CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32
            float32.rank = source.rank
            float32.n_dimensions = source.n_dimensions
            float32.dimensions = source.dimensions
        }
        let valueType: UnsafeMutablePointer<CoreML__Specification__MILSpec__ValueType> = arena.message(core_ml__specification__milspec__value_type__init) { type in
            type.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
            type.tensortype = float32
        }
        let named: UnsafeMutablePointer<CoreML__Specification__MILSpec__NamedValueType> = arena.message(core_ml__specification__milspec__named_value_type__init) { named in
            named.name = arena.string(output)
            named.type = valueType
        }
        let name: UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation__AttributesEntry> =
            arena.message(core_ml__specification__milspec__operation__attributes_entry__init) { entry in
                entry.key = arena.string("name")
                entry.value = stringValue(output)
            }
        return arena.message(core_ml__specification__milspec__operation__init) { operation in
            operation.type = arena.string("cast")
            operation.n_inputs = 2
            operation.inputs = arena.pointers([x, dtype])
            operation.n_outputs = 1
            operation.outputs = arena.pointers([named])
            operation.n_attributes = 1
            operation.attributes = arena.pointers([name])
        }
    }

    /// How many values the feature holds.
    var count: Int { shape.reduce(1) { $0 * Int($1) } }

    /// The cut as an `mlProgram` model message in `arena`: the base's inputs,
    /// one multi-array output (the feature), one function with one block.
    func modelMessage(base: CoreML__Specification__Model, arena: MessageArena) -> UnsafeMutablePointer<CoreML__Specification__Model> {
        let baseDescription = base.description?.pointee
        let inputs = elements(baseDescription?.input, baseDescription?.n_input ?? 0)
        let output = arena.feature(FeatureDescription(
            name: self.output,
            shortDescription: "The feature vector: the base program's \"\(feature)\"" + (float16Type == nil ? "" : " as float32"),
            isOptional: false, type: .multiArray(MultiArrayType(dataType: "FLOAT32", shape: shape))))
        let kept = operations + (float16Type.map { [castMessage(from: $0, arena: arena)] } ?? [])
        let description: UnsafeMutablePointer<CoreML__Specification__ModelDescription> = arena.message(core_ml__specification__model_description__init) { description in
            description.n_input = inputs.count
            description.input = arena.pointers(inputs)
            description.n_output = 1
            description.output = arena.pointers([output])
        }
        let source = block.pointee
        let cutBlock: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block> = arena.message(core_ml__specification__milspec__block__init) { cut in
            cut.n_inputs = source.n_inputs
            cut.inputs = source.inputs
            cut.n_outputs = 1
            cut.outputs = arena.strings([self.output])
            cut.n_operations = kept.count
            cut.operations = arena.pointers(kept)
            cut.n_attributes = source.n_attributes
            cut.attributes = source.attributes
        }
        let specialization: UnsafeMutablePointer<CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry> =
            arena.message(core_ml__specification__milspec__function__block_specializations_entry__init) { entry in
                entry.key = arena.string(opset)
                entry.value = cutBlock
            }
        let baseFunction = function.pointee
        let cutFunction: UnsafeMutablePointer<CoreML__Specification__MILSpec__Function> = arena.message(core_ml__specification__milspec__function__init) { cut in
            cut.n_inputs = baseFunction.n_inputs
            cut.inputs = baseFunction.inputs
            cut.opset = arena.string(opset)
            cut.n_block_specializations = 1
            cut.block_specializations = arena.pointers([specialization])
            cut.n_attributes = baseFunction.n_attributes
            cut.attributes = baseFunction.attributes
        }
        let functionEntry: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program__FunctionsEntry> =
            arena.message(core_ml__specification__milspec__program__functions_entry__init) { entry in
                entry.key = arena.string("main")
                entry.value = cutFunction
            }
        let baseProgram = program.pointee
        let cutProgram: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program> = arena.message(core_ml__specification__milspec__program__init) { cut in
            cut.version = baseProgram.version
            cut.n_functions = 1
            cut.functions = arena.pointers([functionEntry])
            cut.docstring = baseProgram.docstring
            cut.n_attributes = baseProgram.n_attributes
            cut.attributes = baseProgram.attributes
        }
        return arena.message(core_ml__specification__model__init) { model in
            model.specificationversion = base.specificationversion
            model.description = description
            model.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM
            model.mlprogram = cutProgram
        }
    }
}
