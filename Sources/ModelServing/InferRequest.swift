import Foundation

/// An inference request of the Open Inference Protocol (REST), read from JSON
/// or from the binary tensor extension (`Inference-Header-Content-Length`).
public struct InferRequest: Sendable, Equatable {
    /// An output the client asks for.
    public struct RequestedOutput: Sendable, Equatable {
        public var name: String
        /// `parameters.binary_data`; nil follows the request's `binary_data_output`.
        public var binary: Bool?
        /// `parameters.classification`: the top K classes as `score:index:label` BYTES.
        public var classification: Int?
    }

    public var id: String?
    public var inputs: [InferTensor]
    /// Empty: every output of the model.
    public var outputs: [RequestedOutput]
    /// `parameters.binary_data_output`: outputs are binary unless they say otherwise.
    public var binaryOutput: Bool
    /// `parameters.sequence_id`, `sequence_start`, `sequence_end` (Triton's sequence extension); nil: none given.
    public var sequence: SequenceParameters?

    /// Limits on what one request may hold.
    public struct Limits: Sendable, Equatable {
        /// Bytes one tensor's elements may take.
        public var maxTensorBytes: Int
        public init(maxTensorBytes: Int = 64 << 20) { self.maxTensorBytes = maxTensorBytes }
    }

    /// Reads a request body; `headerLength` is the `Inference-Header-Content-Length` header's value.
    ///
    /// - Throws: `RequestError.badRequest` naming the fault (invalid JSON, a
    ///   tensor's missing field, a datatype, a shape that does not match its
    ///   data, binary data of the wrong length) or `.tooLarge`.
    public static func decode(body: [UInt8], headerLength: String?, limits: Limits = Limits()) throws(RequestError) -> InferRequest {
        var jsonEnd = body.count
        if let headerLength {
            guard let length = Int(headerLength.trimmingCharacters(in: .whitespaces)), length >= 0 else {
                throw .badRequest("Inference-Header-Content-Length '\(headerLength)' is not a byte count")
            }
            guard length <= body.count else {
                throw .badRequest("Inference-Header-Content-Length \(length) is past the body's \(body.count) bytes")
            }
            jsonEnd = length
        }
        let root: JSONValue
        do {
            root = try body.withUnsafeBytes { buffer throws(JSONReader.Failure) in
                try JSONReader.read(UnsafeRawBufferPointer(rebasing: buffer[0..<jsonEnd]))
            }
        } catch {
            throw .badRequest("the request is not valid JSON: \(error)")
        }
        guard case .object = root else { throw .badRequest("the request must be a JSON object") }
        var request = InferRequest(id: nil, inputs: [], outputs: [], binaryOutput: false)
        if let id = root["id"] {
            guard case .string(let text) = id else { throw .badRequest("'id' must be a string") }
            request.id = text
        }
        if let parameters = root["parameters"] {
            guard case .object = parameters else { throw .badRequest("'parameters' must be an object") }
            if let flag = parameters["binary_data_output"] {
                guard case .bool(let flag) = flag else { throw .badRequest("'parameters.binary_data_output' must be true or false") }
                request.binaryOutput = flag
            }
            request.sequence = try SequenceParameters.fromJSON(parameters)
        }
        guard let inputs = root["inputs"]?.elements else { throw .badRequest("the request has no 'inputs' list") }
        var binaryOffset = jsonEnd
        var names: Set<String> = []
        for (index, item) in inputs.enumerated() {
            let tensor = try decodeInput(item, index: index, body: body, binaryOffset: &binaryOffset, limits: limits)
            guard names.insert(tensor.name).inserted else { throw .badRequest("input '\(tensor.name)' is given twice") }
            request.inputs.append(tensor)
        }
        if binaryOffset != body.count {
            throw .badRequest("\(body.count - binaryOffset) bytes of binary data after the last tensor that uses it")
        }
        if let outputs = root["outputs"] {
            guard let outputs = outputs.elements else { throw .badRequest("'outputs' must be a list") }
            for (index, output) in outputs.enumerated() {
                guard case .string(let name)? = output["name"] else {
                    throw .badRequest("outputs[\(index)] must be an object with a 'name'")
                }
                var requested = RequestedOutput(name: name, binary: nil, classification: nil)
                if let parameters = output["parameters"] {
                    guard case .object = parameters else { throw .badRequest("output '\(name)': 'parameters' must be an object") }
                    if let flag = parameters["binary_data"] {
                        guard case .bool(let flag) = flag else { throw .badRequest("output '\(name)': 'binary_data' must be true or false") }
                        requested.binary = flag
                    }
                    if let count = parameters["classification"] {
                        guard let count = count.integer, count >= 1 else {
                            throw .badRequest("output '\(name)': 'classification' must be a positive integer")
                        }
                        requested.classification = count
                    }
                }
                request.outputs.append(requested)
            }
        }
        return request
    }

