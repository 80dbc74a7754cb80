import Dispatch
import FixtureSupport
import Foundation
import ModelCompiler
import SystemIO
import Testing
@testable import ModelServing

/// The generate extension answered in process on the Llama decoder fixture (its reference's greedy
/// tokens), its streamed events read as the HTTP server reads them, and every error before
/// the first token answered with the protocol's status.
@Suite struct GenerateServiceTests {
    static let prompt = "[50,87,60,17,33]"
    static let greedy = [17, 38, 8, 61, 67, 70]
    static let generate = "/v2/models/LlamaDecoderInt8/generate"
    static let stream = "/v2/models/LlamaDecoderInt8/generate_stream"

    /// The decoder fixture compiled once for the whole suite: each service is given the bundle, not the source.
    /// Every service compiling its own copy made the suite's dozen services compile at once, which on a slow
    /// 2-core machine under ThreadSanitizer outlasted the requests' 30 s timeout (source models compiled on a
    /// server's first request: InferenceServiceTests' `MLProgram.mlpackage`, the sequences' `StatefulProgram.mlpackage`).
    static let compiledDecoder: Result<String, CompileError> = Result { () throws(CompileError) -> String in
        // This process's own cache, removed when it exits.
        atexit { try? FileManager.default.removeItem(atPath: GenerateServiceTests.compileCache) }
        return try ModelCompilation.compiledBundle(for: Fixtures.path("Models/LlamaDecoderInt8.mlpackage"), cacheDirectory: compileCache)
    }
    static let compileCache = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-generate-tests-\(getpid())").path

    static func withService(_ configure: (inout ServerOptions) -> Void = { _ in },
                            _ body: (InferenceService) async throws -> Void) async throws {
        let bundle = try compiledDecoder.get()
        // A request's deadline far off unless a test sets its own: under ThreadSanitizer, beside every other suite on
        // two cores, a prompt's first plans have outlasted the default 30 s (503 before the first token).
        try await InferenceServiceTests.withService({ $0.timeoutMilliseconds = 300_000; configure(&$0) }) { service, directory in
            try FileManager.default.copyItem(atPath: bundle, toPath: directory + "/LlamaDecoderInt8.mlmodelc")
            try await body(service)
        }
    }

    /// Loads the decoder through the repository API (its status): a test's timing then starts with the model ready.
    static func load(_ service: InferenceService) async -> Int {
        await InferenceServiceTests.call(service, InferenceServiceTests.post("/v2/repository/models/LlamaDecoderInt8/load", "")).status
    }

    static func call(_ service: InferenceService, _ path: String, _ json: String, headers: [String: String] = [:]) async -> HTTPResponse {
        await InferenceServiceTests.call(service, InferenceServiceTests.post(path, json, headers: headers))
    }

