import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ModelServing

/// W3C trace context, the OTLP JSON encoding, the exporter's queue, and a served request's spans.
@Suite struct TraceExporterTests {
    /// Bodies a fake collector received, and what it answers.
    final class Collector: Sendable {
        let bodies = Mutex<[[UInt8]]>([])
        let outcome: TraceExporter.Outcome
        init(outcome: TraceExporter.Outcome = .sent) { self.outcome = outcome }

        func send(_ body: [UInt8]) -> TraceExporter.Outcome {
            bodies.withLock { $0.append(body) }
            return outcome
        }

        /// Every span received, as JSON objects.
        var spans: [[String: Any]] {
            bodies.withLock { $0 }.flatMap { body -> [[String: Any]] in
                let request = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
                let resources = request["resourceSpans"] as? [[String: Any]] ?? []
                return resources.flatMap { ($0["scopeSpans"] as? [[String: Any]] ?? []).flatMap { $0["spans"] as? [[String: Any]] ?? [] } }
            }
        }
    }

    static let source = OTLPTraceEncoding.Source(serviceName: "modelc-test", serviceVersion: "9.9")

    static func span(_ index: Int) -> TraceSpan {
        TraceSpan(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: String(format: "%016x", index + 1), parentSpanID: nil,
                  name: "s\(index)", kind: .server, startUnixNanoseconds: 1, endUnixNanoseconds: 2)
    }

