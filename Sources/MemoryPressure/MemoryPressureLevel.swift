/// How short memory is, from least to most urgent.
///
/// Levels compare by urgency: `.normal < .warning < .critical`.
public enum MemoryPressureLevel: Int, Sendable, Comparable, CustomStringConvertible {
    /// Memory is not known to be short.
    case normal
    /// Some tasks stall waiting for memory: drop what is cheap to rebuild.
    case warning
    /// All tasks stall waiting for memory at times: drop everything that can go.
    case critical

    public static func < (lhs: MemoryPressureLevel, rhs: MemoryPressureLevel) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// "normal", "warning" or "critical".
    public var description: String {
        switch self {
        case .normal: "normal"
        case .warning: "warning"
        case .critical: "critical"
        }
    }
}