    private static func decodeInput(_ input: JSONValue, index: Int, body: [UInt8], binaryOffset: inout Int,
                                    limits: Limits) throws(RequestError) -> InferTensor {
        guard case .object = input else { throw .badRequest("inputs[\(index)] must be an object") }
        guard case .string(let name)? = input["name"] else { throw .badRequest("inputs[\(index)] has no 'name'") }
        guard case .string(let typeName)? = input["datatype"] else { throw .badRequest("input '\(name)' has no 'datatype'") }
        guard let datatype = TensorDataType(rawValue: typeName) else {
            throw .badRequest("input '\(name)': unknown datatype '\(typeName)' (known: \(TensorDataType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        guard let shapeList = input["shape"]?.elements else { throw .badRequest("input '\(name)' has no 'shape' list") }
        let shapeText = "[" + shapeList.map { value in
            if case .number(let number) = value { number == number.rounded() && abs(number) < 1e18 ? String(Int64(number)) : String(number) } else { "…" }
        }.joined(separator: ", ") + "]"
        var shape: [Int] = []
        var count = 1
        for dimension in shapeList {
            guard let dimension = dimension.integer, dimension >= 0 else {
                throw .badRequest("input '\(name)': shape \(shapeText) must hold whole numbers ≥ 0")
            }
            let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
            guard !overflow else { throw .tooLarge("input '\(name)': shape \(shapeText) holds too many elements") }
            shape.append(dimension)
            count = product
        }
        if let size = datatype.elementSize, count > limits.maxTensorBytes / size {
            throw .tooLarge("input '\(name)': \(count) \(typeName) elements are over the tensor limit of \(limits.maxTensorBytes) bytes")
        }
        var binarySize: Int?
        if let size = input["parameters"]?["binary_data_size"] {
            guard let size = size.integer, size >= 0 else { throw .badRequest("input '\(name)': 'binary_data_size' must be a byte count") }
            binarySize = size
        }
        if let binarySize {
            guard input["data"] == nil else { throw .badRequest("input '\(name)' has both 'data' and 'binary_data_size'") }
            guard binarySize <= body.count - binaryOffset else {
                throw .badRequest("input '\(name)': binary_data_size \(binarySize) is past the end of the body")
            }
            let slice = Array(body[binaryOffset..<(binaryOffset + binarySize)])
            binaryOffset += binarySize
            if let size = datatype.elementSize {
                guard binarySize == count * size else {
                    throw .badRequest("input '\(name)': \(binarySize) bytes of binary data, shape \(shape) of \(typeName) needs \(count * size)")
                }
                return InferTensor(name: name, datatype: datatype, shape: shape, data: .raw(slice))
            }
            guard binarySize <= limits.maxTensorBytes else {
                throw .tooLarge("input '\(name)': \(binarySize) bytes are over the tensor limit of \(limits.maxTensorBytes) bytes")
            }
            let elements = try splitBytes(slice, name: name)
            guard elements.count == count else {
                throw .badRequest("input '\(name)': \(elements.count) BYTES elements, shape \(shape) needs \(count)")
            }
            return InferTensor(name: name, datatype: datatype, shape: shape, data: .bytes(elements))
        }
        guard let data = input["data"] else { throw .badRequest("input '\(name)' has neither 'data' nor 'parameters.binary_data_size'") }
        var flat: [JSONValue] = []
        var numbers: [Double] = []
        flatten(data, values: &flat, numbers: &numbers)
        let total = flat.count + numbers.count
        guard total == count else {
            throw .badRequest("input '\(name)': \(total) values in 'data', shape \(shape) needs \(count)")
        }
        if datatype == .bytes {
            var elements: [[UInt8]] = []
            elements.reserveCapacity(count)
            var bytes = 0
            for value in flat {
                guard case .string(let text) = value else { throw .badRequest("input '\(name)': BYTES data must be strings") }
                elements.append(Array(text.utf8))
                bytes += elements[elements.count - 1].count
            }
            guard numbers.isEmpty else { throw .badRequest("input '\(name)': BYTES data must be strings") }
            guard bytes <= limits.maxTensorBytes else {
                throw .tooLarge("input '\(name)': \(bytes) bytes are over the tensor limit of \(limits.maxTensorBytes) bytes")
            }
            return InferTensor(name: name, datatype: datatype, shape: shape, data: .bytes(elements))
        }
        var writer = RawTensorWriter(datatype: datatype, capacity: count)
        if flat.isEmpty {
            for (position, number) in numbers.enumerated() where !writer.append(number) {
                throw .badRequest("input '\(name)': data[\(position)] (\(JSONValue.text(number))) is not a \(typeName) value")
            }
        } else {
            // Mixed or nested: walk the values in order.
            var ordered: [JSONValue] = []
            flattenInOrder(data, into: &ordered)
            for (position, value) in ordered.enumerated() where !writer.append(json: value) {
                throw .badRequest("input '\(name)': data[\(position)] (\(value.text)) is not a \(typeName) value")
            }
        }
        return InferTensor(name: name, datatype: datatype, shape: shape, data: .raw(writer.bytes))
    }

    /// BYTES elements of the binary extension: each a 4-byte little-endian length, then the bytes.
    static func splitBytes(_ data: [UInt8], name: String) throws(RequestError) -> [[UInt8]] {
        var elements: [[UInt8]] = []
        var offset = 0
        while offset < data.count {
            guard data.count - offset >= 4 else { throw .badRequest("input '\(name)': a BYTES element's length is cut short") }
            let length = Int(data[offset]) | Int(data[offset + 1]) << 8 | Int(data[offset + 2]) << 16 | Int(data[offset + 3]) << 24
            offset += 4
            guard length <= data.count - offset else {
                throw .badRequest("input '\(name)': a BYTES element of \(length) bytes is past the tensor's data")
            }
            elements.append(Array(data[offset..<(offset + length)]))
            offset += length
        }
        return elements
    }

    /// Counts a `data` value: numbers of number arrays into `numbers`, anything else into `values`.
    private static func flatten(_ value: JSONValue, values: inout [JSONValue], numbers: inout [Double]) {
        switch value {
        case .numbers(let list): numbers += list
        case .array(let list): for item in list { flatten(item, values: &values, numbers: &numbers) }
        default: values.append(value)
        }
    }

    private static func flattenInOrder(_ value: JSONValue, into ordered: inout [JSONValue]) {
        switch value {
        case .numbers(let list): ordered += list.map { .number($0) }
        case .array(let list): for item in list { flattenInOrder(item, into: &ordered) }
        default: ordered.append(value)
        }
    }
}
