import Foundation
import MemoryPressure
import SystemIO

extension ResourceCache {
    /// The share of the budget unleased models may keep after a pressure
    /// warning.
    public static var lowWatermark: Double { 0.5 }

    /// Evicts on memory pressure from `source` until the source stops or the
    /// cache goes: on a warning, unleased models down to half the budget; on
    /// critical pressure, every unleased model. Leased models always stay.
    public func watch(_ source: any MemoryPressureSource) {
        emit(.pressure("watching memory pressure: \(source.name)"))
        let task = Task { [weak self] in
            for await level in source.levels {
                guard let self else { return }
                self.relieve(level, from: source.name)
            }
        }
        pressureWatches.withLock { $0.append((source, task)) }
    }

    /// Watches the best pressure source this system offers (systemd's, the
    /// own cgroup's, the kernel's); where there is none, says so once in the
    /// events and keeps to the budget alone. Returns whether one is watched.
    @discardableResult
    public func watchSystemPressure(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        let (source, unavailable) = MemoryPressureSources.best(environment: environment)
        guard let source else {
            emit(.pressure("no memory pressure source (\(unavailable.joined(separator: "; "))); "
                + "models are evicted by the budget only"))
            return false
        }
        watch(source)
        return true
    }

    /// What the cache does on one pressure level.
    func relieve(_ level: MemoryPressureLevel, from name: String) {
        switch level {
        case .normal:
            return
        case .warning:
            emit(.pressure("warning from \(name)"))
            evict(toAtMost: Int(Double(budget) * Self.lowWatermark), reason: .pressureWarning)
        case .critical:
            emit(.pressure("critical from \(name)"))
            evict(toAtMost: 0, reason: .pressureCritical)
        }
    }
}
