import FixtureSupport
import Foundation
import MemoryPressure
import Testing
@testable import ModelLoader

@Suite struct ModelCachePressureTests {
    /// Waits (bounded) until `condition` holds.
    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }

    @Test(.timeLimit(.minutes(1))) func warningEvictsToTheWatermarkAndCriticalEvictsAllUnleased() async throws {
        let paths = try TestBundles.make([1000, 1000, 1000, 1000, 1000], label: "pressure")
        let size = try ModelBundle.open(paths[0]).residentBytes
        let cache = ModelCache(budget: size * 4)
        let source = ManualPressureSource()
        cache.watch(source)
        let kept = try await cache.model(at: paths[0])  // leased throughout
        for path in paths.dropFirst().prefix(3) { try await cache.model(at: path).release() }
        #expect(cache.statistics.modelsResident == 4)

        source.send(.warning)
        // Half the budget is two models: the leased one and the most recent.
        #expect(await eventually { cache.statistics.modelsResident == 2 })
        let standardized = paths.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        #expect(Set(cache.residentPaths) == [standardized[0], standardized[3]])

        source.send(.critical)
        #expect(await eventually { cache.statistics.modelsResident == 1 })
        #expect(cache.residentPaths == [standardized[0]])
        #expect(kept.model.weight(owner: "dense0", role: "weights") != nil)

        source.send(.normal)
        try await Task.sleep(for: .milliseconds(50))
        #expect(cache.statistics.modelsResident == 1)
        kept.release()
    }

    @Test(.timeLimit(.minutes(1))) func pressureIsReportedInTheEvents() async throws {
        let cache = ModelCache(budget: 1 << 20)
        let source = ManualPressureSource()
        cache.watch(source)
        source.send(.critical)
        var iterator = cache.events.makeAsyncIterator()
        #expect(await iterator.next() == .pressure("watching memory pressure: manual"))
        #expect(await iterator.next() == .pressure("critical from manual"))
    }

    /// With the system's own source where there is one; otherwise the cache
    /// says once why there is none and goes on with its budget.
    @Test(.timeLimit(.minutes(1))) func systemSourceOrOneNoticeWhy() async throws {
        let cache = ModelCache(budget: 1 << 20)
        let watching = cache.watchSystemPressure(environment: [:])
        var iterator = cache.events.makeAsyncIterator()
        let event = await iterator.next()
        guard case .pressure(let text) = event else {
            Issue.record("expected a pressure notice, got \(String(describing: event))")
            return
        }
        if watching {
            #expect(text.hasPrefix("watching memory pressure: "))
        } else {
            #expect(text.hasPrefix("no memory pressure source ("))
            print("note: \(text)")
        }
    }
}
