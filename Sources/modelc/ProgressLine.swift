import Foundation
import Synchronization

/// A one-line progress display on standard error, redrawn in place, for
/// terminals only: logs and pipes get no carriage returns.
final class ProgressLine: Sendable {
    /// Smaller jobs finish before a bar would be worth drawing.
    static let minimumBytes: UInt64 = 16 << 20

    private let label: String
    private let lastPercent = Mutex(-1)

    /// A display, or `nil` when standard error is not a terminal.
    static func forTerminal(label: String) -> ProgressLine? {
        isatty(STDERR_FILENO) == 1 ? ProgressLine(label: label) : nil
    }

    private init(label: String) {
        self.label = label
    }

    /// Redraws the line when the whole percentage changed.
    func update(done: UInt64, total: UInt64) {
        guard total >= Self.minimumBytes else { return }
        let percent = Int(min(100, done * 100 / max(total, 1)))
        let changed = lastPercent.withLock { last in
            defer { last = percent }
            return last != percent
        }
        guard changed else { return }
        Output.error("\r\(label) \(progressBar(percent: percent, width: 30)) \(percent)% \(byteCount(Int(done)))/\(byteCount(Int(total)))")
    }

    /// Redraws the line for `done` of `total` items (images, say) when the
    /// whole percentage changed; jobs of fewer than 20 items draw nothing.
    func update(items done: Int, of total: Int, unit: String) {
        guard total >= 20 else { return }
        let percent = min(100, done * 100 / max(total, 1))
        let changed = lastPercent.withLock { last in
            defer { last = percent }
            return last != percent
        }
        guard changed else { return }
        Output.error("\r\(label) \(progressBar(percent: percent, width: 30)) \(done)/\(total) \(unit)")
    }

    /// Erases the line, if one is drawn.
    func finish() {
        let drawn = lastPercent.withLock { last in
            defer { last = -1 }
            return last >= 0
        }
        if drawn { Output.error("\r\u{1B}[K") }
    }
}

/// "[#####     ]": `percent` of `width` cells filled.
func progressBar(percent: Int, width: Int) -> String {
    let filled = width * min(max(percent, 0), 100) / 100
    return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
}
