import Dispatch
import Foundation
import ModelLoader
import ModelRuntime

/// Triton's generate extension for decoders: `POST …/generate` answers once with every token,
/// `…/generate_stream` sends one server-sent event per token as it is chosen.
///
/// A generation is one task of the scheduler: it waits in the queue like an inference, then holds
/// one worker from its prefill to its last token (`TextGenerator`'s decode loop), pushing tokens
/// through a `GenerationChannel`. The connection's own thread (one per connection) waits for
/// them; nothing of libmicrohttpd's is held but that connection's thread. Errors before the first
/// token are answered with a status, as `/infer` answers them; later ones end the stream with an
/// error event. The deadline (`--timeout` from arrival, or the drain's end) is checked before
/// every token; the client's departure is noticed while waiting for one (the first included: a
/// generation still queued leaves the queue), and ends the generation before its next token.
///
/// A slow reader never holds the worker: the generation runs at the decoder's speed and its
/// tokens wait in the channel (8 bytes each, `max_tokens` at most); their events are written as
/// the connection sends them, `eventsPerRead` at a time, so a stream holds one such piece of
/// text however far behind its client reads.
extension InferenceService {
    /// How long a streaming read waits for a token before looking whether the client is still there.
    static let streamPollSeconds = 0.05
    /// Events written into one piece of a streamed body at most (~100 bytes each): what a stream
    /// holds of text beyond its token ids, however slowly its client reads.
    static let eventsPerRead = 32

