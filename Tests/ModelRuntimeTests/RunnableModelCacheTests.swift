import FixtureSupport
import Foundation
import MemoryPressure
import ModelCompiler
import ModelFeatures
import ModelLoader
import ModelRuntime
import Synchronization
import Testing

/// Two real models compiled into bundles — the fixture image classifier (a
/// neural network on the tensor engine) and a tree ensemble regressor (classic) — each
/// with an input and the outputs it gives.
struct RunnableFixtures: Sendable {
    struct Case: Sendable {
        let path: String
        let key: String
        let inputs: [String: FeatureValue]
    }

    let network: Case
    let classic: Case
    var all: [Case] { [network, classic] }

    init(_ label: String) throws {
        let directory = try Fixtures.temporaryDirectory(label)
        func compile(_ source: String, _ name: String) throws -> String {
            let bundle = directory.appendingPathComponent("\(name).mlmodelc").path
            _ = try BundleCompiler().compile(Fixtures.path(source), to: bundle)
            return bundle
        }
        let pixels: [UInt8] = (0..<(16 * 16 * 3)).map { UInt8(($0 * 37) % 256) }
        let image = try #require(PixelBuffer(width: 16, height: 16, pixelFormat: .rgb, bytes: pixels))
        let networkPath = try compile("Models/ImageClassifier.mlmodel", "network")
        network = Case(path: networkPath, key: URL(fileURLWithPath: networkPath).standardizedFileURL.path,
                       inputs: ["image": .image(image)])
        let classicPath = try compile("Parity/forest_regressor.mlmodel", "classic")
        classic = Case(path: classicPath, key: URL(fileURLWithPath: classicPath).standardizedFileURL.path,
                       inputs: ["features": .multiArray(MultiArray([-2.0, 1.75, -0.75, -3.25], shape: [4]))])
    }

    /// Compiled and measured once for the suite: compiling (with its fsyncs)
    /// and the reference predictions block a thread of Swift's small
    /// cooperative pool, which every async test of the run shares.
    static let shared = Result { () throws -> (RunnableFixtures, Reference) in
        let fixtures = try RunnableFixtures("runnable")
        return (fixtures, try fixtures.reference())
    }

    typealias Reference = [String: (outputs: [String: FeatureValue], bytes: Int)]

    /// Each model's outputs and its resident bytes after one prediction,
    /// from a model opened outside any cache.
    func reference() throws -> Reference {
        var result: Reference = [:]
        for model in all {
            let opened = try Model(contentsOf: model.path, configuration: ModelConfiguration(threads: 1))
            result[model.key] = (try opened.prediction(from: model.inputs), opened.residentBytes)
        }
        return result
    }
}

/// A loader that can hold each load until a number of requests wait for it.
final class GatedModelLoader: Sendable {
    let loads = Atomic<Int>(0)
    let waitForWaiters: Int
    let cache = Mutex<RunnableModelCache?>(nil)

    init(waitForWaiters: Int) { self.waitForWaiters = waitForWaiters }

    func makeCache(budget: Int) -> RunnableModelCache {
        let cache = RunnableModelCache(budget: budget) { path throws(ModelError) in
            self.loads.add(1, ordering: .relaxed)
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, let cache = self.cache.withLock({ $0 }), cache.statistics.waiting < self.waitForWaiters {
                usleep(1000)
            }
            return try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
        }
        self.cache.withLock { $0 = cache }
        return cache
    }
}

/// Waits until `condition` holds, for at most 30 s: the pressure watch runs on
/// the cooperative pool, which a loaded machine's parallel test run can keep
/// busy for many seconds.
private func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

@Suite struct RunnableModelCacheTests {
    @Test func residentBytesCountWeightsAndGrowWithStates() throws {
        let (fixtures, _) = try RunnableFixtures.shared.get()
        let network = try Model(contentsOf: fixtures.network.path, configuration: ModelConfiguration(threads: 1))
        let before = network.residentBytes
        #expect(before >= 1_459 * MemoryLayout<Float>.size)  // the fixture's 1,459 weights, decoded
        _ = try network.prediction(from: fixtures.network.inputs)
        let after = network.residentBytes
        #expect(after > before)  // a prediction state: arena, scratch, packed weights
        _ = try network.prediction(from: fixtures.network.inputs)
        #expect(network.residentBytes == after)  // the state is reused
        let classic = try Model(contentsOf: fixtures.classic.path)
        #expect(classic.residentBytes > 0)
    }

