import MemoryPressure
import Testing

@Suite(.timeLimit(.minutes(1))) struct ManualPressureSourceTests {
    @Test func sentLevelsArriveInOrderAndStopEndsTheStream() async {
        let source = ManualPressureSource()
        let levels = source.levels
        source.send(.warning)
        source.send(.critical)
        source.send(.normal)
        source.stop()
        source.send(.critical)
        #expect(await allLevels(levels) == [.warning, .critical, .normal])
    }

    @Test func levelsSentWhileSomeoneWaitsArrive() async {
        let source = ManualPressureSource()
        let levels = source.levels
        async let received = firstLevels(levels, count: 2)
        source.send(.critical)
        source.send(.warning)
        #expect(await received == [.critical, .warning])
        source.stop()
    }

    @Test func theStreamIsHandedOutOnce() async {
        let source = ManualPressureSource()
        let first = source.levels
        let second = source.levels
        source.send(.warning)
        #expect(await allLevels(second) == [])
        source.stop()
        #expect(await allLevels(first) == [.warning])
    }

    @Test func stopIsIdempotent() async {
        let source = ManualPressureSource()
        let levels = source.levels
        source.stop()
        source.stop()
        #expect(await allLevels(levels) == [])
        #expect(source.name == "manual")
    }

    @Test func droppingTheSourceEndsTheStream() async {
        var source: ManualPressureSource? = ManualPressureSource()
        let levels = source?.levels ?? AsyncStream { $0.finish() }
        source?.send(.warning)
        source = nil
        #expect(await allLevels(levels) == [.warning])
    }
}
