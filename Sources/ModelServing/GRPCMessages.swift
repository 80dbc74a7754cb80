import Foundation
import InferenceMessages

/// The Open Inference Protocol's gRPC messages (Protos/inference.proto) read into this module's
/// values and written from them, through the protobuf-c code generated from the .proto
/// (InferenceMessages). No transport here: bytes in, bytes out.
enum GRPCMessages {
    /// A decoded ModelInfer request: the model it names and the request as the REST path has it,
    /// or why the request cannot be read (counted against the model, as REST counts its faults).
    struct Infer: Equatable {
        var model: String
        var version: String
        var request: Result<InferRequest, RequestError>
    }

    /// The model a ModelReady or ModelMetadata request names (the two messages are alike).
    static func modelReference(_ bytes: [UInt8], method: String) throws(RequestError) -> (name: String, version: String) {
        guard let message = bytes.withUnsafeBufferPointer({ inference__model_ready_request__unpack(nil, $0.count, $0.baseAddress) }) else {
            throw .badRequest("the \(method) request is not a valid protobuf message")
        }
        defer { inference__model_ready_request__free_unpacked(message, nil) }
        return (string(message.pointee.name), string(message.pointee.version))
    }

    /// Reads a ModelInfer request: its inputs from typed `contents` or from `raw_input_contents`
    /// (one entry per input, in order), within `limits`.
    ///
    /// - Throws: `RequestError.badRequest` when the message is not a ModelInferRequest; a fault in
    ///   its tensors is the `request`'s failure: `.badRequest` naming it (a datatype, a shape,
    ///   contents that do not fill the shape or are of the wrong type, raw contents of the wrong
    ///   length) or `.tooLarge`.
    static func infer(_ bytes: [UInt8], limits: InferRequest.Limits) throws(RequestError) -> Infer {
        guard let message = bytes.withUnsafeBufferPointer({ inference__model_infer_request__unpack(nil, $0.count, $0.baseAddress) }) else {
            throw .badRequest("the ModelInfer request is not a valid protobuf message")
        }
        defer { inference__model_infer_request__free_unpacked(message, nil) }
        let request = message.pointee
        return Infer(model: string(request.model_name), version: string(request.model_version),
                     request: Result { () throws(RequestError) in try inferRequest(request, limits: limits) })
    }

    private static func inferRequest(_ request: Inference__ModelInferRequest, limits: InferRequest.Limits) throws(RequestError) -> InferRequest {
        var decoded = InferRequest(id: nil, inputs: [], outputs: [], binaryOutput: false)
        let id = string(request.id)
        decoded.id = id.isEmpty ? nil : id
        let raw = request.n_raw_input_contents
        if raw > 0, raw != request.n_inputs {
            throw .badRequest("raw_input_contents has \(raw) entries for \(request.n_inputs) inputs (one per input, in order)")
        }
        decoded.sequence = try sequenceParameters(request)
        var names: Set<String> = []
        for index in 0..<request.n_inputs {
            guard let input = request.inputs[index]?.pointee else { continue }
            let rawContents = raw > 0 ? request.raw_input_contents[index] : nil
            let tensor = try inputTensor(input, raw: rawContents, limits: limits)
            guard names.insert(tensor.name).inserted else { throw .badRequest("input '\(tensor.name)' is given twice") }
            decoded.inputs.append(tensor)
        }
        for index in 0..<request.n_outputs {
            guard let output = request.outputs[index]?.pointee else { continue }
            let name = string(output.name)
            var requested = InferRequest.RequestedOutput(name: name, binary: nil, classification: nil)
            for entry in 0..<output.n_parameters {
                guard let parameter = output.parameters[entry]?.pointee, string(parameter.key) == "classification" else { continue }
                guard let value = parameter.value?.pointee, let count = integer(value), count >= 1 else {
                    throw .badRequest("output '\(name)': 'classification' must be a positive integer")
                }
                requested.classification = count
            }
            decoded.outputs.append(requested)
        }
        return decoded
    }

