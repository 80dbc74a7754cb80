import Foundation
import Testing
@testable import ModelServing

/// Reading requests: JSON tensors of every datatype, the binary tensor
/// extension, and a 400 naming the fault for each kind of malformed request.
@Suite struct InferRequestTests {
    private func body(_ json: String, binary: [UInt8] = []) -> [UInt8] { Array(json.utf8) + binary }

    @Test(arguments: TensorDataType.allCases.filter { $0 != .bytes })
    func jsonNumbersOfEveryFixedDatatype(datatype: TensorDataType) throws {
        let values = datatype == .bool ? "[true,false,true,false]" : "[[1,0],[3,2]]"
        let request = try InferRequest.decode(
            body: body(#"{"inputs":[{"name":"x","datatype":"\#(datatype.rawValue)","shape":[2,2],"data":\#(values)}]}"#), headerLength: nil)
        let tensor = try #require(request.inputs.first)
        #expect(tensor.datatype == datatype && tensor.shape == [2, 2])
        guard case .raw(let bytes) = tensor.data else { Issue.record("expected raw data"); return }
        #expect(bytes.count == 4 * (datatype.elementSize ?? 0))
        let expected: [Double] = datatype == .bool ? [1, 0, 1, 0] : [1, 0, 3, 2]
        #expect((0..<4).map { tensor.double(at: $0) } == expected)
    }

    @Test func binaryExtensionSplitsTheBodyAtTheHeaderLength() throws {
        let floats: [Float] = [1.5, -2, 3.25]
        var binary: [UInt8] = floats.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init) }
        let strings = ["ab", "", "cde"]
        var stringBytes: [UInt8] = []
        for string in strings {
            stringBytes += withUnsafeBytes(of: UInt32(string.utf8.count).littleEndian, Array.init) + Array(string.utf8)
        }
        binary += stringBytes
        let header = #"{"id":"r1","inputs":[{"name":"a","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}},"#
            + #"{"name":"s","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":\#(stringBytes.count)}}],"#
            + #""outputs":[{"name":"o","parameters":{"binary_data":true,"classification":2}}],"parameters":{"binary_data_output":true}}"#
        let request = try InferRequest.decode(body: body(header, binary: binary), headerLength: String(header.utf8.count))
        #expect(request.id == "r1" && request.binaryOutput)
        #expect(request.inputs[0].data == .raw(Array(binary.prefix(12))))
        #expect((0..<3).map { request.inputs[0].double(at: $0) } == [1.5, -2, 3.25])
        #expect(request.inputs[1].data == .bytes(strings.map { Array($0.utf8) }))
        #expect(request.outputs == [.init(name: "o", binary: true, classification: 2)])
    }

    @Test(arguments: [
        (#"{"inputs":[{"name":"x","#, nil as String?, "not valid JSON"),
        (#"[1,2]"#, nil, "must be a JSON object"),
        (#"{"outputs":[]}"#, nil, "no 'inputs' list"),
        (#"{"inputs":[{"name":"x","shape":[1],"data":[1]}]}"#, nil, "input 'x' has no 'datatype'"),
        (#"{"inputs":[{"name":"x","datatype":"FP8","shape":[1],"data":[1]}]}"#, nil, "unknown datatype 'FP8'"),
        (#"{"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]}"#, nil, "must hold whole numbers"),
        (#"{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]}"#, nil, "2 values in 'data', shape [3] needs 3"),
        (#"{"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]}"#, nil, "data[0] (300) is not a INT8 value"),
        (#"{"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":["a"]}]}"#, nil, "is not a INT32 value"),
        (#"{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]}"#, nil, "given twice"),
        (#"{"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]}"#, nil, "neither 'data' nor"),
        (#"{"inputs":[]}"#, "999", "past the body"),
        (#"{"inputs":[]}"#, "x", "is not a byte count"),
        (#"{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]}"#, nil, "past the end of the body"),
    ])
    func malformedRequestsNameTheFault(json: String, headerLength: String?, fault: String) {
        #expect {
            _ = try InferRequest.decode(body: body(json), headerLength: headerLength)
        } throws: { error in
            guard let error = error as? RequestError, case .badRequest(let message) = error else { return false }
            return message.contains(fault) && error.status == 400
        }
    }

    @Test func binaryDataOfTheWrongLengthOrLeftOverIsRefused() {
        let header = #"{"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]}"#
        #expect(throws: RequestError.badRequest("input 'a': 4 bytes of binary data, shape [2] of FP32 needs 8")) {
            _ = try InferRequest.decode(body: body(header, binary: [0, 0, 0, 0]), headerLength: String(header.utf8.count))
        }
        let ok = #"{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}"#
        #expect(throws: RequestError.badRequest("2 bytes of binary data after the last tensor that uses it")) {
            _ = try InferRequest.decode(body: body(ok, binary: [0, 0, 0, 0, 9, 9]), headerLength: String(ok.utf8.count))
        }
        let cut = #"{"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}"#
        #expect(throws: RequestError.badRequest("input 's': a BYTES element of 9 bytes is past the tensor's data")) {
            _ = try InferRequest.decode(body: body(cut, binary: [9, 0, 0, 0, 1, 2]), headerLength: String(cut.utf8.count))
        }
    }

    @Test(arguments: [1 << 10, 1 << 16])
    func tensorsOverTheLimitAre413(limit: Int) {
        let elements = limit / 4 + 1
        let json = #"{"inputs":[{"name":"big","datatype":"FP32","shape":[\#(elements)],"data":[]}]}"#
        #expect {
            _ = try InferRequest.decode(body: body(json), headerLength: nil, limits: .init(maxTensorBytes: limit))
        } throws: { error in
            (error as? RequestError)?.status == 413 && "\(error)".contains("over the tensor limit of \(limit) bytes")
        }
        let overflowing = #"{"inputs":[{"name":"big","datatype":"FP32","shape":[4294967296,4294967296],"data":[]}]}"#
        #expect(throws: RequestError.tooLarge("input 'big': shape [4294967296, 4294967296] holds too many elements")) {
            _ = try InferRequest.decode(body: body(overflowing), headerLength: nil, limits: .init(maxTensorBytes: limit))
        }
    }
}
