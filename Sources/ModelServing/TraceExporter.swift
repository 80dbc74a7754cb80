import Dispatch
import Foundation

/// Sends finished spans to an OpenTelemetry collector in batches, from a thread of its own, so that
/// a request never waits for the collector: `submit` only appends to a bounded queue (a span that
/// does not fit is dropped and counted), and the exporter thread posts what is queued every
/// `interval` seconds, or as soon as `batchSize` spans wait.
///
/// A failed export (the collector unreachable, an error status) drops its spans (counted) and is not
/// retried: tracing must not hold the server's memory or threads hostage to a collector that is gone.
///
/// Thread-safe.
public final class TraceExporter: @unchecked Sendable {
    /// How one export ended: sent (a 2xx status), or why not, in one line.
    public enum Outcome: Sendable, Equatable {
        case sent
        case failed(String)
    }

    /// Posts one encoded batch; called on the exporter thread only, one call at a time.
    public typealias Send = @Sendable (_ body: [UInt8]) -> Outcome

    /// What the exporter has done since it started.
    public struct Counts: Sendable, Equatable {
        /// Spans the collector accepted.
        public var exported = 0
        /// Spans dropped because the queue was full.
        public var droppedQueueFull = 0
        /// Spans dropped because their export failed.
        public var droppedExportFailed = 0
        /// Exports (batches) that failed.
        public var failedExports = 0
    }

    public let capacity: Int
    public let batchSize: Int
    public let interval: Double
    private let send: Send
    private let source: OTLPTraceEncoding.Source
    private let log: @Sendable (_ failing: Bool, _ message: String) -> Void
    /// Guards everything below.
    private let condition = NSCondition()
    private var queue: [TraceSpan] = []
    private var tally = Counts()
    private var stopping = false
    private var failing = false
    private var thread: Thread?

    /// Starts the exporter thread.
    ///
    /// - Parameters:
    ///   - capacity: spans queued at most; beyond it they are dropped.
    ///   - log: told once when exports start failing (with the reason) and once when they work again.
    public init(capacity: Int = 4096, batchSize: Int = 512, interval: Double = 1, source: OTLPTraceEncoding.Source,
                log: @escaping @Sendable (_ failing: Bool, _ message: String) -> Void = { _, _ in }, send: @escaping Send) {
        self.capacity = max(1, capacity)
        self.batchSize = max(1, batchSize)
        self.interval = interval
        self.source = source
        self.log = log
        self.send = send
        let thread = Thread { self.work() }  // keeps the exporter until `shutdown` ends it
        thread.name = "modelc-trace-export"
        self.thread = thread
        thread.start()
    }

    /// Queues finished spans for export; never blocks on the collector. Spans that do not fit in the
    /// queue are dropped (counted in `counts.droppedQueueFull`).
    public func submit(_ spans: [TraceSpan]) {
        condition.lock()
        defer { condition.unlock() }
        let room = stopping ? 0 : max(0, capacity - queue.count)
        queue.append(contentsOf: spans.prefix(room))
        tally.droppedQueueFull += spans.count - min(room, spans.count)
        if queue.count >= batchSize { condition.signal() }
    }

    public var counts: Counts {
        condition.lock()
        defer { condition.unlock() }
        return tally
    }

    /// Exports what is queued (one last time, within `timeout` seconds) and stops the thread.
    /// Spans submitted afterwards are dropped.
    public func shutdown(timeout: Double = 5) {
        condition.lock()
        stopping = true
        condition.broadcast()
        let end = Date().addingTimeInterval(timeout)
        while thread != nil, Date() < end { _ = condition.wait(until: end) }
        condition.unlock()
    }

    /// The exporter's counters as Prometheus text.
    public func metricsText() -> String {
        let counts = self.counts
        return """
            # HELP modelc_trace_spans_exported_total Spans the OpenTelemetry collector accepted
            # TYPE modelc_trace_spans_exported_total counter
            modelc_trace_spans_exported_total \(counts.exported)
            # HELP modelc_trace_spans_dropped_total Spans not exported: the export queue was full, or their export failed
            # TYPE modelc_trace_spans_dropped_total counter
            modelc_trace_spans_dropped_total{reason="queue_full"} \(counts.droppedQueueFull)
            modelc_trace_spans_dropped_total{reason="export_failed"} \(counts.droppedExportFailed)
            # HELP modelc_trace_exports_failed_total Span exports (batches) the collector did not accept or could not be sent
            # TYPE modelc_trace_exports_failed_total counter
            modelc_trace_exports_failed_total \(counts.failedExports)

            """
    }

    private func work() {
        condition.lock()
        while true {
            let due = Date().addingTimeInterval(interval)
            while !stopping, queue.count < batchSize, Date() < due { _ = condition.wait(until: due) }
            if queue.isEmpty {
                if stopping { break }
                continue
            }
            let batch = Array(queue.prefix(batchSize))
            queue.removeFirst(batch.count)
            condition.unlock()
            let outcome = send(OTLPTraceEncoding.encode(batch, source: source))
            condition.lock()
            switch outcome {
            case .sent:
                tally.exported += batch.count
                if failing {
                    failing = false
                    log(false, "trace export works again")
                }
            case .failed(let reason):
                tally.failedExports += 1
                tally.droppedExportFailed += batch.count
                if !failing {
                    failing = true
                    log(true, reason)
                }
                // Stopping with the collector gone: what is left would fail too.
                if stopping {
                    tally.droppedExportFailed += queue.count
                    queue.removeAll()
                }
            }
        }
        thread = nil
        condition.broadcast()
        condition.unlock()
    }
}
