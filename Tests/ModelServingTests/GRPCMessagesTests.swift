import Foundation
import InferenceMessages
import Testing
@testable import ModelServing

/// The gRPC messages read and written by GRPCMessages. Requests are written here by hand in the
/// protobuf wire format, from the field numbers of the protocol's specification, so a wrong number
/// in Protos/inference.proto shows as a failure rather than as a mirror image.
@Suite struct GRPCMessagesTests {
    /// Protobuf wire format: what a client's library would send.
    struct Wire {
        var bytes: [UInt8] = []

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func field(_ number: UInt64, bytes payload: [UInt8]) {
            varint(number << 3 | 2)
            varint(UInt64(payload.count))
            bytes += payload
        }

        mutating func field(_ number: UInt64, _ text: String) { field(number, bytes: Array(text.utf8)) }

        mutating func field(_ number: UInt64, _ message: Wire) { field(number, bytes: message.bytes) }

        /// A packed repeated varint field (int64 shape, int32 contents).
        mutating func packed(_ number: UInt64, _ values: [Int64]) {
            var list = Wire()
            for value in values { list.varint(UInt64(bitPattern: value)) }
            field(number, list)
        }

        /// A packed repeated float field (fp32_contents).
        mutating func packed(_ number: UInt64, floats values: [Float]) {
            field(number, bytes: values.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) })
        }
    }

    /// InferInputTensor: name 1, datatype 2, shape 3, contents 5.
    static func input(_ name: String, _ datatype: String, _ shape: [Int64], contents: Wire? = nil) -> Wire {
        var tensor = Wire()
        tensor.field(1, name)
        tensor.field(2, datatype)
        tensor.packed(3, shape)
        if let contents { tensor.field(5, contents) }
        return tensor
    }

    /// ModelInferRequest: model_name 1, model_version 2, id 3, inputs 5, outputs 6, raw_input_contents 7.
    static func request(model: String = "m", id: String? = nil, inputs: [Wire], raw: [[UInt8]] = [], outputs: [Wire] = []) -> [UInt8] {
        var message = Wire()
        message.field(1, model)
        if let id { message.field(3, id) }
        for input in inputs { message.field(5, input) }
        for output in outputs { message.field(6, output) }
        for entry in raw { message.field(7, bytes: entry) }
        return message.bytes
    }

    static func decode(_ bytes: [UInt8], maxTensorBytes: Int = 1 << 20) throws(RequestError) -> InferRequest {
        try GRPCMessages.infer(bytes, limits: .init(maxTensorBytes: maxTensorBytes)).request.get()
    }

    @Test func typedAndRawContentsGiveTheSameTensor() throws {
        let values: [Float] = [1.5, -2, 0.25, 8]
        var contents = Wire()
        contents.packed(6, floats: values)
        let typed = try Self.decode(Self.request(id: "r1", inputs: [Self.input("x", "FP32", [2, 2], contents: contents)]))
        let rawBytes = values.flatMap { withUnsafeBytes(of: $0.bitPattern.littleEndian, Array.init) }
        let raw = try Self.decode(Self.request(inputs: [Self.input("x", "FP32", [2, 2])], raw: [rawBytes]))
        #expect(typed.id == "r1" && raw.id == nil)
        #expect(typed.inputs == [InferTensor(name: "x", datatype: .fp32, shape: [2, 2], data: .raw(rawBytes))])
        #expect(raw.inputs == typed.inputs)
    }

    @Test func int32AndBytesContents() throws {
        var ints = Wire()
        ints.packed(2, [7, -3])
        var strings = Wire()
        strings.field(8, "red")
        strings.field(8, "")
        let request = try Self.decode(Self.request(inputs: [Self.input("ids", "INT32", [2], contents: ints),
                                                            Self.input("s", "BYTES", [2], contents: strings)]))
        #expect(request.inputs[0].data == .raw([7, 0, 0, 0, 0xFD, 0xFF, 0xFF, 0xFF]))
        #expect(request.inputs[1].data == .bytes([Array("red".utf8), []]))
        let raw = try Self.decode(Self.request(inputs: [Self.input("s", "BYTES", [1])], raw: [[3, 0, 0, 0] + Array("abc".utf8)]))
        #expect(raw.inputs[0].data == .bytes([Array("abc".utf8)]))
    }

    @Test func classificationOfAnOutput() throws {
        var parameter = Wire()
        parameter.varint(2 << 3)  // int64_param = 2 (field 2, varint)
        parameter.varint(3)
        var entry = Wire()
        entry.field(1, "classification")
        entry.field(2, parameter)
        var output = Wire()
        output.field(1, "probs")
        output.field(2, entry)
        var contents = Wire()
        contents.packed(6, floats: [1])
        let request = try Self.decode(Self.request(inputs: [Self.input("x", "FP32", [1], contents: contents)], outputs: [output]))
        #expect(request.outputs == [.init(name: "probs", binary: nil, classification: 3)])
    }

    @Test(arguments: [
        (Self.request(inputs: [Self.input("x", "FP32", [2])], raw: [[0, 0, 0, 0]]),
         "input 'x': 4 bytes of raw contents, shape [2] of FP32 needs 8"),
        (Self.request(inputs: [Self.input("x", "FP32", [1]), Self.input("y", "FP32", [1])], raw: [[0, 0, 0, 0]]),
         "raw_input_contents has 1 entries for 2 inputs (one per input, in order)"),
        (Self.request(inputs: [Self.input("x", "FP32", [1])]), "input 'x' has neither contents nor raw_input_contents"),
        (Self.request(inputs: [Self.input("x", "FP16", [1], contents: Wire())]),
         "input 'x': FP16 has no typed contents; send it in raw_input_contents"),
        (Self.request(inputs: [Self.input("x", "FP8", [1], contents: Wire())]),
         "input 'x': unknown datatype 'FP8' (known: BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES)"),
        (Self.request(inputs: [Self.input("x", "FP32", [3], contents: Wire())]), "input 'x': 0 values in contents.fp32_contents, shape [3] needs 3"),
        (Self.request(inputs: [Self.input("x", "FP32", [-1], contents: Wire())]), "input 'x': shape [-1] must hold whole numbers ≥ 0"),
    ] as [([UInt8], String)])
    func faultsAreNamed(bytes: [UInt8], message: String) {
        #expect(throws: RequestError.badRequest(message)) { try Self.decode(bytes) }
    }

    @Test func anInt8OutOfRangeAndATensorOverTheLimitAreRefused() {
        var ints = Wire()
        ints.packed(2, [300])
        #expect(throws: RequestError.badRequest("input 'x': contents[0] (300) is not a INT8 value")) {
            try Self.decode(Self.request(inputs: [Self.input("x", "INT8", [1], contents: ints)]))
        }
        #expect(throws: RequestError.tooLarge("input 'x': 1000 FP32 elements are over the tensor limit of 100 bytes")) {
            try Self.decode(Self.request(inputs: [Self.input("x", "FP32", [1000])], raw: [[]]), maxTensorBytes: 100)
        }
        #expect(throws: RequestError.badRequest("the ModelInfer request is not a valid protobuf message")) {
            try GRPCMessages.infer([0xFF, 0xFF], limits: .init())
        }
    }

    @Test func anInferResponseCarriesEveryOutputAsRawContents() throws {
        let outputs = [InferTensor(name: "probs", datatype: .fp32, shape: [1, 2], data: .raw([0, 0, 128, 63, 0, 0, 0, 64])),
                       InferTensor(name: "label", datatype: .bytes, shape: [1], data: .bytes([Array("cat".utf8)]))]
        let bytes = GRPCMessages.inferResponse(model: "m", version: "1", id: "r", outputs: outputs)
        let message = try #require(bytes.withUnsafeBufferPointer { inference__model_infer_response__unpack(nil, $0.count, $0.baseAddress) })
        defer { inference__model_infer_response__free_unpacked(message, nil) }
        let response = message.pointee
        #expect(String(cString: response.model_name) == "m" && String(cString: response.model_version) == "1")
        #expect(String(cString: response.id) == "r" && response.n_outputs == 2 && response.n_raw_output_contents == 2)
        let second = try #require(response.outputs[1]?.pointee)
        #expect(String(cString: second.name) == "label" && String(cString: second.datatype) == "BYTES" && second.shape[0] == 1)
        let raw = response.raw_output_contents[1]
        #expect(Array(UnsafeBufferPointer(start: raw.data, count: raw.len)) == [3, 0, 0, 0] + Array("cat".utf8))
        #expect(GRPCMessages.flag(true) == [0x08, 0x01] && GRPCMessages.flag(false) == [])
    }
}

