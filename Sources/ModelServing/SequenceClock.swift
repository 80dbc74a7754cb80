import Dispatch
import SystemIO

/// Where a `SequenceStore` reads the time its sequences' idleness is measured on.
public protocol SequenceClock: Sendable {
    /// Nanoseconds on a monotonic clock (only differences matter).
    var nanoseconds: UInt64 { get }
}

/// The system's monotonic clock (`DispatchTime`'s uptime).
public struct UptimeClock: SequenceClock {
    public init() {}
    public var nanoseconds: UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// A clock that moves only when told: for tests of idle eviction.
public final class ManualClock: SequenceClock {
    private let now: Locked<UInt64>

    public init(nanoseconds: UInt64 = 0) { now = Locked(nanoseconds) }

    public var nanoseconds: UInt64 { now.withLock { $0 } }

    public func advance(seconds: Double) {
        now.withLock { $0 += UInt64(seconds * 1e9) }
    }
}