    func generate(_ name: String, _ request: HTTPRequest, streaming: Bool) throws(RequestError) -> HTTPResponse {
        let arrival = DispatchTime.now().uptimeNanoseconds
        let channel = GenerationChannel()
        let parsed: GenerateRequest
        let ticket: InferenceScheduler.Ticket
        do throws(RequestError) {
            if let encoding = request.header("Content-Encoding"), !encoding.isEmpty, encoding.lowercased() != "identity" {
                throw RequestError.unsupportedEncoding(encoding)
            }
            let (path, _) = try describe(name)
            parsed = try GenerateRequest.decode(body: request.body)
            let request = parsed
            ticket = try scheduler.enqueue(path: path) { queueNanoseconds in
                self.runGeneration(model: name, path: path, request: request, channel: channel,
                                   arrival: arrival, queueNanoseconds: queueNanoseconds)
            }.get()
        } catch {
            if error != .unknownModel(name) {
                metrics.recordFailure(model: name, reason: error.metricReason, totalNanoseconds: DispatchTime.now().uptimeNanoseconds - arrival)
                statistics.recordFailure(model: name, nanoseconds: DispatchTime.now().uptimeNanoseconds - arrival)
            }
            throw error
        }
        // From here the channel's end is counted in the metrics, by whichever side ends it.
        switch wait(for: request, until: generationDeadline(arrival: arrival), channel.waitForStart) {
        case .done: break
        case .expired:
            scheduler.withdraw(ticket)
            end(channel, .failed(expiry(arrival: arrival)), model: name, arrival: arrival, queueNanoseconds: 0)
        case .clientGone:
            // Queued still, it leaves the queue; computing, it stops before its next token.
            scheduler.withdraw(ticket)
            end(channel, .abandoned, model: name, arrival: arrival, queueNanoseconds: 0)
            throw .clientGone
        }
        var (tokens, ending) = channel.snapshot
        if tokens.isEmpty, case .failed(let error)? = ending { throw error }
        let prefix = Self.answerPrefix(model: name, id: parsed.id)
        if streaming {
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache")],
                                stream: events(of: channel, prefix: prefix, model: name, request: request, arrival: arrival))
        }
        // The worker checks the deadline before every token; one prediction's time past it at most.
        switch wait(for: request, until: generationDeadline(arrival: arrival) + 1_000_000_000, channel.waitForEnd) {
        case .done: break
        case .expired: end(channel, .failed(expiry(arrival: arrival)), model: name, arrival: arrival, queueNanoseconds: 0)
        case .clientGone:
            end(channel, .abandoned, model: name, arrival: arrival, queueNanoseconds: 0)
            throw .clientGone
        }
        (tokens, ending) = channel.snapshot
        if case .failed(let error)? = ending { throw error }
        let body = prefix + ",\"output_ids\":[" + tokens.map(String.init).joined(separator: ",") + "]}"
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }

    /// How a wait of the connection's thread for the generation ended.
    private enum Wait {
        case done, expired, clientGone
    }

    /// Waits with `wait` (a channel's wait until a time) until it is done or `deadline` (uptime
    /// nanoseconds) passes, looking every 20 ms whether the request's client left meanwhile.
    private func wait(for request: HTTPRequest, until deadline: UInt64, _ wait: (DispatchTime) -> Bool) -> Wait {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            let slice = request.clientGone == nil ? deadline : min(deadline, now + InferenceScheduler.clientPollNanoseconds)
            if wait(DispatchTime(uptimeNanoseconds: slice)) { return .done }
            if DispatchTime.now().uptimeNanoseconds >= deadline { return .expired }
            if let clientGone = request.clientGone, clientGone() { return .clientGone }
        }
    }

    /// The streamed body: the channel's tokens as server-sent events; the answer's end (the client
    /// gone included) ends the generation.
    private func events(of channel: GenerationChannel, prefix: String, model: String, request: HTTPRequest, arrival: UInt64) -> HTTPBodyStream {
        HTTPBodyStream(next: {
            let next = channel.next(waitingUpTo: Self.streamPollSeconds, atMost: Self.eventsPerRead)
            if case .failed(let error) = next, error.status >= 500 {
                self.log.write("error", error.description, [("method", request.method), ("path", request.path), ("status", "200, then an error event")])
            }
            return Self.event(next, prefix: prefix)
        }, finish: {
            self.end(channel, .abandoned, model: model, arrival: arrival, queueNanoseconds: 0)
        })
    }

    /// The generation's task, on a worker: loads, checks the decoder and the prompt, then chooses
    /// tokens while the channel is open and the deadline is ahead.
    private func runGeneration(model name: String, path: String, request: GenerateRequest, channel: GenerationChannel,
                               arrival: UInt64, queueNanoseconds: UInt64) {
        guard channel.isOpen else { return }
        let computeStart = DispatchTime.now().uptimeNanoseconds
        func finish(_ ending: GenerationChannel.End) {
            end(channel, ending, model: name, arrival: arrival, queueNanoseconds: queueNanoseconds,
                computeNanoseconds: DispatchTime.now().uptimeNanoseconds - computeStart)
        }
        let lease: ResourceLease<Model>
        switch Self.lease(path, in: cache) {
        case .success(let leased): lease = leased
        case .failure(let error): return finish(.failed(.loadFailed(model: name, reason: error.description)))
        }
        defer { lease.release() }
        let generation: Generation
        do throws(GenerationError) {
            generation = try TextGenerator(model: lease.model).start(prompt: request.inputIDs, options: request.options)
        } catch {
            return finish(.failed(.badRequest(Self.message(for: error, model: name))))
        }
        var previous = arrival
        while true {
            if options.tokenDelayMilliseconds > 0 { usleep(UInt32(clamping: options.tokenDelayMilliseconds * 1000)) }
            // Ended by the connection: the client went away, or its deadline passed while it waited.
            guard channel.isOpen else { return }
            if DispatchTime.now().uptimeNanoseconds >= generationDeadline(arrival: arrival) {
                return finish(.failed(expiry(arrival: arrival)))
            }
            let step: GenerationStep?
            let stepStart = DispatchTime.now().uptimeNanoseconds
            do throws(GenerationError) {
                step = try generation.next()
            } catch {
                return finish(.failed(.inferenceFailed(model: name, reason: error.description)))
            }
            guard let step else { return finish(.completed) }
            metrics.recordExecution(model: name)
            let now = DispatchTime.now().uptimeNanoseconds
            statistics.recordExecution(model: name, batchSize: 1, computeNanoseconds: now - stepStart)
            metrics.recordToken(model: name, first: generation.tokens.count == 1, seconds: Double(now - previous) / 1e9)
            previous = now
            channel.push(step.token)
        }
    }

    /// Ends the channel; the side that does counts the request in the metrics.
    private func end(_ channel: GenerationChannel, _ ending: GenerationChannel.End, model: String, arrival: UInt64,
                     queueNanoseconds: UInt64, computeNanoseconds: UInt64 = 0) {
        let metrics = self.metrics
        let statistics = self.statistics
        channel.close(ending) {
            let total = DispatchTime.now().uptimeNanoseconds - arrival
            switch ending {
            case .completed:
                metrics.recordSuccess(model: model, totalNanoseconds: total, queueNanoseconds: queueNanoseconds, computeNanoseconds: computeNanoseconds)
                statistics.recordSuccess(model: model, timing: RequestTiming(total: total, queue: queueNanoseconds, compute: computeNanoseconds))
            case .failed(let error):
                metrics.recordFailure(model: model, reason: error.metricReason, totalNanoseconds: total)
                statistics.recordFailure(model: model, nanoseconds: total)
            case .abandoned:
                metrics.recordFailure(model: model, reason: "CANCELED", totalNanoseconds: total)
                statistics.recordFailure(model: model, nanoseconds: total)
            }
        }
    }

    /// The generation's deadline (uptime nanoseconds): `--timeout` from arrival, or the drain's end if sooner.
    private func generationDeadline(arrival: UInt64) -> UInt64 {
        let own = arrival + UInt64(options.timeoutMilliseconds) * 1_000_000
        return min(own, drainEnd.withLock { $0 } ?? .max)
    }

    /// Why the deadline passed: the drain's end, or the request's own timeout.
    private func expiry(arrival: UInt64) -> RequestError {
        let own = arrival + UInt64(options.timeoutMilliseconds) * 1_000_000
        if let drainEnd = drainEnd.withLock({ $0 }), drainEnd < own { return .shuttingDown }
        return .timedOut(milliseconds: options.timeoutMilliseconds)
    }

    static func message(for error: GenerationError, model: String) -> String {
        switch error {
        case .notADecoder(let reason):
            "model '\(model)' is not a decoder modelc can generate with (an int32 token input and a logits output): \(reason)"
        default: error.description
        }
    }

    /// The answer's first members: `{"model_name":…,"model_version":"1"` and the request's `id`.
    static func answerPrefix(model: String, id: String?) -> String {
        var prefix = "{\"model_name\":\(jsonString(model)),\"model_version\":\"\(version)\""
        if let id { prefix += ",\"id\":\(jsonString(id))" }
        return prefix
    }

    private static func jsonString(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes])) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The server-sent events of a streaming read: one `data:` event per token, an error event, or the end.
    static func event(_ next: GenerationChannel.Next, prefix: String) -> HTTPBodyStream.Piece {
        switch next {
        case .tokens(let index, let tokens):
            var text = ""
            for (offset, token) in tokens.enumerated() {
                text += "data: \(prefix),\"index\":\(index + offset),\"output_ids\":[\(token)]}\n\n"
            }
            return .bytes(Array(text.utf8))
        case .failed(let error):
            return .bytes(Array("data: {\"error\":\(jsonString(error.description))}\n\n".utf8))
        case .end: return .end
        case .pending: return .pending
        }
    }
}
