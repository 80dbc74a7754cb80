import Foundation
import ModelFeatures

/// Writes an inference response: JSON, or the JSON header followed by binary
/// tensor data (with `Inference-Header-Content-Length`) when any output is binary.
public enum InferResponseEncoder {
    /// One output to send, and whether as binary data.
    public struct Output: Sendable {
        public var tensor: InferTensor
        public var binary: Bool
        public init(tensor: InferTensor, binary: Bool) {
            self.tensor = tensor
            self.binary = binary
        }
    }

    /// The response body and its extra headers.
    public static func encode(model: String, version: String, id: String?, outputs: [Output]) -> HTTPResponse {
        var header = "{\"model_name\":" + FeatureJSON.quoted(model) + ",\"model_version\":" + FeatureJSON.quoted(version)
        if let id { header += ",\"id\":" + FeatureJSON.quoted(id) }
        header += ",\"outputs\":["
        var binary: [UInt8] = []
        for (index, output) in outputs.enumerated() {
            if index > 0 { header += "," }
            let tensor = output.tensor
            header += "{\"name\":" + FeatureJSON.quoted(tensor.name) + ",\"datatype\":\"" + tensor.datatype.rawValue + "\",\"shape\":["
                + tensor.shape.map(String.init).joined(separator: ",") + "]"
            if output.binary {
                let start = binary.count
                switch tensor.data {
                case .raw(let bytes): binary += bytes
                case .bytes(let elements):
                    for element in elements {
                        withUnsafeBytes(of: UInt32(element.count).littleEndian) { binary += $0 }
                        binary += element
                    }
                }
                header += ",\"parameters\":{\"binary_data_size\":\(binary.count - start)}}"
            } else {
                header += ",\"data\":" + jsonData(tensor) + "}"
            }
        }
        header += "]}"
        var body = Array(header.utf8)
        if binary.isEmpty && !outputs.contains(where: \.binary) {
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
        }
        let headerLength = body.count
        body += binary
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream"),
                                                   ("Inference-Header-Content-Length", String(headerLength))], body: body)
    }

    /// A tensor's elements as a flat JSON list.
    static func jsonData(_ tensor: InferTensor) -> String {
        switch tensor.data {
        case .bytes(let elements):
            return "[" + elements.map { FeatureJSON.quoted(String(decoding: $0, as: UTF8.self)) }.joined(separator: ",") + "]"
        case .raw:
            var text = "["
            text.reserveCapacity(tensor.elementCount * 12)
            for index in 0..<tensor.elementCount {
                if index > 0 { text += "," }
                switch tensor.datatype {
                case .bool: text += tensor.double(at: index) != 0 ? "true" : "false"
                case .fp32, .fp16:
                    let value = Float(tensor.double(at: index))
                    text += value.isFinite ? "\(value)" : "null"
                case .fp64:
                    let value = tensor.double(at: index)
                    text += value.isFinite ? "\(value)" : "null"
                case .int64: text += String(tensor.int64(at: index))
                default: text += String(Int64(tensor.double(at: index)))
                }
            }
            return text + "]"
        }
    }
}
