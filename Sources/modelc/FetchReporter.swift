import ExitCodes
import Foundation
import ModelFetch
import Synchronization
import SystemIO

/// Shows a fetch as it runs: a one-line bar on a terminal, NDJSON events
/// for `--json`, nothing with `--quiet`.
final class FetchReporter: Sendable {
    enum Style: Sendable {
        /// Nothing but errors.
        case quiet
        /// Standard error is not a terminal: waits and retries as lines, no bar.
        case log
        /// The bar on standard error, redrawn in place, and waits and retries as lines.
        case terminal
        /// One JSON object per line on standard output.
        case json
    }

    private struct State {
        var startedAt = ContinuousClock.now
        var rateStart = ContinuousClock.now
        var rateStartBytes: UInt64 = 0
        var lastDraw: ContinuousClock.Instant?
        var lastJSON: ContinuousClock.Instant?
        var drawn = false
    }

    let style: Style
    private let label: String
    private let state = Mutex(State())

    init(style: Style, label: String) {
        self.style = style
        self.label = label
    }

    /// The style for the flags given: JSON wins, quiet silences, and the bar
    /// needs a terminal.
    static func style(json: Bool, quiet: Bool) -> Style {
        if json { return .json }
        if quiet { return .quiet }
        return isatty(STDERR_FILENO) == 1 ? .terminal : .log
    }

    /// Takes one event from the fetcher.
    func report(_ event: FetchEvent) {
        switch event {
        case .waitingForOtherProcess(let url):
            switch style {
            case .json: emit(["event": "waiting", "url": url])
            case .terminal, .log: note("waiting for another modelc process fetching it")
            case .quiet: break
            }
        case .revalidating(let url):
            if style == .json { emit(["event": "revalidate", "url": url]) }
        case .extracting(let path):
            if style == .json { emit(["event": "extract", "path": path]) }
        case .download(.started(let resumedFrom, let total)):
            state.withLock { state in
                state.rateStart = .now
                state.rateStartBytes = resumedFrom
            }
            if style == .json { emit(["event": "start", "resumedFrom": resumedFrom, "total": total.map { $0 as Any } ?? NSNull()]) }
        case .download(.progress(let bytes, let total)):
            progress(bytes: bytes, total: total)
        case .download(.retrying(let attempt, let reason, let delay)):
            let seconds = delay.inSeconds
            switch style {
            case .json: emit(["event": "retry", "attempt": attempt, "reason": reason, "delaySeconds": seconds])
            case .terminal, .log: note("attempt \(attempt) failed (\(reason)); retrying in \(String(format: "%.1f", seconds)) s")
            case .quiet: break
            }
        }
    }

    /// Prints the last event: the finished fetch.
    func done(_ fields: [String: Any]) {
        clearLine()
        if style == .json { emit(["event": "done"].merging(fields) { first, _ in first }) }
    }

    /// Prints the failure event (JSON only; the error line goes to standard error as usual).
    func failed(_ message: String, exitCode: ExitCode) {
        clearLine()
        if style == .json { emit(["event": "error", "message": message, "exitCode": Int(exitCode.rawValue)]) }
    }

    private func progress(bytes: UInt64, total: UInt64?) {
        let now = ContinuousClock.now
        switch style {
        case .quiet, .log:
            return
        case .json:
            let due = state.withLock { state -> Double? in
                if let last = state.lastJSON, now - last < .seconds(1) { return nil }
                state.lastJSON = now
                return rate(state, bytes: bytes, now: now)
            }
            guard let rate = due else { return }
            emit(["event": "progress", "bytes": bytes, "total": total.map { $0 as Any } ?? NSNull(), "bytesPerSecond": Int(rate)])
        case .terminal:
            let due = state.withLock { state -> Double? in
                if let last = state.lastDraw, now - last < .milliseconds(100), bytes != total { return nil }
                state.lastDraw = now
                state.drawn = true
                return rate(state, bytes: bytes, now: now)
            }
            guard let rate = due else { return }
            Output.error("\r\u{1B}[K" + Self.line(label: label, bytes: bytes, total: total, bytesPerSecond: rate))
        }
    }

    private func rate(_ state: State, bytes: UInt64, now: ContinuousClock.Instant) -> Double {
        let seconds = (now - state.rateStart).inSeconds
        guard seconds > 0.05 else { return 0 }
        return Double(bytes - min(bytes, state.rateStartBytes)) / seconds
    }

    /// "NAME [#####     ] 45% 12.3 MB/27.0 MB 8.1 MB/s ETA 2s", or without
    /// bar, percentage and ETA when the size is unknown.
    static func line(label: String, bytes: UInt64, total: UInt64?, bytesPerSecond: Double) -> String {
        var text = label
        if let total, total > 0 {
            let percent = Int(min(100, bytes * 100 / total))
            text += " \(progressBar(percent: percent, width: 24)) \(percent)%"
            text += " \(byteCount(Int(bytes)))/\(byteCount(Int(total)))"
        } else {
            text += " \(byteCount(Int(bytes)))"
        }
        if bytesPerSecond > 0 {
            text += " \(byteCount(Int(bytesPerSecond)))/s"
            if let total, total > bytes {
                text += " ETA \(duration(Double(total - bytes) / bytesPerSecond))"
            }
        }
        return text
    }

    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m\(String(format: "%02d", whole % 60))s" }
        return "\(whole / 3600)h\(String(format: "%02d", whole / 60 % 60))m"
    }

    /// A line on standard error, below the bar.
    private func note(_ text: String) {
        clearLine()
        Output.error("\(Modelc.toolName): \(label): \(text)\n")
    }

    private func clearLine() {
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if drawn { Output.error("\r\u{1B}[K") }
    }

    private func emit(_ object: [String: Any]) {
        Output.print(jsonText(object))
    }
}
