import CoreMLSchema
import ModelFeatures
import ModelSpec

/// Reads an ML program's functions into a `ProgramGraph`: every function,
/// nested blocks included, constants decoded — float16 and float32 weights of
/// the weight file as `MappedValues`, read where the file is mapped.
/// An operation or parameter modelc does not run is refused here, naming it.
struct GraphReader {
    private let values: ConstantReader

    init(modelDirectory: String?) {
        values = ConstantReader(modelDirectory: modelDirectory)
    }

    func read(_ program: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>,
              defaultFunction: String?) throws(RuntimeError) -> ProgramGraph {
        var functions: [String: GraphFunction] = [:]
        for entry in elements(program.pointee.functions, program.pointee.n_functions) {
            let name = text(entry.pointee.key)
            guard let function = entry.pointee.value?.pointee else { continue }
            let opset = text(function.opset)
            let blocks = elements(function.block_specializations, function.n_block_specializations)
            guard let block = (blocks.first { text($0.pointee.key) == opset } ?? blocks.first)?.pointee.value?.pointee else {
                throw .invalidParameters(model: "mlProgram", detail: "function \(name) has no block for opset \(opset)")
            }
            let inputs = elements(function.inputs, function.n_inputs).map { (name: text($0.pointee.name), type: Self.type($0.pointee.type)) }
            functions[name] = GraphFunction(name: name, inputs: inputs, block: try readBlock(block))
        }
        guard !functions.isEmpty else { throw .invalidParameters(model: "mlProgram", detail: "the program has no function") }
        let fallback = functions["main"] != nil ? "main" : (functions.keys.sorted().first ?? "main")
        let chosen = defaultFunction.flatMap { functions[$0] != nil ? $0 : nil } ?? fallback
        return ProgramGraph(functions: functions, defaultFunction: chosen)
    }

    private func readBlock(_ block: CoreML__Specification__MILSpec__Block) throws(RuntimeError) -> GraphBlock {
        var result = GraphBlock(inputs: elements(block.inputs, block.n_inputs).map { (name: text($0.pointee.name), type: Self.type($0.pointee.type)) },
                                operations: [], outputs: strings(block.outputs, block.n_outputs), constants: [:])
        for pointer in elements(block.operations, block.n_operations) {
            let op = try readOperation(pointer.pointee)
            if op.type == "const" {
                guard case .constant(let value)? = op.arguments["val"]?.first, let output = op.outputs.first?.name else {
                    throw .invalidParameters(model: "operation \"\(op.name)\" (const)", detail: "no value")
                }
                result.constants[output] = value
                continue
            }
            try OperationRegistry.check(op)
            result.operations.append(op)
        }
        return result
    }

    private func readOperation(_ op: CoreML__Specification__MILSpec__Operation) throws(RuntimeError) -> GraphOperation {
        let outputs = elements(op.outputs, op.n_outputs).map { (name: text($0.pointee.name), type: Self.type($0.pointee.type)) }
        let owner = outputs.first?.name ?? text(op.type)
        var arguments: [String: [GraphArgument]] = [:]
        for entry in elements(op.inputs, op.n_inputs) {
            guard let argument = entry.pointee.value?.pointee else { continue }
            var bound: [GraphArgument] = []
            for binding in elements(argument.arguments, argument.n_arguments).map(\.pointee) {
                if binding.binding_case == CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME {
                    bound.append(.value(text(binding.name)))
                } else if let value = binding.value?.pointee {
                    bound.append(.constant(try values.tensor(value, owner: owner)))
                }
            }
            arguments[text(entry.pointee.key)] = bound
        }
        // `const` and the iOS 16 `constexpr_*` operations keep their values as attributes.
        for entry in elements(op.attributes, op.n_attributes) {
            let key = text(entry.pointee.key)
            guard arguments[key] == nil, key != "name", let value = entry.pointee.value?.pointee else { continue }
            arguments[key] = [.constant(try values.tensor(value, owner: owner))]
        }
        var blocks: [GraphBlock] = []
        for block in elements(op.blocks, op.n_blocks) { blocks.append(try readBlock(block.pointee)) }
        if text(op.type) == "reshape" {
            // A program's 0 copies the input dimension counted from the end (iOS 17; the same from
            // the start where earlier opsets allow a 0, the ranks being equal); a lowered network's
            // `reshape` counts from the start.
            arguments[ShapeOperations.zerosFromEnd] = [.constant(Tensor(ints: [1], shape: [], type: .bool))]
        }
        return GraphOperation(type: text(op.type), arguments: arguments, outputs: outputs, blocks: blocks)
    }

