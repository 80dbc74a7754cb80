import MemoryPressure
import Testing

@Suite struct MemoryPressureLevelTests {
    @Test func levelsOrderByUrgency() {
        #expect(MemoryPressureLevel.normal < .warning)
        #expect(MemoryPressureLevel.warning < .critical)
        #expect(MemoryPressureLevel.normal < .critical)
        #expect(!(MemoryPressureLevel.critical < .critical))
        #expect([MemoryPressureLevel.critical, .normal, .warning].sorted() == [.normal, .warning, .critical])
        #expect([MemoryPressureLevel.warning, .critical].max() == .critical)
    }

    @Test func descriptionsAreTheNames() {
        #expect([MemoryPressureLevel.normal, .warning, .critical].map(\.description) == ["normal", "warning", "critical"])
        #expect("\(MemoryPressureLevel.critical)" == "critical")
    }
}