    /// Reads a streamed body to its end as the HTTP server does (on a thread of its own): the events' data.
    static func events(_ response: HTTPResponse, stopAfter limit: Int = .max) async -> [[String: Any]] {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: readEvents(response, stopAfter: limit)) }.start()
        }
    }

    /// `events(_:stopAfter:)` on the calling thread.
    static func readEvents(_ response: HTTPResponse, stopAfter limit: Int = .max) -> [[String: Any]] {
        guard let stream = response.stream else { return [] }
        var text = ""
        var events: [[String: Any]] = []
        reading: while events.count < limit {
            switch stream.next() {
            case .bytes(let bytes): text += String(decoding: bytes, as: UTF8.self)
            case .pending: continue
            case .end: break reading
            }
            while let range = text.range(of: "\n\n") {
                let event = String(text[..<range.lowerBound])
                text.removeSubrange(..<range.upperBound)
                let data = event.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map { $0.dropFirst(6) }.joined(separator: "\n")
                events.append((try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? ["unparsed": data])
            }
        }
        stream.finish()
        return events
    }

    /// A stream asked for, `during(service)` run at once after its first token, and its events read,
    /// all on one thread of its own: no wait for one of Swift's cooperative threads (which a loaded
    /// suite may keep busy for seconds) between the first token and what the test does next.
    static func streamed(_ service: InferenceService, _ json: String, stopAfter limit: Int = .max,
                         during: @escaping @Sendable (InferenceService) -> Void = { _ in }) async -> (HTTPResponse, [[String: Any]], Double) {
        await withCheckedContinuation { continuation in
            Thread {
                let response = service.handle(InferenceServiceTests.post(stream, json))
                let started = DispatchTime.now().uptimeNanoseconds
                during(service)
                let events = readEvents(response, stopAfter: limit)
                continuation.resume(returning: (response, events, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9))
            }.start()
        }
    }

    @Test func generateGivesTheReferenceGreedyTokens() async throws {
        try await Self.withService { service in
            let response = await Self.call(service, Self.generate, #"{"input_ids":\#(Self.prompt),"max_tokens":6,"id":"a"}"#)
            #expect(response.status == 200 && response.stream == nil)
            let object = InferenceServiceTests.object(response)
            #expect(object["output_ids"] as? [Int] == Self.greedy)
            #expect(object["model_name"] as? String == "LlamaDecoderInt8" && object["model_version"] as? String == "1" && object["id"] as? String == "a")
            let versioned = await Self.call(service, "/v2/models/LlamaDecoderInt8/versions/1/generate",
                                            #"{"input_ids":\#(Self.prompt),"parameters":{"max_tokens":3}}"#)
            #expect(InferenceServiceTests.object(versioned)["output_ids"] as? [Int] == Array(Self.greedy.prefix(3)))
        }
    }

    @Test func generateStreamSendsOneEventPerTokenAndNothingElse() async throws {
        try await Self.withService { service in
            let response = await Self.call(service, Self.stream, #"{"input_ids":\#(Self.prompt),"max_tokens":6}"#)
            #expect(response.status == 200)
            #expect(response.headers.contains { $0 == ("Content-Type", "text/event-stream; charset=utf-8") })
            let events = await Self.events(response)
            #expect(events.compactMap { ($0["output_ids"] as? [Int])?.first } == Self.greedy)
            #expect(events.compactMap { $0["index"] as? Int } == Array(0..<6))
            #expect(events.allSatisfy { $0["model_name"] as? String == "LlamaDecoderInt8" && $0["error"] == nil })
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"modelc_generate_first_token_seconds_count{model="LlamaDecoderInt8",version="1"} 1"#))
            #expect(metrics.contains(#"modelc_generate_token_seconds_count{model="LlamaDecoderInt8",version="1"} 5"#))
            #expect(metrics.contains(#"modelc_generate_tokens_total{model="LlamaDecoderInt8",version="1"} 6"#))
            #expect(metrics.contains(#"nv_inference_request_success{model="LlamaDecoderInt8",version="1"} 1"#))
        }
    }

    @Test func theSameSeedGivesTheSameSampledTokens() async throws {
        try await Self.withService { service in
            let body = #"{"input_ids":\#(Self.prompt),"max_tokens":8,"temperature":1.5,"top_k":20,"seed":7}"#
            let first = InferenceServiceTests.object(await Self.call(service, Self.generate, body))["output_ids"] as? [Int]
            let second = InferenceServiceTests.object(await Self.call(service, Self.generate, body))["output_ids"] as? [Int]
            let streamed = await Self.events(await Self.call(service, Self.stream, body)).compactMap { ($0["output_ids"] as? [Int])?.first }
            #expect(first != nil && first?.count == 8 && first == second && first == streamed)
        }
    }

    @Test func aReaderThatStopsStopsTheGenerationAndFreesTheWorker() async throws {
        try await Self.withService({ $0.threads = 1; $0.tokenDelayMilliseconds = 200 }) { service in
            // Up to 28 new tokens fit the fixture's context of 32 positions (the last one is never fed back).
            // Asked for and left after one event on one thread: the leaving is seen at the next token.
            let (_, events, _) = await Self.streamed(service, #"{"input_ids":\#(Self.prompt),"max_tokens":27}"#, stopAfter: 1)
            #expect(events.count >= 1)
            let deadline = Date().addingTimeInterval(30)
            while service.scheduler.inFlight > 0, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(service.scheduler.inFlight == 0)
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"nv_inference_request_failure{model="LlamaDecoderInt8",version="1",reason="CANCELED"} 1"#))
            let next = await Self.call(service, Self.generate, #"{"input_ids":\#(Self.prompt),"max_tokens":2}"#)
            #expect(InferenceServiceTests.object(next)["output_ids"] as? [Int] == Array(Self.greedy.prefix(2)))
        }
    }

    /// A flag a test raises to say its client left.
    final class Departure: @unchecked Sendable {
        private let gone = Locked(false)
        func leave() { gone.withLock { $0 = true } }
        var hasLeft: Bool { gone.withLock { $0 } }
    }

    @Test(.timeLimit(.minutes(1))) func aClientLeavingWhileItsGenerationIsQueuedWithdrawsIt() async throws {
        try await Self.withService({ $0.threads = 1 }) { service in
            #expect(await Self.load(service) == 200)
            // The one worker is held until released: both generations wait in the queue.
            let gate = DispatchSemaphore(value: 0)
            // A test cut short (by its time limit) still frees the worker: the service's shutdown waits for it.
            defer { gate.signal() }
            _ = service.scheduler.enqueue(path: "held") { _ in gate.wait() }
            while service.scheduler.inFlight == 0 { try await Task.sleep(for: .milliseconds(1)) }
            for path in [Self.stream, Self.generate] {
                let departure = Departure()
                var request = InferenceServiceTests.post(path, #"{"input_ids":\#(Self.prompt),"max_tokens":6}"#)
                request.clientGone = { departure.hasLeft }
                async let answer = InferenceServiceTests.call(service, request)
                while service.scheduler.depth == 0 { try await Task.sleep(for: .milliseconds(1)) }
                departure.leave()
                let response = await answer
                #expect(response.status == 499 && response.stream == nil, "\(path): \(response.status)")
                // Answered while the worker is still held: the generation left the queue.
                #expect(service.scheduler.depth == 0 && service.scheduler.inFlight == 1)
            }
            gate.signal()
            while service.scheduler.inFlight > 0 { try await Task.sleep(for: .milliseconds(1)) }
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"nv_inference_request_failure{model="LlamaDecoderInt8",version="1",reason="CANCELED"} 2"#))
            #expect(metrics.contains(#"nv_inference_exec_count{model="LlamaDecoderInt8",version="1"} 0"#), "neither was computed")
        }
    }

    @Test(.timeLimit(.minutes(1))) func aClientLeavingAGenerateCallStopsItsGeneration() async throws {
        try await Self.withService({ $0.threads = 1; $0.tokenDelayMilliseconds = 100 }) { service in
            // Loaded first: the client is to leave mid-generation, not while the model compiles (slow in a loaded suite).
            #expect(await Self.load(service) == 200)
            let departure = Departure()
            var request = InferenceServiceTests.post(Self.generate, #"{"input_ids":\#(Self.prompt),"max_tokens":27}"#)
            request.clientGone = { departure.hasLeft }
            async let answer = InferenceServiceTests.call(service, request)
            var deadline = Date().addingTimeInterval(20)
            func tokens() async -> Int? {
                let text = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
                guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(#"modelc_generate_tokens_total{model="LlamaDecoderInt8""#) }) else { return nil }
                return line.split(separator: " ").last.flatMap { Int($0) }
            }
            while await tokens() == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            departure.leave()
            #expect(await answer.status == 499)
            deadline = Date().addingTimeInterval(20)
            while service.scheduler.inFlight > 0, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(service.scheduler.inFlight == 0)
            let generated = await tokens() ?? 0
            #expect(generated >= 1 && generated < 27, "\(generated) tokens: the generation went on after its client left")
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"nv_inference_request_failure{model="LlamaDecoderInt8",version="1",reason="CANCELED"} 1"#))
        }
    }

    @Test func aStreamsEventsAreWrittenAFewAtATimeInOrder() {
        // A reader far behind the generation (every token in before its first read) gets them all, in
        // order, each as its own event, in pieces of at most eventsPerRead events.
        let channel = GenerationChannel()
        let count = 3 * InferenceService.eventsPerRead + 5
        for token in 0..<count { channel.push(token * 7 % 96) }
        channel.close(.completed)
        var pieces: [[Int]] = []
        var text = ""
        reading: while true {
            let next = channel.next(waitingUpTo: 0, atMost: InferenceService.eventsPerRead)
            if case .tokens(let index, let tokens) = next {
                #expect(index == pieces.reduce(0) { $0 + $1.count })
                pieces.append(tokens)
            }
            switch InferenceService.event(next, prefix: #"{"model_name":"m","model_version":"1""#) {
            case .bytes(let bytes): text += String(decoding: bytes, as: UTF8.self)
            case .end: break reading
            case .pending: Issue.record("a closed channel is never pending")
            }
        }
        #expect(pieces.map(\.count) == [InferenceService.eventsPerRead, InferenceService.eventsPerRead, InferenceService.eventsPerRead, 5])
        let events = text.components(separatedBy: "\n\n").dropLast()
        #expect(events.count == count && text.hasSuffix("\n\n"))
        for (index, event) in events.enumerated() {
            #expect(event == #"data: {"model_name":"m","model_version":"1","index":\#(index),"output_ids":[\#(index * 7 % 96)]}"#)
        }
    }

    @Test(.timeLimit(.minutes(1))) func aGenerationPastItsTimeoutEndsTheStreamWithAnErrorEvent() async throws {
        // 5 s to the deadline, 27 tokens 300 ms apart (8.1 s): it passes mid-stream, and leaves the first token time to
        // come under ThreadSanitizer with the rest of the suite running beside it (1 s, then 2 s, were not always enough
        // there: the first token waits for the prompt's plans, made while other suites run on the same two cores).
        try await Self.withService({ $0.timeoutMilliseconds = 5000; $0.tokenDelayMilliseconds = 300 }) { service in
            // Loaded first: the deadline is to pass mid-stream, not while the model compiles (slow under ThreadSanitizer).
            #expect(await Self.load(service) == 200)
            // The prompt's plans made once before (kept by the model), so that the first token comes well within the
            // deadline however loaded the machine: this request may itself time out, and it does not matter.
            let warmUp = await Self.call(service, Self.generate, #"{"input_ids":\#(Self.prompt),"max_tokens":2}"#)
            let timeoutsBefore = warmUp.status == 503 ? 1 : 0
            let response = await Self.call(service, Self.stream, #"{"input_ids":\#(Self.prompt),"max_tokens":27}"#)
            #expect(response.status == 200)
            let events = await Self.events(response)
            let tokens = events.compactMap { ($0["output_ids"] as? [Int])?.first }
            #expect(tokens.count >= 1 && tokens.count < 27 && Array(tokens.prefix(6)) == Array(Self.greedy.prefix(tokens.count)))
            #expect(events.last?["error"] as? String == "request timed out after 5000 ms" && events.count == tokens.count + 1)
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"nv_inference_request_failure{model="LlamaDecoderInt8",version="1",reason="TIMEOUT"} \#(timeoutsBefore + 1)"#))
            // /generate answers the timeout with its status, not the tokens so far.
            let whole = await Self.call(service, Self.generate, #"{"input_ids":\#(Self.prompt),"max_tokens":27}"#)
            #expect(whole.status == 503 && InferenceServiceTests.object(whole)["error"] as? String == "request timed out after 5000 ms")
        }
    }

    @Test(.timeLimit(.minutes(1))) func aStreamUnderWayAtTheDrainEndsByTheDrainsEnd() async throws {
        // Loaded first: what is tested is the drain, not the load.
        try await Self.withService({ $0.tokenDelayMilliseconds = 50 }) { service in
            #expect(await Self.load(service) == 200)
            let (response, events, seconds) = await Self.streamed(service, #"{"input_ids":\#(Self.prompt),"max_tokens":27}"#) {
                $0.beginDraining(until: .now() + .milliseconds(300))
            }
            #expect(response.status == 200 && response.stream != nil, "\(response.status): \(String(decoding: response.body, as: UTF8.self))")
            #expect(events.count > 1 && events.count < 28 && events.last?["error"] as? String == "server is shutting down")
            // Not before the drain's end; and by it, whatever the machine's speed: tokens come at least 50 ms apart, so
            // a stream cut at the drain's end has sent at most 300 / 50 + 1 of them, and one more at the boundary it
            // was cut at. (A bound on the seconds failed under ThreadSanitizer beside other suites, the prompt's plan alone
            // taking over a second there.)
            #expect(seconds > 0.25)
            #expect(events.count - 1 <= 8, "\(events.count - 1) tokens after a drain of 300 ms, at least 50 ms apart")
        }
    }

    @Test func errorsBeforeTheFirstTokenAreAnsweredWithTheirStatus() async throws {
        try await Self.withService { service in
            func expect(_ path: String, _ body: String, _ status: Int, _ text: String, headers: [String: String] = [:],
                        sourceLocation: SourceLocation = #_sourceLocation) async {
                let response = await Self.call(service, path, body, headers: headers)
                let message = InferenceServiceTests.object(response)["error"] as? String ?? ""
                #expect(response.status == status && message.contains(text) && response.stream == nil, "\(response.status) \(message)",
                        sourceLocation: sourceLocation)
            }
            for path in [Self.generate, Self.stream] {
                await expect(path, "{", 400, "not valid JSON")
                await expect(path, #"{"max_tokens":2}"#, 400, "no 'input_ids'")
                await expect(path, #"{"input_ids":[50,"x"],"max_tokens":2}"#, 400, "'input_ids'[1]")
                await expect(path, #"{"input_ids":[50],"max_tokens":5000}"#, 400, "'max_tokens' is 5000")
                await expect(path, #"{"input_ids":[50,96],"max_tokens":2}"#, 400, "token 96 is outside the model's vocabulary of 96 ids")
                await expect(path, #"{"input_ids":\#(Self.prompt),"max_tokens":29}"#, 400, "exceed the model's context of 32 positions")
                await expect(path.replacingOccurrences(of: "LlamaDecoderInt8", with: "Nope"), #"{"input_ids":[1],"max_tokens":1}"#, 404, "unknown model 'Nope'")
                await expect(path.replacingOccurrences(of: "LlamaDecoderInt8", with: "GLMClassifier"), #"{"input_ids":[1],"max_tokens":1}"#,
                             400, "model 'GLMClassifier' is not a decoder")
                await expect(path, #"{"input_ids":[1],"max_tokens":1}"#, 415, "Content-Encoding", headers: ["Content-Encoding": "gzip"])
            }
            let get = await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: Self.generate))
            #expect(get.status == 405)
            let metrics = String(decoding: await InferenceServiceTests.call(service, HTTPRequest(method: "GET", path: "/metrics")).body, as: UTF8.self)
            #expect(metrics.contains(#"nv_inference_request_failure{model="LlamaDecoderInt8",version="1",reason="REJECTED"} 14"#))
        }
    }

    @Test func theKeyIsRequiredWhenOneIsSet() async throws {
        try await Self.withService({ $0.apiKey = "secret" }) { service in
            let body = #"{"input_ids":[50],"max_tokens":1}"#
            #expect(await Self.call(service, Self.stream, body).status == 401)
            #expect(await Self.call(service, Self.generate, body).status == 401)
            #expect(await Self.call(service, Self.generate, body, headers: ["Authorization": "Bearer secret"]).status == 200)
        }
    }

    @Test func aFullQueueAndTheDrainsEndAnswer503() async throws {
        try await Self.withService({ $0.threads = 1; $0.queueCapacity = 1 }) { service in
            let body = #"{"input_ids":[50],"max_tokens":1}"#
            // The one worker is held by a task until released; one more fills the queue.
            let gate = DispatchSemaphore(value: 0)
            // A test cut short (by its time limit) still frees the worker: the service's shutdown waits for it.
            defer { gate.signal() }
            _ = service.scheduler.enqueue(path: "held") { _ in gate.wait() }
            while service.scheduler.inFlight == 0 { try await Task.sleep(for: .milliseconds(1)) }
            _ = service.scheduler.enqueue(path: "queued") { _ in }
            let full = await Self.call(service, Self.stream, body)
            #expect(full.status == 503 && full.headers.contains { $0.0 == "Retry-After" })
            #expect((InferenceServiceTests.object(full)["error"] as? String)?.contains("server busy") == true)
            gate.signal()
            while service.scheduler.depth > 0 || service.scheduler.inFlight > 0 { try await Task.sleep(for: .milliseconds(1)) }
            service.beginDraining(until: .now())
            let draining = await Self.call(service, Self.generate, body)
            #expect(draining.status == 503 && InferenceServiceTests.object(draining)["error"] as? String == "server is shutting down")
        }
    }
}