/// The gRPC service answered in process, as the gRPC server's threads call it.
@Suite struct GRPCServiceTests {
    static func call(_ service: InferenceService, _ request: GRPCRequest) async -> GRPCResponse {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: service.handle(request)) }.start()
        }
    }

    static func iris(model: String = "GLMClassifier") -> [UInt8] {
        var contents = GRPCMessagesTests.Wire()
        contents.field(7, bytes: [5.1, 3.5, 1.4, 0.2].flatMap { (value: Double) in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) })
        return GRPCMessagesTests.request(model: model, inputs: [GRPCMessagesTests.input("features", "FP64", [4], contents: contents)])
    }

    static let method = "/inference.GRPCInferenceService/"

    @Test func statusCodesKeyAndMetrics() async throws {
        try await InferenceServiceTests.withService({ $0.apiKey = "secret" }) { service, _ in
            #expect(await Self.call(service, GRPCRequest(method: Self.method + "ServerLive", message: [])) == .ok([0x08, 0x01]))
            let unauthenticated = await Self.call(service, GRPCRequest(method: Self.method + "ModelInfer", message: Self.iris()))
            #expect(unauthenticated.status == .unauthenticated)
            let answered = await Self.call(service, GRPCRequest(method: Self.method + "ModelInfer", message: Self.iris(),
                                                                 authorization: "Bearer secret"))
            #expect(answered.status == .ok && !answered.body.isEmpty)
            let unknown = await Self.call(service, GRPCRequest(method: Self.method + "ModelInfer", message: Self.iris(model: "Nope"),
                                                               apiKey: "secret"))
            #expect(unknown == .failure(.notFound, "unknown model 'Nope'"))
            let unserved = await Self.call(service, GRPCRequest(method: Self.method + "ModelStatistics", message: [], apiKey: "secret"))
            #expect(unserved.status == .unimplemented)
            #expect(service.metricsText().contains(#"modelc_inference_requests_total{model="GLMClassifier",version="1",protocol="grpc"} 1"#))
        }
    }

    /// The client's deadline bounds the request: here it waits for a batch to fill (5 s) and is
    /// answered DEADLINE_EXCEEDED at its 200 ms deadline, never computed. Timed on the calling
    /// thread itself: a loaded full suite may hold the test's continuation for seconds.
    @Test(.timeLimit(.minutes(1))) func theClientsDeadlineEndsTheRequest() async throws {
        try await InferenceServiceTests.withService({ $0.maxBatch = 2; $0.batchDelayMilliseconds = 5_000 }) { service, _ in
            _ = try service.describe("GLMClassifier")
            let (response, seconds) = await withCheckedContinuation { continuation in
                Thread {
                    let started = DispatchTime.now().uptimeNanoseconds
                    let response = service.handle(GRPCRequest(method: Self.method + "ModelInfer", message: Self.iris(),
                                                              deadline: started + 200_000_000))
                    continuation.resume(returning: (response, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9))
                }.start()
            }
            // The milliseconds left of the client's deadline when the request arrived.
            let left = Int(response.message.dropFirst("request timed out after ".count).prefix { $0.isNumber }) ?? 0
            #expect(response.status == .deadlineExceeded && response.message.hasSuffix(" ms") && (150...200).contains(left))
            #expect(seconds > 0.15 && seconds < 3)
            #expect(service.metricsText().contains(#"nv_inference_exec_count{model="GLMClassifier",version="1"} 0"#))
            let passed = await Self.call(service, GRPCRequest(method: Self.method + "ModelInfer", message: Self.iris(),
                                                              deadline: DispatchTime.now().uptimeNanoseconds))
            #expect(passed.status == .deadlineExceeded)
        }
    }
}
