import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing
@testable import ModelServing

/// Sequences answered in process, against the model's own stateful predictions.
extension InferenceServiceTests {
    static func withStatefulService(_ configure: (inout ServerOptions) -> Void = { _ in },
                                    _ body: (InferenceService) async throws -> Void) async throws {
        try await withService(configure) { service, directory in
            try FileManager.default.copyItem(atPath: Fixtures.path("Models/StatefulProgram.mlpackage"),
                                             toPath: directory + "/StatefulProgram.mlpackage")
            try await body(service)
        }
    }

    static func statefulRequest(_ x: [Float], _ parameters: String) -> HTTPRequest {
        let data = x.map { String($0) }.joined(separator: ",")
        return post("/v2/models/StatefulProgram/infer",
                    #"{"parameters":{\#(parameters)},"inputs":[{"name":"x","datatype":"FP32","shape":[1,\#(x.count)],"data":[\#(data)]}]}"#)
    }

    static func y(_ response: HTTPResponse) -> [Float] {
        let outputs = object(response)["outputs"] as? [[String: Any]] ?? []
        return (outputs.first?["data"] as? [Double] ?? []).map(Float.init)
    }

    @Test func aSequenceGivesWhatTheModelsOwnStatefulPredictionsGive() async throws {
        let model = try Model(contentsOf: Fixtures.path("Models/StatefulProgram.mlpackage"), configuration: ModelConfiguration(threads: 1))
        let state = try #require(model.makeState())
        var generator = SystemRandomNumberGenerator()
        let xs = (0..<6).map { _ in (0..<16).map { _ in Float.random(in: -1...1, using: &generator) } }
        // An hour's idle timeout: a loaded full suite can hold this test's continuation for over a minute between steps.
        try await Self.withStatefulService({ $0.sequenceIdleTimeoutSeconds = 3600 }) { service in
            for (step, x) in xs.enumerated() {
                let expected = try #require(try model.prediction(from: ["x": .multiArray(MultiArray(x.map(Double.init), shape: [1, 16], dataType: .float32))],
                                                                 using: state)["y"]?.multiArrayValue).doubles.map(Float.init)
                let response = await Self.call(service, Self.statefulRequest(x, #""sequence_id":"s","sequence_start":\#(step == 0)"#))
                #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
                #expect(Self.y(response) == expected, "step \(step)")
                if step == 2 {
                    // Inputs refused (wrong shape) leave the sequence as it was.
                    let refused = await Self.call(service, Self.statefulRequest([1, 2], #""sequence_id":"s","sequence_end":true"#))
                    #expect(refused.status == 400)
                }
            }
            let bytes = 16 * 2 // its fp16 accumulator, held as halves
            #expect(service.cache.statistics.bytesReserved == bytes, "the live state counts against the budget")
            #expect(service.sequences.countsByModel["StatefulProgram"] == .init(live: 1, bytes: bytes, started: 1, ended: [:]))
            let end = await Self.call(service, Self.statefulRequest(xs[0], #""sequence_id":"s","sequence_end":true"#))
            #expect(end.status == 200)
            #expect(service.cache.statistics.bytesReserved == 0)
            let metrics = String(decoding: await Self.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"modelc_sequences_ended_total{model="StatefulProgram",version="1",reason="sequence_end"} 1"#))
            #expect(metrics.contains(#"modelc_sequences_live{model="StatefulProgram",version="1"} 0"#))
        }
    }

    @Test func theSequenceParametersAreReadFromEitherTransportsValues() throws {
        #expect(try SequenceParameters(parameters: ["other": .bool(true)]) == nil)
        #expect(try SequenceParameters(parameters: ["sequence_id": .uint64(.max), "sequence_start": .bool(true)])
            == .init(id: .number(.max), start: true))
        #expect(try SequenceParameters(parameters: ["sequence_id": .int64(7), "sequence_end": .bool(true)]) == .init(id: .number(7), end: true))
        #expect(try SequenceParameters(parameters: ["sequence_id": .string(""), "sequence_end": .bool(false)]) == .init(id: nil))
        #expect(throws: RequestError.badRequest("'parameters.sequence_id' must be a whole number from 0 or a string, not -3")) {
            try SequenceParameters(parameters: ["sequence_id": .int64(-3)])
        }
        #expect(throws: RequestError.badRequest("'parameters.sequence_end' must be true or false, not 1")) {
            try SequenceParameters(parameters: ["sequence_id": .uint64(1), "sequence_end": .int64(1)])
        }
    }
}