    /// Waits (up to 10 s) for `condition`.
    static func eventually(_ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > end { return false }
            usleep(5_000)
        }
        return true
    }

    @Test(arguments: [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true),
        ("  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ", true),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later-fields", true),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false),
        ("0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("", false),
    ])
    func traceparentIsParsedAsW3CTraceContextSays(header: String, valid: Bool) {
        let context = TraceContext(traceparent: header)
        #expect((context != nil) == valid)
        if let context {
            #expect(context.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && context.parentSpanID == "00f067aa0ba902b7")
        }
    }

    @Test func aRequestContinuesASampledTraceAndSkipsAnUnsampledOne() throws {
        let continued = try #require(RequestTrace(arrival: 0, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(continued.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && continued.parentSpanID == "00f067aa0ba902b7")
        #expect(RequestTrace(arrival: 0, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00") == nil)
        let fresh = try #require(RequestTrace(arrival: 0, traceparent: "garbage"))
        #expect(fresh.parentSpanID == nil && TraceContext.isID(fresh.traceID, digits: 32))
    }

    @Test func idsAreRandomLowerCaseHexAndNeverZero() {
        let traces = (0..<1000).map { _ in TraceIDs.traceID() }
        let spans = (0..<1000).map { _ in TraceIDs.spanID() }
        #expect(traces.allSatisfy { TraceContext.isID($0, digits: 32) } && Set(traces).count == 1000)
        #expect(spans.allSatisfy { TraceContext.isID($0, digits: 16) } && Set(spans).count == 1000)
        #expect(TraceIDs.hexString([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
    }

    @Test func encodingFollowsTheOTLPJSONMapping() throws {
        let span = TraceSpan(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", parentSpanID: "1111111111111111",
                             name: "compute", kind: .internal, startUnixNanoseconds: 1_700_000_000_000_000_001,
                             endUnixNanoseconds: 1_700_000_000_000_000_002,
                             attributes: [("model.name", .string("m")), ("modelc.batch_size", .int(4)), ("flag", .bool(true))],
                             status: .error("input \"x\" failed\n"))
        let body = OTLPTraceEncoding.encode([span], source: Self.source)
        let request = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let resource = try #require((request["resourceSpans"] as? [[String: Any]])?.first)
        let resourceAttributes = (resource["resource"] as? [String: Any])?["attributes"] as? [[String: Any]] ?? []
        #expect(resourceAttributes.first?["key"] as? String == "service.name")
        #expect((resourceAttributes.first?["value"] as? [String: Any])?["stringValue"] as? String == "modelc-test")
        let scope = try #require((resource["scopeSpans"] as? [[String: Any]])?.first)
        #expect((scope["scope"] as? [String: Any])?["name"] as? String == "modelc.serve")
        let encoded = try #require((scope["spans"] as? [[String: Any]])?.first)
        #expect(encoded["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(encoded["spanId"] as? String == "00f067aa0ba902b7" && encoded["parentSpanId"] as? String == "1111111111111111")
        #expect(encoded["kind"] as? Int == 1 && encoded["name"] as? String == "compute")
        #expect(encoded["startTimeUnixNano"] as? String == "1700000000000000001")
        #expect(encoded["endTimeUnixNano"] as? String == "1700000000000000002")
        let status = try #require(encoded["status"] as? [String: Any])
        #expect(status["code"] as? Int == 2 && status["message"] as? String == "input \"x\" failed\n")
        let attributes = try #require(encoded["attributes"] as? [[String: Any]])
        #expect((attributes[1]["value"] as? [String: Any])?["intValue"] as? String == "4")
        #expect((attributes[2]["value"] as? [String: Any])?["boolValue"] as? Bool == true)
    }

    @Test(.timeLimit(.minutes(1))) func spansAreSentInBatchesAndFlushedAtShutdown() {
        let collector = Collector()
        let exporter = TraceExporter(batchSize: 4, interval: 60, source: Self.source, send: collector.send)
        exporter.submit((0..<10).map(Self.span))
        // Two full batches go at once; the last two wait for the interval or the shutdown.
        #expect(Self.eventually { exporter.counts.exported == 8 })
        #expect(collector.bodies.withLock { $0.count } == 2)
        exporter.shutdown()
        #expect(exporter.counts == TraceExporter.Counts(exported: 10))
        #expect(collector.spans.compactMap { $0["name"] as? String } == (0..<10).map { "s\($0)" })
        exporter.submit([Self.span(10)])
        #expect(exporter.counts.droppedQueueFull == 1)
    }

    @Test(.timeLimit(.minutes(1))) func aFullQueueDropsSpansWithoutWaitingForTheCollector() {
        let release = DispatchSemaphore(value: 0)
        let collector = Collector()
        let exporter = TraceExporter(capacity: 4, batchSize: 1, interval: 60, source: Self.source) { body in
            release.wait()
            return collector.send(body)
        }
        let started = DispatchTime.now().uptimeNanoseconds
        for index in 0..<20 { exporter.submit([Self.span(index)]) }
        #expect(DispatchTime.now().uptimeNanoseconds - started < 1_000_000_000)
        let dropped = exporter.counts.droppedQueueFull
        // One in the collector's hands, at most four queued.
        #expect(dropped >= 15 && dropped <= 16)
        for _ in 0..<20 { release.signal() }
        exporter.shutdown()
        #expect(exporter.counts.exported == 20 - dropped)
    }

    @Test(.timeLimit(.minutes(1))) func failedExportsAreCountedAndLoggedOnce() {
        let collector = Collector(outcome: .failed("connection refused"))
        let lines = Mutex<[String]>([])
        let exporter = TraceExporter(batchSize: 2, interval: 60, source: Self.source, log: { failing, message in
            lines.withLock { $0.append("\(failing) \(message)") }
        }, send: collector.send)
        exporter.submit((0..<6).map(Self.span))
        #expect(Self.eventually { exporter.counts.failedExports == 3 })
        exporter.shutdown()
        #expect(exporter.counts == TraceExporter.Counts(droppedExportFailed: 6, failedExports: 3))
        #expect(lines.withLock { $0 } == ["true connection refused"])
        let text = exporter.metricsText()
        #expect(text.contains("modelc_trace_spans_dropped_total{reason=\"export_failed\"} 6"))
        #expect(text.contains("modelc_trace_exports_failed_total 3"))
    }

    @Test func endpointURLsAreChecked() {
        #expect(OTLPHTTPSender.problem(with: "http://127.0.0.1:4318/v1/traces") == nil)
        #expect(OTLPHTTPSender.problem(with: "https://collector.example/v1/traces") == nil)
        #expect(OTLPHTTPSender.problem(with: "ftp://127.0.0.1/v1/traces") == "not an http or https URL")
        #expect(OTLPHTTPSender.problem(with: "not a url at all") != nil)
        #expect(OTLPHTTPSender.problem(with: "") != nil)
    }

    @Test(.timeLimit(.minutes(1))) func anUnreachableCollectorFailsTheExportWithOneLine() throws {
        // A port nobody listens on: bound, then closed.
        let sender = OTLPHTTPSender(url: "http://127.0.0.1:9/v1/traces", connectTimeoutMilliseconds: 500, timeoutMilliseconds: 1000)
        guard case .failed(let reason) = sender.post(Array("{}".utf8)) else {
            Issue.record("a post to a closed port succeeded")
            return
        }
        #expect(reason.hasPrefix("http://127.0.0.1:9/v1/traces: ") && !reason.contains("\n"))
    }

    @Test(.timeLimit(.minutes(1))) func aServedRequestsSpansNestUnderItsTraceparent() async throws {
        let collector = Collector()
        let exporter = TraceExporter(interval: 0.05, source: Self.source, send: collector.send)
        try await InferenceServiceTests.withService(tracer: exporter) { service, _ in
            let parent = ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]
            #expect(await InferenceServiceTests.call(service, InferenceServiceTests.post("/v2/models/GLMClassifier/infer",
                                                                                         InferenceServiceTests.iris, headers: parent)).status == 200)
            #expect(await InferenceServiceTests.call(service, InferenceServiceTests.post("/v2/models/GLMClassifier/infer", "{not json")).status == 400)
            #expect(Self.eventually { collector.spans.count == 6 })
        }
        let spans = collector.spans
        let byTrace = Dictionary(grouping: spans) { $0["traceId"] as? String ?? "" }
        let traced = try #require(byTrace["4bf92f3577b34da6a3ce929d0e0e4736"])
        let root = try #require(traced.first { $0["kind"] as? Int == 2 })
        #expect(root["name"] as? String == "POST /v2/models/{model}/infer" && root["parentSpanId"] as? String == "00f067aa0ba902b7")
        #expect((root["status"] as? [String: Any])?["code"] as? Int == 1)
        let rootID = try #require(root["spanId"] as? String)
        let children = traced.filter { $0["parentSpanId"] as? String == rootID }
        #expect(children.compactMap { $0["name"] as? String } == ["deserialize", "queue", "compute", "serialize"])
        func time(_ span: [String: Any], _ key: String) -> UInt64 { UInt64(span[key] as? String ?? "") ?? 0 }
        for child in children {
            #expect(time(child, "startTimeUnixNano") >= time(root, "startTimeUnixNano"))
            #expect(time(child, "endTimeUnixNano") <= time(root, "endTimeUnixNano"))
            #expect(time(child, "startTimeUnixNano") <= time(child, "endTimeUnixNano"))
        }
        let attributes = Dictionary(uniqueKeysWithValues: (root["attributes"] as? [[String: Any]] ?? []).map {
            ($0["key"] as? String ?? "", ($0["value"] as? [String: Any])?.values.first.map { "\($0)" } ?? "")
        })
        #expect(attributes["model.name"] == "GLMClassifier" && attributes["model.version"] == "1")
        #expect(attributes["http.response.status_code"] == "200" && attributes["url.path"] == "/v2/models/GLMClassifier/infer")

        // The malformed request: a trace of its own, one span, an error.
        let other = try #require(byTrace.first { $0.key != "4bf92f3577b34da6a3ce929d0e0e4736" }?.value)
        #expect(other.count == 1 && other.first?["parentSpanId"] == nil)
        #expect((other.first?["status"] as? [String: Any])?["code"] as? Int == 2)
    }

    @Test(.timeLimit(.minutes(1))) func aGRPCCallsSpansAreRPCSpansUnderItsTraceparent() async throws {
        let collector = Collector()
        let exporter = TraceExporter(interval: 0.05, source: Self.source, send: collector.send)
        try await InferenceServiceTests.withService(tracer: exporter) { service, _ in
            let traced = GRPCRequest(method: GRPCServiceTests.method + "ModelInfer", message: GRPCServiceTests.iris(),
                                     traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            #expect(await GRPCServiceTests.call(service, traced).status == .ok)
            let unknown = GRPCRequest(method: GRPCServiceTests.method + "ModelInfer", message: GRPCServiceTests.iris(model: "NoSuchModel"))
            #expect(await GRPCServiceTests.call(service, unknown).status == .notFound)
            #expect(Self.eventually { collector.spans.count >= 6 })
        }
        let spans = collector.spans
        let root = try #require(spans.first { $0["kind"] as? Int == 2 && $0["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736" })
        #expect(root["name"] as? String == "inference.GRPCInferenceService/ModelInfer" && root["parentSpanId"] as? String == "00f067aa0ba902b7")
        let rootID = try #require(root["spanId"] as? String)
        #expect(spans.filter { $0["parentSpanId"] as? String == rootID }.compactMap { $0["name"] as? String } == ["deserialize", "queue", "compute", "serialize"])
        func attributes(_ span: [String: Any]) -> [String: String] {
            Dictionary(uniqueKeysWithValues: (span["attributes"] as? [[String: Any]] ?? []).map {
                ($0["key"] as? String ?? "", ($0["value"] as? [String: Any])?.values.first.map { "\($0)" } ?? "")
            })
        }
        let ok = attributes(root)
        #expect(ok["rpc.system"] == "grpc" && ok["rpc.service"] == "inference.GRPCInferenceService" && ok["rpc.method"] == "ModelInfer")
        #expect(ok["rpc.grpc.status_code"] == "0" && ok["model.name"] == "GLMClassifier" && ok["http.response.status_code"] == nil)
        // The unknown model: a trace of its own, NOT_FOUND (5), an error.
        let failed = try #require(spans.first { $0["kind"] as? Int == 2 && $0["traceId"] as? String != "4bf92f3577b34da6a3ce929d0e0e4736" })
        #expect(attributes(failed)["rpc.grpc.status_code"] == "5" && (failed["status"] as? [String: Any])?["code"] as? Int == 2)
    }
}