    /// A declared value type; unknown dimensions are `nil`.
    static func type(_ pointer: UnsafeMutablePointer<CoreML__Specification__MILSpec__ValueType>?) -> ValueType {
        guard let type = pointer?.pointee else { return ValueType(element: .float32, shape: nil) }
        switch type.type_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE:
            guard let tensor = type.tensortype?.pointee else { break }
            let dimensions = elements(tensor.dimensions, tensor.n_dimensions).map { dimension -> Int? in
                dimension.pointee.dimension_case == CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT
                    ? Int(dimension.pointee.constant?.pointee.size ?? 0) : nil
            }
            let ranked = tensor.rank >= 0 && Int(tensor.rank) == dimensions.count
            return ValueType(element: ElementType(tensor.datatype) ?? .float32, shape: ranked ? dimensions : nil)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_LIST_TYPE:
            // A list is held as one tensor [length] + element shape: its element type, its shape unknown here.
            return ValueType(element: Self.type(type.listtype?.pointee.type).element, shape: nil)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE:
            var wrapped = Self.type(type.statetype?.pointee.wrappedtype)
            wrapped.isState = true
            return wrapped
        default:
            break
        }
        return ValueType(element: .float32, shape: nil)
    }
}

/// Decodes MIL values: immediate tensors and blobs of the weight file (float
/// blobs left in the mapped file, the file kept mapped while a tensor refers to it).
struct ConstantReader {
    /// Weight files, each opened once per model.
    private let files: MILWeightFiles

    /// `modelDirectory`: the directory `@model_path` names (a bundle or the package's model folder).
    init(modelDirectory: String?) {
        files = MILWeightFiles(modelDirectory: modelDirectory)
    }

