import Foundation
import Testing
@testable import ModelServing

/// Triton's statistics extension: the recorder's sums, and `GET …/stats` on a served repository.
@Suite struct ModelStatisticsTests {
    typealias Service = InferenceServiceTests

    static func get(_ service: InferenceService, _ path: String) async -> HTTPResponse {
        await Service.call(service, HTTPRequest(method: "GET", path: path))
    }

    /// The one model of a `/stats` answer for a single model.
    static func modelStat(_ response: HTTPResponse) -> [String: Any] {
        (Service.object(response)["model_stats"] as? [[String: Any]])?.first ?? [:]
    }

    static func duration(_ stat: [String: Any], _ name: String) -> (count: Int, ns: Int) {
        let object = (stat["inference_stats"] as? [String: Any])?[name] as? [String: Any] ?? [:]
        return (object["count"] as? Int ?? -1, object["ns"] as? Int ?? -1)
    }

    @Test func recorderSumsStagesByRequestAndExecutionsByBatchSize() {
        let recorder = StatisticsRecorder(clock: { 1_700_000_000_123 })
        recorder.recordExecution(model: "m", batchSize: 2, computeNanoseconds: 1000)
        for _ in 0..<2 {
            recorder.recordSuccess(model: "m", timing: RequestTiming(total: 5000, queue: 300, input: 100, compute: 1000, output: 200, batchSize: 2))
        }
        recorder.recordFailure(model: "m", nanoseconds: 70)
        let statistics = recorder.statistics(for: "m")
        #expect(statistics.inferenceCount == 2 && statistics.executionCount == 1 && statistics.lastInference == 1_700_000_000_123)
        #expect(statistics.success == DurationStatistic(count: 2, nanoseconds: 10000))
        #expect(statistics.fail == DurationStatistic(count: 1, nanoseconds: 70))
        #expect(statistics.queue == DurationStatistic(count: 2, nanoseconds: 600))
        #expect(statistics.computeInput == DurationStatistic(count: 2, nanoseconds: 200))
        #expect(statistics.computeInfer == DurationStatistic(count: 2, nanoseconds: 2000))
        #expect(statistics.computeOutput == DurationStatistic(count: 2, nanoseconds: 400))
        #expect(statistics.batches[2] == ModelStatistics.Batch(computeInput: .init(count: 1, nanoseconds: 200),
                                                               computeInfer: .init(count: 1, nanoseconds: 1000),
                                                               computeOutput: .init(count: 1, nanoseconds: 400)))
        #expect(recorder.statistics(for: "other") == ModelStatistics())
    }

    @Test func jsonHasTritonsFieldNames() throws {
        var statistics = ModelStatistics()
        statistics.batches[1] = ModelStatistics.Batch()
        let json = statistics.json(name: "m", version: "1")
        #expect(Set(json.keys) == ["name", "version", "last_inference", "inference_count", "execution_count", "inference_stats", "batch_stats"])
        let inference = try #require(json["inference_stats"] as? [String: Any])
        #expect(Set(inference.keys) == ["success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"])
        #expect(Set(try #require(inference["queue"] as? [String: Any]).keys) == ["count", "ns"])
        let batch = try #require((json["batch_stats"] as? [[String: Any]])?.first)
        #expect(Set(batch.keys) == ["batch_size", "compute_input", "compute_infer", "compute_output"])
        // Valid JSON as the server writes it.
        _ = try JSONSerialization.data(withJSONObject: json)
    }

    @Test func statsCountRequestsFailuresAndStagesOfAServedModel() async throws {
        try await Service.withService { service, _ in
            let before = UInt64(Date().timeIntervalSince1970 * 1000)
            for _ in 0..<5 { #expect(await Service.call(service, Service.post("/v2/models/GLMClassifier/infer", Service.iris)).status == 200) }
            let wrongShape = #"{"inputs":[{"name":"features","datatype":"FP64","shape":[3],"data":[5.1,3.5,1.4]}]}"#
            for _ in 0..<2 { #expect(await Service.call(service, Service.post("/v2/models/GLMClassifier/infer", wrongShape)).status == 400) }
            #expect(await Service.call(service, Service.post("/v2/models/GLMClassifier/infer", "{not json")).status == 400)

            for path in ["/v2/models/GLMClassifier/stats", "/v2/models/GLMClassifier/versions/1/stats"] {
                let response = await Self.get(service, path)
                #expect(response.status == 200)
                let stat = Self.modelStat(response)
                #expect(stat["name"] as? String == "GLMClassifier" && stat["version"] as? String == "1")
                #expect(stat["inference_count"] as? Int == 5)
                #expect((stat["last_inference"] as? UInt64 ?? 0) >= before)
                let success = Self.duration(stat, "success")
                let queue = Self.duration(stat, "queue")
                let input = Self.duration(stat, "compute_input")
                let infer = Self.duration(stat, "compute_infer")
                let output = Self.duration(stat, "compute_output")
                #expect(success.count == 5 && queue.count == 5 && input.count == 5 && infer.count == 5 && output.count == 5)
                #expect(Self.duration(stat, "fail").count == 3)
                #expect(queue.ns > 0 && input.ns > 0 && infer.ns > 0 && output.ns > 0)
                #expect(success.ns >= queue.ns + input.ns + infer.ns + output.ns)
                #expect(Self.duration(stat, "cache_hit") == (0, 0) && Self.duration(stat, "cache_miss") == (0, 0))
                // The wrong shape is found by the model, so those two were computed too.
                #expect(stat["execution_count"] as? Int == 7)
                let batches = try #require(stat["batch_stats"] as? [[String: Any]])
                #expect(batches.count == 1 && batches.first?["batch_size"] as? Int == 1)
                #expect((batches.first?["compute_infer"] as? [String: Any])?["count"] as? Int == 7)
            }
            #expect(await Self.get(service, "/v2/models/GLMClassifier/versions/2/stats").status == 404)
            #expect(await Self.get(service, "/v2/models/Nope/stats").status == 404)
            #expect(await Service.call(service, Service.post("/v2/models/GLMClassifier/stats", "")).status == 405)

            let all = await Self.get(service, "/v2/models/stats")
            let names = (Service.object(all)["model_stats"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            #expect(all.status == 200 && names == ["GLMClassifier", "ImageClassifier", "MLProgram", "TreeEnsembleClassifier"])

            #expect(await Service.call(service, Service.post("/v2/repository/models/GLMClassifier/unload", "")).status == 200)
            #expect(await Self.get(service, "/v2/models/GLMClassifier/stats").status == 400)
            let extensions = Service.object(await Self.get(service, "/v2"))["extensions"] as? [String] ?? []
            #expect(extensions.contains("statistics"))
        }
    }

    /// Batched requests: each batch size's executions, and every request of a batch in the counts.
    @Test(.timeLimit(.minutes(1)), arguments: [2, 4])
    func batchStatsAccountForEveryRequest(maxBatch: Int) async throws {
        try await Service.withService {
            $0.threads = 1
            $0.maxBatch = maxBatch
            $0.batchDelayMilliseconds = 200
        } _: { service, _ in
            #expect(await Service.call(service, Service.post("/v2/models/GLMClassifier/infer", Service.iris)).status == 200)
            let requests = 2 * maxBatch
            await withTaskGroup(of: Int.self) { group in
                for _ in 0..<requests {
                    group.addTask { await Service.call(service, Service.post("/v2/models/GLMClassifier/infer", Service.iris)).status }
                }
                for await status in group { #expect(status == 200) }
            }
            let stat = Self.modelStat(await Self.get(service, "/v2/models/GLMClassifier/stats"))
            #expect(stat["inference_count"] as? Int == requests + 1)
            let batches = stat["batch_stats"] as? [[String: Any]] ?? []
            var computed = 0
            var executions = 0
            for batch in batches {
                let size = batch["batch_size"] as? Int ?? 0
                let count = (batch["compute_infer"] as? [String: Any])?["count"] as? Int ?? 0
                #expect(size >= 1 && size <= maxBatch)
                computed += size * count
                executions += count
            }
            #expect(computed == requests + 1)
            #expect(stat["execution_count"] as? Int == executions)
            #expect(batches.contains { ($0["batch_size"] as? Int ?? 0) > 1 })
        }
    }
}
