import Foundation
import Testing
@testable import MemoryPressure

@Suite(.timeLimit(.minutes(1))) struct MemoryPressureSourcesTests {
    @Test func bestSourceHereOrTheReasons() async {
        let (source, unavailable) = MemoryPressureSources.best(environment: [:])
        #expect(unavailable.first == "systemd: \(MemoryPressureError.notConfigured)")
        guard let source else {
            print("note: no memory pressure source here: \(unavailable.joined(separator: "; "))")
            #expect(unavailable.count == 3)
            return
        }
        print("note: best memory pressure source here: \(source.name); skipped: \(unavailable.joined(separator: "; "))")
        #expect(source.name.hasPrefix("kernel PSI /"))
        let levels = source.levels
        source.stop()
        #expect(await allLevels(levels) != nil)
    }

    @Test func devNullStopsTheSearch() {
        let (source, unavailable) = MemoryPressureSources.best(environment: ["MEMORY_PRESSURE_WATCH": "/dev/null"])
        #expect(source == nil)
        #expect(unavailable == ["systemd: \(MemoryPressureError.turnedOff)"])
    }

    @Test func systemdProblemIsReportedAndTheSearchGoesOn() {
        let (source, unavailable) = MemoryPressureSources.best(environment: ["MEMORY_PRESSURE_WATCH": "relative"])
        #expect(unavailable.first == "systemd: MEMORY_PRESSURE_WATCH: not an absolute path: \"relative\"")
        source?.stop()
    }

    @Test func readsProcFilesWhole() {
        let cgroup = MemoryPressureSources.readText("/proc/self/cgroup")
        #expect(cgroup?.contains("::") == true)
        #expect(MemoryPressureSources.readText("/nonexistent/file") == nil)
    }
}
