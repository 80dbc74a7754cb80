import FixtureSupport
import Foundation
import ModelFeatures
import Testing
@testable import ModelServing

/// The protocol's endpoints answered in process, on fixture models in a
/// temporary repository (the HTTP layer is exercised by the end-to-end tests).
@Suite struct InferenceServiceTests {
    static let models = ["TreeEnsembleClassifier.mlmodel", "GLMClassifier.mlmodel", "MLProgram.mlpackage", "ImageClassifier.mlmodel"]

    static func service(_ configure: (inout ServerOptions) -> Void = { _ in }, tracer: TraceExporter? = nil) throws -> (InferenceService, String) {
        let directory = try Fixtures.temporaryDirectory("serve")
        for model in models {
            try FileManager.default.copyItem(atPath: Fixtures.path("Models/\(model)"), toPath: directory.appendingPathComponent(model).path)
        }
        let cache = try Fixtures.temporaryDirectory("serve-cache").path
        var options = ServerOptions()
        options.threads = 2
        configure(&options)
        let repository = try ModelRepository(directory: directory.path, compileCache: cache)
        return (InferenceService(repository: repository, options: options, log: ServerLog(format: .text), tracer: tracer), directory.path)
    }

    static func post(_ path: String, _ json: String, headers: [String: String] = [:]) -> HTTPRequest {
        HTTPRequest(method: "POST", path: path, headers: headers, body: Array(json.utf8))
    }

    static func object(_ response: HTTPResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }

    /// Answers on a thread of its own, as the HTTP server's connection threads do: `handle`
    /// blocks while a model loads, which must not hold one of Swift's cooperative threads.
    static func call(_ service: InferenceService, _ request: HTTPRequest) async -> HTTPResponse {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: service.handle(request)) }.start()
        }
    }

    /// Shuts the service down on a thread of its own: `shutdown()` waits for the
    /// workers, which must not hold one of Swift's cooperative threads.
    static func stop(_ service: InferenceService) async {
        await withCheckedContinuation { continuation in
            Thread {
                service.shutdown()
                continuation.resume()
            }.start()
        }
    }

    /// Runs `body` on a fresh service, then shuts it down (whether `body` threw or not).
    static func withService(_ configure: (inout ServerOptions) -> Void = { _ in }, tracer: TraceExporter? = nil,
                            _ body: (InferenceService, String) async throws -> Void) async throws {
        let (service, directory) = try Self.service(configure, tracer: tracer)
        do {
            try await body(service, directory)
        } catch {
            await stop(service)
            throw error
        }
        await stop(service)
    }

    static let iris = #"{"inputs":[{"name":"features","datatype":"FP64","shape":[4],"data":[5.1,3.5,1.4,0.2]}]}"#

    @Test func aModelsNameIsItsFilesNameWithoutTheExtension() {
        for (path, name) in [("/srv/models/GLMClassifier.mlmodel", "GLMClassifier"), ("/srv/models/Llama.mlpackage", "Llama"),
                             ("/srv/models/Net.v2.mlmodelc", "Net.v2"), ("relative/Other.mlmodel", "Other"), ("Plain", "Plain")] {
            #expect(InferenceService.name(of: path) == name)
        }
    }

    @Test func healthMetadataAndInference() async throws {
        try await Self.withService { service, _ in
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/health/live")).status == 200)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/health/ready")).status == 200)
            let metadata = Self.object(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/models/GLMClassifier")))
            #expect(metadata["platform"] as? String == "coreml" && metadata["versions"] as? [String] == ["1"])
            let inputs = try #require(metadata["inputs"] as? [[String: Any]])
            #expect(inputs.first?["datatype"] as? String == "FP64" && inputs.first?["shape"] as? [Int] == [4])
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/models/GLMClassifier/versions/1/ready")).status == 200)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/models/GLMClassifier/versions/2/ready")).status == 404)

            let response = await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris))
            #expect(response.status == 200)
            let outputs = try #require(Self.object(response)["outputs"] as? [[String: Any]])
            let byName = Dictionary(uniqueKeysWithValues: outputs.map { ($0["name"] as? String ?? "", $0) })
            #expect(byName["species"]?["datatype"] as? String == "INT64")
            let probabilities = try #require(byName["classProbability"]?["data"] as? [Double])
            #expect(probabilities.count == 3 && abs(probabilities.reduce(0, +) - 1) < 1e-9)
            // The label is the class of highest probability, as the model's own prediction says.
            let label = try #require((byName["species"]?["data"] as? [Int])?.first)
            #expect(probabilities.firstIndex(of: probabilities.max() ?? 0) == label)
        }
    }

    @Test func classificationGivesTopKScoreIndexLabel() async throws {
        try await Self.withService { service, _ in
            let json = #"{"inputs":[{"name":"features","datatype":"FP64","shape":[4],"data":[6.7,3.0,5.2,2.3]}],"#
                + #""outputs":[{"name":"classProbability","parameters":{"classification":2}},{"name":"classProbability"}]}"#
            let response = await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", json))
            let outputs = try #require(Self.object(response)["outputs"] as? [[String: Any]])
            let top = try #require(outputs[0]["data"] as? [String])
            let scores = try #require(outputs[1]["data"] as? [Double])
            #expect(outputs[0]["datatype"] as? String == "BYTES" && top.count == 2)
            let ranked = scores.enumerated().sorted { $0.element > $1.element }
            for (entry, expected) in zip(top, ranked) {
                let fields = entry.split(separator: ":").map(String.init)
                #expect(fields.count == 3)
                #expect(Int(fields[1]) == expected.offset && abs((Double(fields[0]) ?? -1) - expected.element) < 1e-5)
            }
        }
    }

    @Test(arguments: [
        ("/v2/models/Nope/infer", iris, 404, "unknown model 'Nope'"),
        ("/v2/models/GLMClassifier/infer", #"{"inputs":[{"name":"features","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]}"#, 400,
         "datatype FP32, the model takes FP64"),
        ("/v2/models/GLMClassifier/infer", #"{"inputs":[{"name":"features","datatype":"FP64","shape":[5],"data":[1,2,3,4,5]}]}"#, 400, "shape"),
        ("/v2/models/GLMClassifier/infer", #"{"inputs":[{"name":"petal","datatype":"FP64","shape":[4],"data":[1,2,3,4]}]}"#, 400,
         "has no input 'petal'"),
        ("/v2/models/GLMClassifier/infer", #"{"inputs":[]}"#, 400, "features"),
        ("/v2/models/GLMClassifier/infer", #"{"inputs":[{"name":"features""#, 400, "not valid JSON"),
        ("/v2/models/GLMClassifier/infer", iris.dropLast() + #","outputs":[{"name":"nope"}]}"#, 400, "has no output 'nope'"),
        ("/v2/models/GLMClassifier/explain", iris, 404, "no endpoint"),
        ("/v3", "", 404, "no endpoint"),
    ])
    func faultsAnswerWithStatusAndError(path: String, json: String, status: Int, fault: String) async throws {
        try await Self.withService { service, _ in
            let response = await Self.call(service, Self.post(path, json))
            #expect(response.status == status)
            let message = try #require(Self.object(response)["error"] as? String)
            #expect(message.contains(fault), "\(message)")
            // The server still answers.
            #expect(await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris)).status == 200)
        }
    }

    @Test func apiKeyIsRequiredExceptOnHealth() async throws {
        try await Self.withService({ $0.apiKey = "s3cret" }) { service, _ in
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2/health/ready")).status == 200)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2")).status == 401)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2", headers: ["Authorization": "Bearer s3cre"])).status == 401)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/v2", headers: ["Authorization": "Bearer s3cret"])).status == 200)
            #expect(await Self.call(service, HTTPRequest(method: "GET", path: "/metrics", headers: ["X-API-Key": "s3cret"])).status == 200)
            #expect(InferenceService.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
            #expect(!InferenceService.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
            #expect(!InferenceService.constantTimeEqual([], Array("a".utf8)))
        }
    }

    @Test func repositoryIndexLoadAndUnload() async throws {
        try await Self.withService { service, _ in
            func index(_ readyOnly: Bool = false) async -> [String: String] {
                let response = await Self.call(service, Self.post("/v2/repository/index", readyOnly ? #"{"ready":true}"# : ""))
                let entries = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [[String: Any]] ?? []
                return Dictionary(uniqueKeysWithValues: entries.map { ($0["name"] as? String ?? "", $0["state"] as? String ?? "") })
            }
            #expect(await index().count == Self.models.count)
            #expect(await index(true).isEmpty)
            #expect(await Self.call(service, Self.post("/v2/repository/models/GLMClassifier/load", "")).status == 200)
            #expect(await index(true) == ["GLMClassifier": "READY"])
            #expect(await Self.call(service, Self.post("/v2/repository/models/GLMClassifier/unload", "")).status == 200)
            #expect(await index()["GLMClassifier"] == "UNAVAILABLE")
            #expect(service.cache.statistics.modelsResident == 0)
            let refused = await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris))
            #expect(refused.status == 400 && (Self.object(refused)["error"] as? String ?? "").contains("unloaded"))
            #expect(await Self.call(service, Self.post("/v2/repository/models/GLMClassifier/load", "")).status == 200)
            #expect(await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris)).status == 200)
            #expect(await Self.call(service, Self.post("/v2/repository/models/Nope/load", "")).status == 404)
        }
    }

    @Test func aModelDeletedWhileLoadedIsDroppedAndOthersServe() async throws {
        try await Self.withService { service, directory in
            #expect(await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris)).status == 200)
            try FileManager.default.removeItem(atPath: directory + "/GLMClassifier.mlmodel")
            #expect(await Self.call(service, Self.post("/v2/models/GLMClassifier/infer", Self.iris)).status == 404)
            #expect(service.cache.statistics.evictions == 1)
            #expect(await Self.call(service, Self.post("/v2/models/TreeEnsembleClassifier/infer", Self.iris)).status == 200)
        }
    }

    @Test(arguments: [1, 2])
    func budgetOfOneModelEvictsAndReloadsTransparently(threads: Int) async throws {
        try await Self.withService {
            $0.memoryBudget = 1
            $0.threads = threads
        } _: { service, _ in
            for _ in 0..<3 {
                for model in ["GLMClassifier", "TreeEnsembleClassifier"] {
                    #expect(await Self.call(service, Self.post("/v2/models/\(model)/infer", Self.iris)).status == 200)
                }
            }
            let statistics = service.cache.statistics
            #expect(statistics.modelsResident <= 1 && statistics.evictions >= 5 && statistics.loads >= 6)
            let metrics = String(decoding: await Self.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains("nv_inference_request_success{model=\"GLMClassifier\",version=\"1\"} 3"))
            #expect(metrics.contains("modelc_model_evictions_total \(statistics.evictions)"))
        }
    }

    @Test func imagesAsEncodedBytesAndAsPixels() async throws {
        try await Self.withService { service, _ in
            let png = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Images/top-red-bottom-blue.png")))
            let encoded = #"{"inputs":[{"name":"image","datatype":"BYTES","shape":[1],"data":["\#(png.base64EncodedString())"]}],"#
                + #""outputs":[{"name":"classLabel"}]}"#
            let response = await Self.call(service, Self.post("/v2/models/ImageClassifier/infer", encoded))
            #expect(response.status == 200)
            let pixels = (0..<(16 * 16 * 3)).map { String($0 % 251) }.joined(separator: ",")
            let raw = #"{"inputs":[{"name":"image","datatype":"UINT8","shape":[16,16,3],"data":[\#(pixels)]}]}"#
            #expect(await Self.call(service, Self.post("/v2/models/ImageClassifier/infer", raw)).status == 200)
            let notImage = #"{"inputs":[{"name":"image","datatype":"BYTES","shape":[1],"data":["bm90IGFuIGltYWdl"]}]}"#
            #expect(await Self.call(service, Self.post("/v2/models/ImageClassifier/infer", notImage)).status == 400)
        }
    }

    /// A drain's end bounds every request: one still waiting then (here for a batch to fill, 5 s)
    /// is answered 503 with Retry-After at the drain's end, not at its own, later deadline.
    @Test(.timeLimit(.minutes(1))) func aRequestStillComputingAtTheDrainsEndIsAnswered503() async throws {
        try await Self.withService({ $0.maxBatch = 2; $0.batchDelayMilliseconds = 5_000 }) { service, _ in
            #expect(await Self.call(service, Self.post("/v2/repository/models/TreeEnsembleClassifier/load", "")).status == 200)
            let started = DispatchTime.now()
            service.beginDraining(until: started + .milliseconds(300))
            let response = await Self.call(service, Self.post("/v2/models/TreeEnsembleClassifier/infer", Self.iris))
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
            #expect(response.status == 503 && Self.object(response)["error"] as? String == "server is shutting down")
            #expect(response.headers.contains { $0.0 == "Retry-After" } && response.headers.contains { $0 == ("Connection", "close") })
            #expect(seconds > 0.25 && seconds < 3)
        }
    }
}

enum FixturePath {
    static let glm = Fixtures.path("Models/GLMClassifier.mlmodel")
}