    /// Budgets swept so that none, one or both models fit: alternating
    /// predictions keep exactly that many, counted at their measured bytes,
    /// rebuild what was evicted, and always give the same outputs.
    @Test(.timeLimit(.minutes(1)), arguments: [0, 1, 2])
    func budgetsKeepWhatFits(fitting: Int) async throws {
        let (fixtures, reference) = try RunnableFixtures.shared.get()
        let sizes = reference.mapValues(\.bytes)
        let budget = [0, sizes.values.max() ?? 0, sizes.values.reduce(0, +)][fitting]
        let cache = RunnableModelCache(budget: budget, configuration: ModelConfiguration(threads: 1))
        let rounds = 4
        for _ in 0..<rounds {
            for model in fixtures.all {
                let outputs = try await cache.prediction(from: model.inputs, at: model.path)
                #expect(outputs == reference[model.key]?.outputs)
                let statistics = cache.statistics
                #expect(statistics.bytesResident <= budget)
                #expect(statistics.bytesResident == cache.residentPaths.reduce(0) { $0 + (sizes[$1] ?? -1) })
            }
        }
        let statistics = cache.statistics
        #expect(statistics.modelsResident == fitting)
        let requests = rounds * fixtures.all.count
        #expect(statistics.loads == (fitting == 2 ? 2 : requests))
        #expect(statistics.evictions == statistics.loads - fitting)
        #expect(statistics.hits + statistics.misses == requests)
    }

    /// Warning pressure evicts unleased models down to half the budget,
    /// critical pressure every unleased one; the leased model stays, and the
    /// next request rebuilds an evicted one, giving the same outputs.
    @Test(.timeLimit(.minutes(1))) func pressureEvictsUnleasedModelsAndTheyAreRebuilt() async throws {
        let (fixtures, reference) = try RunnableFixtures.shared.get()
        let sizes = reference.mapValues(\.bytes)
        let cache = RunnableModelCache(budget: sizes.values.reduce(0, +), configuration: ModelConfiguration(threads: 1))
        let source = ManualPressureSource()
        cache.watch(source)
        for model in fixtures.all { _ = try await cache.prediction(from: model.inputs, at: model.path) }
        #expect(cache.statistics.modelsResident == 2)

        source.send(.warning)
        #expect(await eventually { cache.statistics.modelsResident < 2 })
        #expect(cache.statistics.bytesResident <= Int(Double(cache.budget) * RunnableModelCache.lowWatermark))

        // The network is leased, as during a prediction; critical pressure leaves it.
        let lease = try await cache.model(at: fixtures.network.path)
        _ = try await cache.prediction(from: fixtures.classic.inputs, at: fixtures.classic.path)
        #expect(cache.statistics.modelsResident == 2)
        source.send(.critical)
        #expect(await eventually { cache.statistics.modelsResident == 1 })
        #expect(cache.residentPaths == [fixtures.network.key])
        #expect(try await lease.model.prediction(from: fixtures.network.inputs) == reference[fixtures.network.key]?.outputs)
        lease.release()
        #expect(cache.residentPaths == [fixtures.network.key])  // within the budget once released

        source.send(.critical)
        #expect(await eventually { cache.statistics.modelsResident == 0 })
        let loads = cache.statistics.loads
        for model in fixtures.all {
            #expect(try await cache.prediction(from: model.inputs, at: model.path) == reference[model.key]?.outputs)
        }
        #expect(cache.statistics.loads == loads + 2)
    }