    private static func inputTensor(_ input: Inference__ModelInferRequest__InferInputTensor, raw: ProtobufCBinaryData?,
                                    limits: InferRequest.Limits) throws(RequestError) -> InferTensor {
        let name = string(input.name)
        guard !name.isEmpty else { throw .badRequest("an input has no name") }
        let typeName = string(input.datatype)
        guard let datatype = TensorDataType(rawValue: typeName) else {
            throw .badRequest("input '\(name)': unknown datatype '\(typeName)' (known: \(TensorDataType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let shape = (0..<input.n_shape).map { Int(input.shape[$0]) }
        var count = 1
        for dimension in shape {
            guard dimension >= 0 else { throw .badRequest("input '\(name)': shape \(shape) must hold whole numbers ≥ 0") }
            let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
            guard !overflow else { throw .tooLarge("input '\(name)': shape \(shape) holds too many elements") }
            count = product
        }
        if let size = datatype.elementSize, count > limits.maxTensorBytes / size {
            throw .tooLarge("input '\(name)': \(count) \(typeName) elements are over the tensor limit of \(limits.maxTensorBytes) bytes")
        }
        if let raw {
            guard input.contents == nil else { throw .badRequest("input '\(name)' has both contents and raw_input_contents") }
            let bytes = raw.len > 0 ? Array(UnsafeBufferPointer(start: raw.data, count: raw.len)) : []
            if let size = datatype.elementSize {
                guard bytes.count == count * size else {
                    throw .badRequest("input '\(name)': \(bytes.count) bytes of raw contents, shape \(shape) of \(typeName) needs \(count * size)")
                }
                return InferTensor(name: name, datatype: datatype, shape: shape, data: .raw(bytes))
            }
            guard bytes.count <= limits.maxTensorBytes else {
                throw .tooLarge("input '\(name)': \(bytes.count) bytes are over the tensor limit of \(limits.maxTensorBytes) bytes")
            }
            let elements = try InferRequest.splitBytes(bytes, name: name)
            guard elements.count == count else {
                throw .badRequest("input '\(name)': \(elements.count) BYTES elements, shape \(shape) needs \(count)")
            }
            return InferTensor(name: name, datatype: datatype, shape: shape, data: .bytes(elements))
        }
        guard let contents = input.contents?.pointee else {
            throw .badRequest("input '\(name)' has neither contents nor raw_input_contents")
        }
        return try typedTensor(name: name, datatype: datatype, shape: shape, count: count, contents: contents, limits: limits)
    }

    /// An input from the typed list its datatype uses (INT8…INT32 in `int_contents`, UINT8…UINT32
    /// in `uint_contents`, BOOL, INT64, UINT64, FP32, FP64, BYTES in their own); FP16 has none.
    private static func typedTensor(name: String, datatype: TensorDataType, shape: [Int], count: Int,
                                    contents: Inference__InferTensorContents, limits: InferRequest.Limits) throws(RequestError) -> InferTensor {
        func check(_ given: Int, _ list: String) throws(RequestError) {
            guard given == count else {
                throw .badRequest("input '\(name)': \(given) values in contents.\(list), shape \(shape) needs \(count)")
            }
        }
        var writer = RawTensorWriter(datatype: datatype, capacity: count)
        func append(_ values: some Sequence<Double>) throws(RequestError) {
            for (position, value) in values.enumerated() where !writer.append(value) {
                throw .badRequest("input '\(name)': contents[\(position)] (\(JSONValue.text(value))) is not a \(datatype.rawValue) value")
            }
        }
        switch datatype {
        case .bool:
            try check(contents.n_bool_contents, "bool_contents")
            for index in 0..<count { writer.appendInteger(UInt8(contents.bool_contents[index] != 0 ? 1 : 0)) }
        case .int8, .int16, .int32:
            try check(contents.n_int_contents, "int_contents")
            try append((0..<count).lazy.map { Double(contents.int_contents[$0]) })
        case .uint8, .uint16, .uint32:
            try check(contents.n_uint_contents, "uint_contents")
            try append((0..<count).lazy.map { Double(contents.uint_contents[$0]) })
        case .int64:
            try check(contents.n_int64_contents, "int64_contents")
            for index in 0..<count { writer.appendInteger(contents.int64_contents[index]) }
        case .uint64:
            try check(contents.n_uint64_contents, "uint64_contents")
            for index in 0..<count { writer.appendInteger(contents.uint64_contents[index]) }
        case .fp32:
            try check(contents.n_fp32_contents, "fp32_contents")
            for index in 0..<count { writer.appendInteger(contents.fp32_contents[index].bitPattern) }
        case .fp64:
            try check(contents.n_fp64_contents, "fp64_contents")
            for index in 0..<count { writer.appendInteger(contents.fp64_contents[index].bitPattern) }
        case .fp16:
            throw .badRequest("input '\(name)': FP16 has no typed contents; send it in raw_input_contents")
        case .bytes:
            try check(contents.n_bytes_contents, "bytes_contents")
            var elements: [[UInt8]] = []
            var total = 0
            for index in 0..<count {
                let element = contents.bytes_contents[index]
                total += element.len
                guard total <= limits.maxTensorBytes else {
                    throw .tooLarge("input '\(name)': more bytes than the tensor limit of \(limits.maxTensorBytes) bytes")
                }
                elements.append(element.len > 0 ? Array(UnsafeBufferPointer(start: element.data, count: element.len)) : [])
            }
            return InferTensor(name: name, datatype: datatype, shape: shape, data: .bytes(elements))
        }
        return InferTensor(name: name, datatype: datatype, shape: shape, data: .raw(writer.bytes))
    }

    // MARK: Responses

    /// ServerLiveResponse, ServerReadyResponse and ModelReadyResponse: one bool, field 1.
    static func flag(_ value: Bool) -> [UInt8] {
        var message = Inference__ServerLiveResponse()
        inference__server_live_response__init(&message)
        message.live = value ? 1 : 0
        return pack(&message)
    }

    static func serverMetadata(name: String, version: String, extensions: [String]) -> [UInt8] {
        let memory = CMemory()
        var message = Inference__ServerMetadataResponse()
        inference__server_metadata_response__init(&message)
        message.name = memory.string(name)
        message.version = memory.string(version)
        message.n_extensions = extensions.count
        message.extensions = memory.array(extensions.map { Optional(memory.string($0)) })
        return pack(&message)
    }

    static func modelMetadata(name: String, versions: [String], platform: String, inputs: [InferenceService.TensorMetadata],
                              outputs: [InferenceService.TensorMetadata]) -> [UInt8] {
        let memory = CMemory()
        func tensors(_ list: [InferenceService.TensorMetadata]) -> UnsafeMutablePointer<UnsafeMutablePointer<Inference__ModelMetadataResponse__TensorMetadata>?> {
            memory.array(list.map { tensor in
                var entry = Inference__ModelMetadataResponse__TensorMetadata()
                inference__model_metadata_response__tensor_metadata__init(&entry)
                entry.name = memory.string(tensor.name)
                entry.datatype = memory.string(tensor.datatype.rawValue)
                entry.n_shape = tensor.shape.count
                entry.shape = memory.array(tensor.shape.map(Int64.init))
                return Optional(memory.object(entry))
            })
        }
        var message = Inference__ModelMetadataResponse()
        inference__model_metadata_response__init(&message)
        message.name = memory.string(name)
        message.n_versions = versions.count
        message.versions = memory.array(versions.map { Optional(memory.string($0)) })
        message.platform = memory.string(platform)
        message.n_inputs = inputs.count
        message.inputs = tensors(inputs)
        message.n_outputs = outputs.count
        message.outputs = tensors(outputs)
        return pack(&message)
    }

    /// A ModelInferResponse: every output's elements in `raw_output_contents`, in output order
    /// (as Triton answers; BYTES elements each after a 4-byte little-endian length).
    static func inferResponse(model: String, version: String, id: String?, outputs: [InferTensor]) -> [UInt8] {
        let memory = CMemory()
        var message = Inference__ModelInferResponse()
        inference__model_infer_response__init(&message)
        message.model_name = memory.string(model)
        message.model_version = memory.string(version)
        if let id { message.id = memory.string(id) }
        message.n_outputs = outputs.count
        message.outputs = memory.array(outputs.map { tensor in
            var entry = Inference__ModelInferResponse__InferOutputTensor()
            inference__model_infer_response__infer_output_tensor__init(&entry)
            entry.name = memory.string(tensor.name)
            entry.datatype = memory.string(tensor.datatype.rawValue)
            entry.n_shape = tensor.shape.count
            entry.shape = memory.array(tensor.shape.map(Int64.init))
            return Optional(memory.object(entry))
        })
        message.n_raw_output_contents = outputs.count
        message.raw_output_contents = memory.array(outputs.map { tensor in
            let bytes = rawBytes(tensor.data)
            return ProtobufCBinaryData(len: bytes.count, data: memory.array(bytes))
        })
        return pack(&message)
    }

    /// A tensor's elements as raw contents: little-endian elements, or length-prefixed BYTES elements.
    static func rawBytes(_ data: TensorData) -> [UInt8] {
        switch data {
        case .raw(let bytes): return bytes
        case .bytes(let elements):
            var bytes: [UInt8] = []
            bytes.reserveCapacity(elements.reduce(0) { $0 + 4 + $1.count })
            for element in elements {
                withUnsafeBytes(of: UInt32(element.count).littleEndian) { bytes += $0 }
                bytes += element
            }
            return bytes
        }
    }

    // MARK: protobuf-c

    /// A message's wire bytes (`Message` is a generated struct, whose first member is its ProtobufCMessage).
    private static func pack<Message>(_ message: inout Message) -> [UInt8] {
        withUnsafeMutablePointer(to: &message) { pointer in
            let base = UnsafePointer<ProtobufCMessage>(OpaquePointer(pointer))
            var bytes = [UInt8](repeating: 0, count: protobuf_c_message_get_packed_size(base))
            _ = bytes.withUnsafeMutableBufferPointer { protobuf_c_message_pack(base, $0.baseAddress) }
            return bytes
        }
    }

    /// The request's `sequence_id`, `sequence_start` and `sequence_end` parameters, read as the REST path reads them.
    private static func sequenceParameters(_ request: Inference__ModelInferRequest) throws(RequestError) -> SequenceParameters? {
        var found: [String: RequestParameter] = [:]
        for entry in 0..<request.n_parameters {
            guard let pair = request.parameters[entry]?.pointee, let value = pair.value?.pointee else { continue }
            let key = string(pair.key)
            guard SequenceParameters.names.contains(key) else { continue }
            found[key] = switch value.parameter_choice_case {
            case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: .bool(value.bool_param != 0)
            case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: .int64(value.int64_param)
            case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM: .uint64(value.uint64_param)
            case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM: .other(String(value.double_param))
            case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: .string(string(value.string_param))
            default: .other("no value")
            }
        }
        return try SequenceParameters(parameters: found)
    }

    private static func string(_ text: UnsafeMutablePointer<CChar>?) -> String {
        text.map { String(cString: $0) } ?? ""
    }

    private static func integer(_ parameter: Inference__InferParameter) -> Int? {
        switch parameter.parameter_choice_case {
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: Int(exactly: parameter.int64_param)
        case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM: Int(exactly: parameter.uint64_param)
        default: nil
        }
    }
}

/// C memory a message being packed points into, freed with it.
private final class CMemory {
    private var releases: [() -> Void] = []

    deinit { for release in releases { release() } }

    /// A NUL-terminated copy.
    func string(_ text: String) -> UnsafeMutablePointer<CChar> { array(Array(text.utf8CString)) }

    func array<Element>(_ values: [Element]) -> UnsafeMutablePointer<Element> {
        let pointer = UnsafeMutablePointer<Element>.allocate(capacity: max(1, values.count))
        pointer.initialize(from: values, count: values.count)
        releases.append {
            pointer.deinitialize(count: values.count)
            pointer.deallocate()
        }
        return pointer
    }

    func object<Value>(_ value: Value) -> UnsafeMutablePointer<Value> { array([value]) }
}