    func tensor(_ value: CoreML__Specification__MILSpec__Value, owner: String) throws(RuntimeError) -> Tensor {
        let declared = GraphReader.type(value.type)
        let tensorType = value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
            ? value.type?.pointee.tensortype?.pointee : nil
        let dataType = tensorType?.datatype ?? CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32
        let shape = (declared.shape ?? []).map { $0 ?? 0 }
        switch value.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            guard let immediate = value.immediatevalue?.pointee else { break }
            if immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST
                || immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TUPLE {
                // A list of scalars (class labels): its elements joined into one tensor.
                let parts: [UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>] =
                    immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST
                    ? (immediate.list.map { elements($0.pointee.values, $0.pointee.n_values) } ?? [])
                    : (immediate.tuple.map { elements($0.pointee.values, $0.pointee.n_values) } ?? [])
                var tensors: [Tensor] = []
                for part in parts { tensors.append(try tensor(part.pointee, owner: owner)) }
                if let first = tensors.first, first.type == .string {
                    let all = tensors.flatMap(\.strings)
                    return Tensor(type: .string, shape: [all.count], storage: .strings(all))
                }
                if tensors.first?.type.isFloat ?? true {
                    let all = tensors.flatMap(\.floats)
                    return Tensor(floats: all, shape: [all.count], type: tensors.first?.type ?? .float32)
                }
                let all = tensors.flatMap { $0.ints.map { Int32(truncatingIfNeeded: $0) } }
                return Tensor(ints: all, shape: [all.count], type: tensors.first?.type ?? .int32)
            }
            guard immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR,
                  let tensor = immediate.tensor?.pointee else {
                throw .unsupportedLayer(layer: owner, kind: "const", reason: "dictionary constants are not supported")
            }
            return try immediateTensor(tensor, shape: shape, element: declared.element, dataType: dataType, owner: owner)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            guard let blob = value.blobfilevalue?.pointee else { break }
            let (file, bytes) = try blobBytes(text(blob.filename), offset: blob.offset, owner: owner)
            // Float weights stay where the file is mapped: no decoded copy (see `MappedValues`).
            let half = dataType == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16
            if half || dataType == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32,
               let mapped = MappedValues(file: file, bytes: bytes, count: shape.reduce(1, *), half: half) {
                return Tensor(type: half ? .float16 : .float32, shape: shape, storage: .mapped(mapped))
            }
            // Integer codes of matrices (compressed weights' data and lookup indices) stay packed where the file
            // is mapped: decompression keeps them so (see `PackedWeights`).
            if let (bits, signed) = Self.codeWidth(dataType), let element = ElementType(dataType),
               let packed = PackedWeights.codes(file: file, bytes: bytes, shape: shape, bits: bits, isSigned: signed) {
                return Tensor(type: element, shape: shape, storage: .packed(packed))
            }
            return try Self.decode(bytes, dataType: dataType, shape: shape, owner: owner)
        default:
            break
        }
        throw .invalidParameters(model: "operation \"\(owner)\"", detail: "a value with nothing in it")
    }

    private func immediateTensor(_ tensor: CoreML__Specification__MILSpec__TensorValue, shape: [Int], element: ElementType,
                                 dataType: CoreML__Specification__MILSpec__DataType, owner: String) throws(RuntimeError) -> Tensor {
        let result: Tensor
        switch tensor.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS:
            result = Tensor(floats: tensor.floats.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? [], shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_DOUBLES:
            result = Tensor(floats: (tensor.doubles.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map(Float.init), shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS:
            result = Tensor(ints: tensor.ints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? [], shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_LONG_INTS:
            result = Tensor(ints: (tensor.longints.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map { Int32(clamping: $0) }, shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS:
            result = Tensor(ints: (tensor.bools.map { scalars($0.pointee.values, $0.pointee.n_values) } ?? []).map { $0 != 0 ? 1 : 0 }, shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS:
            let values = tensor.strings.map { strings($0.pointee.values, $0.pointee.n_values) } ?? []
            return Tensor(type: .string, shape: shape, storage: .strings(values))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES:
            guard let bytes = tensor.bytes?.pointee.values else { throw .invalidParameters(model: "operation \"\(owner)\"", detail: "empty bytes") }
            if let (bits, signed) = Self.codeWidth(dataType), let element = ElementType(dataType),
               let packed = PackedWeights.codes(packed: Array(UnsafeRawBufferPointer(start: bytes.data, count: bytes.len)), shape: shape, bits: bits,
                                                isSigned: signed) {
                return Tensor(type: element, shape: shape, storage: .packed(packed))
            }
            return try Self.decode(UnsafeRawBufferPointer(start: bytes.data, count: bytes.len), dataType: dataType, shape: shape, owner: owner)
        default:
            throw .invalidParameters(model: "operation \"\(owner)\"", detail: "an empty tensor value")
        }
        let expected = shape.reduce(1, *)
        guard result.count == expected else {
            // A scalar given for a shaped value repeats.
            if result.count == 1 {
                return Tensor(type: result.type, shape: shape, storage: result.storage).repeated(expected).converted(to: element)
            }
            throw .invalidParameters(model: "operation \"\(owner)\"", detail: "\(result.count) values for shape \(shape)")
        }
        return result.converted(to: element)
    }

    private func blobBytes(_ reference: String, offset: UInt64, owner: String) throws(RuntimeError) -> (MILBlobFile, UnsafeRawBufferPointer) {
        do {
            return try files.blob(reference: reference, offset: offset)
        } catch {
            throw .invalidParameters(model: "operation \"\(owner)\"", detail: error.description)
        }
    }

    /// Bits per element and signedness of the integer types kept packed: sub-byte types and bytes.
    static func codeWidth(_ dataType: CoreML__Specification__MILSpec__DataType) -> (bits: Int, signed: Bool)? {
        switch dataType {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: (8, true)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: (8, false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: (4, true)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: (4, false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: (6, false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: (3, false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: (2, false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: (1, false)
        default: nil
        }
    }

    /// Raw little-endian values of `dataType`; sub-byte types are packed from
    /// the lowest bit of each byte up (MIL blob storage).
    static func decode(_ bytes: UnsafeRawBufferPointer, dataType: CoreML__Specification__MILSpec__DataType,
                       shape: [Int], owner: String) throws(RuntimeError) -> Tensor {
        let count = shape.reduce(1, *)
        func need(_ size: Int) throws(RuntimeError) {
            guard bytes.count >= size else {
                throw .invalidParameters(model: "operation \"\(owner)\"", detail: "\(bytes.count) bytes for \(count) values that need \(size)")
            }
        }
        func load<T: FixedWidthInteger>(_: T.Type) throws(RuntimeError) -> [Int32] {
            try need(count * MemoryLayout<T>.size)
            return (0..<count).map { Int32(truncatingIfNeeded: bytes.loadUnaligned(fromByteOffset: $0 * MemoryLayout<T>.size, as: T.self)) }
        }
        func subByte(_ bits: Int, signed: Bool) throws(RuntimeError) -> Tensor {
            try need((count * bits + 7) / 8)
            return Tensor(ints: MILPackedBits.codes(bytes, bits: bits, count: count, signed: signed).map { Int32($0) }, shape: shape)
        }
        switch dataType {
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32:
            try need(count * 4)
            return Tensor(floats: (0..<count).map { Float(bitPattern: bytes.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) }, shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16:
            try need(count * 2)
            return Tensor(floats: (0..<count).map { Float(Float16(bitPattern: bytes.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self))) },
                          shape: shape, type: .float16)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8: return Tensor(ints: try load(Int8.self), shape: shape, type: .int8)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8: return Tensor(ints: try load(UInt8.self), shape: shape, type: .uint8)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16: return Tensor(ints: try load(Int16.self), shape: shape, type: .int16)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16: return Tensor(ints: try load(UInt16.self), shape: shape, type: .uint16)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32: return Tensor(ints: try load(Int32.self), shape: shape)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT32: return Tensor(ints: try load(UInt32.self), shape: shape, type: .uint32)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL: return Tensor(ints: try load(UInt8.self).map { $0 != 0 ? 1 : 0 }, shape: shape, type: .bool)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4: return try subByte(4, signed: true)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4: return try subByte(4, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT3: return try subByte(3, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2: return try subByte(2, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT1: return try subByte(1, signed: false)
        case CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT6: return try subByte(6, signed: false)
        default:
            throw .unsupportedLayer(layer: owner, kind: "const", reason: "values of data type \(milDataTypeName(dataType)) are not supported")
        }
    }
}

extension Tensor {
    /// A one-element tensor's element repeated `count` times.
    func repeated(_ count: Int) -> Tensor {
        switch storage {
        case .floats(let values): Tensor(type: type, shape: shape, storage: .floats(Array(repeating: values.first ?? 0, count: count)))
        case .ints(let values): Tensor(type: type, shape: shape, storage: .ints(Array(repeating: values.first ?? 0, count: count)))
        case .strings(let values): Tensor(type: type, shape: shape, storage: .strings(Array(repeating: values.first ?? "", count: count)))
        case .mapped(let values): Tensor(type: type, shape: shape, storage: .floats(Array(repeating: values.floats.first ?? 0, count: count)))
        case .packed(let values): Tensor(type: type, shape: shape, storage: .floats(Array(repeating: values.decodedFloats.first ?? 0, count: count)))
        }
    }
}