    /// Predictions run while critical pressure keeps evicting: each is served
    /// (its model leased throughout), outputs never change, counters agree.
    /// (Up to 200 loads: under ThreadSanitizer beside the other suites on two
    /// cores it took 86 s once, so its limit is 3 minutes.)
    @Test(.timeLimit(.minutes(3))) func predictionsUnderPressureKeepTheirModels() async throws {
        let (fixtures, reference) = try RunnableFixtures.shared.get()
        let cache = RunnableModelCache(budget: 1 << 30, configuration: ModelConfiguration(threads: 1))
        let source = ManualPressureSource()
        cache.watch(source)
        let workers = 4, perWorker = 50
        let pressure = Task {
            while !Task.isCancelled {
                source.send(.critical)
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    for index in 0..<perWorker {
                        let model = fixtures.all[(worker + index) % 2]
                        let outputs = try await cache.prediction(from: model.inputs, at: model.path)
                        #expect(outputs == reference[model.key]?.outputs)
                    }
                }
            }
            try await group.waitForAll()
        }
        pressure.cancel()
        await pressure.value
        cache.evict(toAtMost: 0)
        let statistics = cache.statistics
        #expect(statistics.hits + statistics.misses == workers * perWorker)
        #expect(statistics.loads == statistics.misses && statistics.loads >= 2)
        #expect(statistics.loads == statistics.evictions)
        #expect(statistics.modelsResident == 0 && statistics.bytesResident == 0 && statistics.waiting == 0)
    }

    @Test(.timeLimit(.minutes(1))) func concurrentRequestsShareOneLoad() async throws {
        let (fixtures, _) = try RunnableFixtures.shared.get()
        let callers = 16
        let loader = GatedModelLoader(waitForWaiters: callers - 1)
        let cache = loader.makeCache(budget: 1 << 30)
        let leases = try await withThrowingTaskGroup(of: RunnableModelLease.self) { group in
            for _ in 0..<callers { group.addTask { try await cache.model(at: fixtures.network.path) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let loads = loader.loads.load(ordering: .relaxed)
        #expect(0 < loads && loads < callers)
        #expect(Set(leases.map { ObjectIdentifier($0.model) }).count == 1)
        #expect(cache.statistics.misses == 1 && cache.statistics.hits == callers - 1 && cache.statistics.waiting == 0)
        for lease in leases { lease.release() }
    }

    @Test(.timeLimit(.minutes(1))) func aLoadErrorReachesEveryWaiter() async throws {
        let directory = try Fixtures.temporaryDirectory("runnable-error")
        let path = directory.appendingPathComponent("missing.mlmodel").path
        let callers = 8
        let loader = GatedModelLoader(waitForWaiters: callers - 1)
        let cache = loader.makeCache(budget: 1 << 30)
        let outcomes = await withTaskGroup(of: ModelError?.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    do throws(ModelError) {
                        _ = try await cache.prediction(from: [:], at: path)
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == callers)
        let first = try #require(outcomes.first ?? nil)
        guard case .source = first else {
            Issue.record("expected a source error, got \(first)")
            return
        }
        #expect(outcomes.allSatisfy { $0 == first })
        #expect(loader.loads.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.failedLoads == 1 && cache.statistics.modelsResident == 0 && cache.statistics.waiting == 0)
    }

    /// A prediction's error comes back as `.runtime` and leaves the model
    /// cached and unleased.
    @Test(.timeLimit(.minutes(1))) func aPredictionErrorReleasesTheLease() async throws {
        let (fixtures, _) = try RunnableFixtures.shared.get()
        let cache = RunnableModelCache(budget: 1 << 30, configuration: ModelConfiguration(threads: 1))
        await #expect(throws: ModelError.self) { try await cache.prediction(from: [:], at: fixtures.network.path) }
        do throws(ModelError) {
            _ = try await cache.prediction(from: [:], at: fixtures.network.path)
            Issue.record("a prediction without inputs succeeded")
        } catch {
            guard case .runtime(.missingInput(let feature, _)) = error else {
                Issue.record("expected a missing input, got \(error)")
                return
            }
            #expect(feature == "image")
        }
        #expect(cache.statistics.modelsResident == 1)
        cache.evict(toAtMost: 0)  // possible only when no lease is left
        #expect(cache.statistics.modelsResident == 0)
    }
}
