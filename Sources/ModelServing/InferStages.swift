import Foundation

/// The moments one inference request passed through, in uptime nanoseconds (a stage it did not
/// reach stays nil): what its statistics and its spans are made from.
struct InferStages {
    let arrival: UInt64
    /// Reading the inputs out of the body and converting them (after the model is known).
    var inputStart: UInt64?
    /// Handed to the scheduler (the inputs converted).
    var queued: UInt64?
    var queueNanoseconds: UInt64 = 0
    var computeNanoseconds: UInt64 = 0
    /// 0 when no batch computed it.
    var batchSize = 0
    /// Converting the outputs and encoding the answer.
    var outputStart: UInt64?
    var outputEnd: UInt64?

    init(arrival: UInt64) { self.arrival = arrival }

    /// The stages' durations, the request ending at `end`.
    func timing(end: UInt64) -> RequestTiming {
        var timing = RequestTiming(total: end - arrival, queue: queueNanoseconds, compute: computeNanoseconds, batchSize: batchSize)
        if let inputStart, let queued { timing.input = queued - inputStart }
        if let outputStart, let outputEnd { timing.output = outputEnd - outputStart }
        return timing
    }
}

/// The trace one request's spans go to: its own span's id, and the trace and parent it continues
/// (a `traceparent` header's) or a new trace.
struct RequestTrace {
    let traceID: String
    let parentSpanID: String?
    let spanID = TraceIDs.spanID()
    /// The request's arrival, on both clocks: spans carry wall-clock times, stages uptime ones.
    private let arrivalUptime: UInt64
    private let arrivalUnix: UInt64

    /// Nil when the caller's `traceparent` says its trace is not sampled (the parent decides, as
    /// OpenTelemetry's default sampler does); a new trace when there is no valid `traceparent`.
    init?(arrival: UInt64, traceparent: String?) {
        if let parent = TraceContext(traceparent: traceparent) {
            guard parent.flags & 1 == 1 else { return nil }
            traceID = parent.traceID
            parentSpanID = parent.parentSpanID
        } else {
            traceID = TraceIDs.traceID()
            parentSpanID = nil
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let unixNow = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        let uptimeNow = DispatchTime.now().uptimeNanoseconds
        arrivalUptime = arrival
        arrivalUnix = unixNow - min(unixNow, uptimeNow - min(uptimeNow, arrival))
    }

    func unix(_ uptime: UInt64) -> UInt64 { arrivalUnix + (uptime - min(uptime, arrivalUptime)) }

    /// The request's spans: the server span (`POST /v2/models/{model}/infer`, or over gRPC
    /// `inference.GRPCInferenceService/ModelInfer`, as OpenTelemetry names RPC spans) and, for the
    /// stages it reached, its children `deserialize`, `queue`, `compute` and `serialize`.
    /// `path`: the URL path, or the gRPC method (`/inference.GRPCInferenceService/ModelInfer`).
    func spans(_ stages: InferStages, end: UInt64, model: String, path: String, protocol: InferenceService.Transport,
               failure: RequestError?) -> [TraceSpan] {
        var spans: [TraceSpan] = []
        func child(_ name: String, _ start: UInt64, _ finish: UInt64, _ attributes: [(key: String, value: TraceSpan.Value)] = []) {
            spans.append(TraceSpan(traceID: traceID, spanID: TraceIDs.spanID(), parentSpanID: spanID, name: name, kind: .internal,
                                   startUnixNanoseconds: unix(start), endUnixNanoseconds: unix(max(start, finish)), attributes: attributes))
        }
        if let inputStart = stages.inputStart, let queued = stages.queued { child("deserialize", inputStart, queued) }
        if let queued = stages.queued {
            child("queue", queued, queued + stages.queueNanoseconds)
            if stages.batchSize > 0 {
                let started = queued + stages.queueNanoseconds
                child("compute", started, started + stages.computeNanoseconds, [("modelc.batch_size", .int(Int64(stages.batchSize)))])
            }
        }
        if let outputStart = stages.outputStart, let outputEnd = stages.outputEnd { child("serialize", outputStart, outputEnd) }
        let name: String
        var attributes: [(key: String, value: TraceSpan.Value)]
        switch `protocol` {
        case .http:
            name = "POST /v2/models/{model}/infer"
            attributes = [("http.request.method", .string("POST")), ("http.route", .string("/v2/models/{model}/infer")), ("url.path", .string(path)),
                          ("http.response.status_code", .int(Int64(failure?.status ?? 200)))]
        case .grpc:
            let method = path.hasPrefix("/") ? String(path.dropFirst()) : path
            let parts = method.split(separator: "/", maxSplits: 1).map(String.init)
            name = method
            attributes = [("rpc.system", .string("grpc")), ("rpc.service", .string(parts.first ?? method)),
                          ("rpc.method", .string(parts.count > 1 ? parts[1] : method)),
                          ("rpc.grpc.status_code", .int(Int64(failure?.grpcStatus.rawValue ?? GRPCStatus.ok.rawValue)))]
        }
        attributes += [("model.name", .string(model)), ("model.version", .string(InferenceService.version))]
        if let failure { attributes.append(("error.type", .string(failure.metricReason))) }
        spans.insert(TraceSpan(traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, name: name,
                               kind: .server, startUnixNanoseconds: unix(stages.arrival), endUnixNanoseconds: unix(end),
                               attributes: attributes, status: failure.map { .error($0.description) } ?? .ok), at: 0)
        return spans
    }
}
