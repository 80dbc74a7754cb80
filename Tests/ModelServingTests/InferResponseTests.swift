import Foundation
import ModelFeatures
import Testing
@testable import ModelServing

/// Writing responses (JSON and the binary extension) and turning output
/// values into tensors, classification included.
@Suite struct InferResponseTests {
    @Test func binaryOutputsFollowTheJSONHeader() throws {
        let floats = InferTensor(name: "f", datatype: .fp32, shape: [2], data: .raw([0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]))
        let strings = InferTensor(name: "s", datatype: .bytes, shape: [2], data: .bytes([Array("ab".utf8), []]))
        let response = InferResponseEncoder.encode(model: "m", version: "1", id: "7",
                                                   outputs: [.init(tensor: floats, binary: true), .init(tensor: strings, binary: true)])
        let length = try #require(response.headers.first { $0.0 == "Inference-Header-Content-Length" }.flatMap { Int($0.1) })
        let header = try #require(try JSONSerialization.jsonObject(with: Data(response.body.prefix(length))) as? [String: Any])
        #expect(header["id"] as? String == "7" && header["model_name"] as? String == "m")
        let outputs = try #require(header["outputs"] as? [[String: Any]])
        #expect(outputs.map { ($0["parameters"] as? [String: Any])?["binary_data_size"] as? Int } == [8, 10])
        #expect(Array(response.body.dropFirst(length)) == [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 2, 0, 0, 0, 97, 98, 0, 0, 0, 0])
    }

    @Test func jsonOutputsRoundTripThroughTheRequestReader() throws {
        let tensor = TensorConversion.tensor(name: "x", value: .multiArray(MultiArray([1.5, -2, 0.25, 8], shape: [2, 2], dataType: .float32)), labels: [])
        let response = InferResponseEncoder.encode(model: "m", version: "1", id: nil, outputs: [.init(tensor: tensor, binary: false)])
        #expect(!response.headers.contains { $0.0 == "Inference-Header-Content-Length" })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        let output = try #require((object["outputs"] as? [[String: Any]])?.first)
        let asInput = try JSONSerialization.data(withJSONObject: ["inputs": [output]])
        let decoded = try InferRequest.decode(body: Array(asInput), headerLength: nil)
        #expect(decoded.inputs == [tensor])
    }

    @Test(arguments: [1, 2, 3, 5])
    func classificationIsTopKInScoreOrder(count: Int) throws {
        let labels = ["cat", "dog", "bird"]
        let value = FeatureValue.dictionary(.strings(["dog": 0.5, "bird": 0.3, "cat": 0.2]))
        let tensor = try #require(TensorConversion.classification(name: "p", value: value, labels: labels, count: count))
        let expected = ["0.500000:1:dog", "0.300000:2:bird", "0.200000:0:cat"].prefix(count)
        #expect(tensor.datatype == .bytes && tensor.shape == [expected.count])
        #expect(tensor.data == .bytes(expected.map { Array($0.utf8) }))
        // A score tensor without labels of its length gives score:index.
        let scores = TensorConversion.classification(name: "p", value: .multiArray(MultiArray([0.1, 0.7], shape: [2])), labels: labels, count: 1)
        #expect(scores?.data == .bytes([Array("0.700000:1".utf8)]))
    }

    @Test func dictionariesGoOutInTheModelsLabelOrder() {
        let tensor = TensorConversion.tensor(name: "p", value: .dictionary(.strings(["b": 0.25, "a": 0.75])), labels: ["b", "a"])
        #expect(tensor.datatype == .fp64 && tensor.shape == [2])
        #expect((0..<2).map { tensor.double(at: $0) } == [0.25, 0.75])
        let integers = TensorConversion.tensor(name: "p", value: .dictionary(.int64s([2: 0.5, 0: 0.25, 1: 0.25])), labels: [])
        #expect((0..<3).map { integers.double(at: $0) } == [0.25, 0.25, 0.5])
    }
}
