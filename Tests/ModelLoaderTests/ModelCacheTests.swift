import BundleFormat
import FixtureSupport
import Foundation
import Synchronization
import Testing
@testable import ModelLoader

/// Counts loads, and can hold each load until a number of other requests
/// are waiting for it, or make it fail.
final class CountingLoader: Sendable {
    let loads = Atomic<Int>(0)
    let failing: Set<String>
    /// Each load waits (at most 10 s) until this many requests wait for it.
    let waitForWaiters: Atomic<Int>
    let cache = Mutex<ModelCache?>(nil)

    init(waitForWaiters: Int = 0, failing: Set<String> = []) {
        self.waitForWaiters = Atomic(waitForWaiters)
        self.failing = failing
    }

    func load(_ path: String) throws(BundleError) -> ModelBundle {
        loads.add(1, ordering: .relaxed)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, let cache = cache.withLock({ $0 }), cache.statistics.waiting < waitForWaiters.load(ordering: .relaxed) {
            usleep(1000)
        }
        if failing.contains(path) { throw .notABundle(path: path) }
        return try ModelBundle.open(path)
    }

    func makeCache(budget: Int) -> ModelCache {
        let cache = ModelCache(budget: budget) { path throws(BundleError) in try self.load(path) }
        self.cache.withLock { $0 = cache }
        return cache
    }
}

@Suite struct ModelCacheTests {
    @Test func keysAreStandardizedPathsAsFoundationsFileURLsGiveThem() throws {
        let directory = try Fixtures.temporaryDirectory("cache-keys")
        let bundle = directory.appendingPathComponent("Model.mlmodelc").path
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("Model.mlmodel").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        let paths = [bundle, bundle + "/", file, directory.path + "/./Model.mlmodel", directory.path + "/sub/../Model.mlmodelc",
                     directory.path + "//Model.mlmodelc", directory.path + "/Missing.mlpackage", "Relative.mlmodel",
                     "./sub/../Relative.mlpackage/", "/", "/srv/models/With space %20 é.mlmodel", "/srv/models/.hidden/a..b/.x",
                     "/srv/models/./a", "/srv/models/../a", "/srv/models/..", "/srv/models/.", "/srv/models/...", "/srv/models/a/"]
        for path in paths {
            #expect(ModelCache.key(for: path) == URL(fileURLWithPath: path).standardizedFileURL.path, "\(path)")
        }
    }

    @Test(.timeLimit(.minutes(1))) func concurrentRequestsShareOneLoad() async throws {
        let path = try TestBundles.make([1000], label: "cache-coalesce")[0]
        let callers = 32
        let loader = CountingLoader(waitForWaiters: callers - 1)
        let cache = loader.makeCache(budget: 1 << 30)
        let leases = try await withThrowingTaskGroup(of: ModelLease.self) { group in
            for _ in 0..<callers { group.addTask { try await cache.model(at: path) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let loads = loader.loads.load(ordering: .relaxed)
        #expect(0 < loads && loads < callers)
        #expect(loads == 1)
        #expect(Set(leases.map { ObjectIdentifier($0.model) }).count == 1)
        #expect(cache.statistics.loads == 1 && cache.statistics.misses == 1 && cache.statistics.hits == callers - 1)
        #expect(cache.statistics.waiting == 0)
    }

    @Test(.timeLimit(.minutes(1))) func aLoadErrorReachesEveryWaiter() async throws {
        let path = "/nonexistent/bundle.mlmodelc"
        let loader = CountingLoader(waitForWaiters: 15, failing: [path])
        let cache = loader.makeCache(budget: 1 << 30)
        let outcomes = await withTaskGroup(of: BundleError?.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    do throws(BundleError) {
                        _ = try await cache.model(at: path)
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == 16)
        #expect(outcomes.allSatisfy { $0 == .notABundle(path: path) })
        #expect(loader.loads.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.modelsResident == 0 && cache.statistics.waiting == 0)
        // A later request tries again.
        loader.waitForWaiters.store(0, ordering: .relaxed)
        _ = try? await cache.model(at: path)
        #expect(cache.statistics.failedLoads >= 2)
    }

    /// `modelBlocking(at:)` from threads of their own (as a server's workers
    /// call it) and `model(at:)` from tasks share one load, and a load's error
    /// reaches the blocked threads too; no thread pool is needed to answer them.
    @Test(.timeLimit(.minutes(1))) func blockingAndAsyncRequestsShareOneLoad() async throws {
        let path = try TestBundles.make([1000], label: "cache-blocking")[0]
        let missing = "/nonexistent/blocking.mlmodelc"
        let threads = 8
        let tasks = 8
        let loader = CountingLoader(waitForWaiters: threads + tasks - 1, failing: [missing])
        let cache = loader.makeCache(budget: 1 << 30)
        func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
            await withCheckedContinuation { continuation in Thread { continuation.resume(returning: body()) }.start() }
        }
        let models = try await withThrowingTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    let lease = try await onThread { Result { () throws(BundleError) in try cache.modelBlocking(at: path) } }.get()
                    defer { lease.release() }
                    return ObjectIdentifier(lease.model)
                }
            }
            for _ in 0..<tasks {
                group.addTask {
                    let lease = try await cache.model(at: path)
                    defer { lease.release() }
                    return ObjectIdentifier(lease.model)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(models.count == threads + tasks && Set(models).count == 1)
        #expect(loader.loads.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.loads == 1 && cache.statistics.misses == 1 && cache.statistics.hits == threads + tasks - 1)
        #expect(cache.statistics.waiting == 0)

        loader.waitForWaiters.store(threads - 1, ordering: .relaxed)
        let failures = await withTaskGroup(of: BundleError?.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    await onThread {
                        do throws(BundleError) {
                            try cache.modelBlocking(at: missing).release()
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(failures.count == threads && failures.allSatisfy { $0 == .notABundle(path: missing) })
        #expect(loader.loads.load(ordering: .relaxed) == 2 && cache.statistics.failedLoads == 1 && cache.statistics.waiting == 0)
    }

    /// Sizes and budgets swept: after every request (each released at once)
    /// the cache holds exactly what a plain least-recently-used list within
    /// the budget holds.
    @Test(.timeLimit(.minutes(1)), arguments: [
        ([2000, 2000, 2000, 2000, 2000, 2000], 1.0), ([2000, 2000, 2000, 2000, 2000, 2000], 3.0),
        ([500, 1000, 4000, 2000, 8000, 1000], 1.5), ([500, 1000, 4000, 2000, 8000, 1000], 4.0),
        ([500, 1000, 4000, 2000, 8000, 1000], 0.5),
    ])
    func leastRecentlyUsedOrderIsExact(weightCounts: [Int], budgetInLargest: Double) async throws {
        let paths = try TestBundles.make(weightCounts, label: "cache-lru")
        let keys = paths.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let sizes = try Dictionary(uniqueKeysWithValues: zip(keys, paths.map { try ModelBundle.open($0).residentBytes }))
        let budget = Int(Double(sizes.values.max() ?? 0) * budgetInLargest)
        let cache = ModelCache(budget: budget)
        var reference: [String] = []  // least recently used first
        var generator = SplitMix(seed: UInt64(weightCounts.reduce(0, +)) &+ UInt64(budgetInLargest * 10))
        for _ in 0..<60 {
            let index = Int.random(in: 0..<paths.count, using: &generator)
            try await cache.model(at: paths[index]).release()
            reference.removeAll { $0 == keys[index] }
            reference.append(keys[index])
            while reference.reduce(0, { $0 + (sizes[$1] ?? 0) }) > budget, !reference.isEmpty {
                reference.removeFirst()
            }
            #expect(cache.residentPaths == reference)
            #expect(cache.statistics.bytesResident <= budget)
            #expect(cache.statistics.bytesResident == reference.reduce(0) { $0 + (sizes[$1] ?? 0) })
        }
    }

    @Test(.timeLimit(.minutes(1))) func leasedModelsAreNeverEvicted() async throws {
        let paths = try TestBundles.make([3000, 3000, 3000], label: "cache-leased")
        let size = try ModelBundle.open(paths[0]).residentBytes
        let cache = ModelCache(budget: size)
        let first = try await cache.model(at: paths[0])
        let second = try await cache.model(at: paths[1])
        // Both leased: over budget, but nothing may go.
        #expect(cache.statistics.modelsResident == 2)
        #expect(cache.statistics.bytesResident == 2 * size)
        second.release()
        // Now the budget holds, keeping the leased one.
        #expect(cache.residentPaths == [URL(fileURLWithPath: paths[0]).standardizedFileURL.path])
        #expect(first.model.weight(owner: "dense0", role: "weights") != nil)
        first.release()
    }

    /// A view keeps its bundle mapped: reading it after the lease is gone and
    /// the cache has evicted the model is safe and gives the same values.
    @Test(.timeLimit(.minutes(1))) func viewsOutliveLeasesAndEviction() async throws {
        let paths = try TestBundles.make([5000, 5000], label: "cache-view-lifetime")
        let cache = ModelCache(budget: 1)
        var view: WeightView?
        do {
            let lease = try await cache.model(at: paths[0])
            view = lease.model.weight(owner: "dense0", role: "weights")
            lease.release()
        }
        _ = try await cache.model(at: paths[1])
        #expect(cache.statistics.evictions >= 1)
        #expect(!cache.residentPaths.contains(URL(fileURLWithPath: paths[0]).standardizedFileURL.path))
        let values = try #require(view?.float32Values)
        #expect(values.count == 5000)
        #expect(values.enumerated().allSatisfy { $1 == Float($0 % 251) / 251 })
    }

    @Test(.timeLimit(.minutes(1))) func evictedModelsReloadWithTheSameTensors() async throws {
        let paths = try TestBundles.make([5000, 5000], label: "cache-reload")
        let size = try ModelBundle.open(paths[0]).residentBytes
        let cache = ModelCache(budget: size)
        func checksum(_ lease: ModelLease) -> Double {
            lease.model.weights.reduce(0) { sum, entry in
                sum + (lease.model.view(of: entry)?.float32Values?.reduce(0.0) { $0 + Double($1) } ?? -1)
            }
        }
        let before = checksum(try await cache.model(at: paths[0]))
        _ = try await cache.model(at: paths[1])  // evicts the first
        #expect(cache.statistics.evictions == 1)
        let after = checksum(try await cache.model(at: paths[0]))
        #expect(before == after && before > 0)
        #expect(cache.statistics.loads == 3)
    }

    @Test(.timeLimit(.minutes(1))) func eventsTellLoadsAndEvictions() async throws {
        let paths = try TestBundles.make([100, 100], label: "cache-events")
        let size = try ModelBundle.open(paths[0]).residentBytes
        let cache = ModelCache(budget: size)
        _ = try await cache.model(at: paths[0])
        _ = try await cache.model(at: paths[1])
        var iterator = cache.events.makeAsyncIterator()
        let keys = paths.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        #expect(await iterator.next() == .loaded(path: keys[0], bytes: size))
        #expect(await iterator.next() == .loaded(path: keys[1], bytes: size))
        #expect(await iterator.next() == .evicted(path: keys[0], bytes: size, reason: .budget))
    }

    /// The observer hears each event on the thread that raised it, before the call that
    /// raised it returns (the server's log relies on it), and the stream still gets them all.
    @Test(.timeLimit(.minutes(1))) func observerHearsEventsBeforeTheCallReturns() async throws {
        let paths = try TestBundles.make([100, 100], label: "cache-observer")
        let size = try ModelBundle.open(paths[0]).residentBytes
        let cache = ModelCache(budget: size)
        final class Heard: Sendable { let events = Mutex<[ModelCache.Event]>([]) }
        let heard = Heard()
        cache.observe { event in heard.events.withLock { $0.append(event) } }
        let keys = paths.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        _ = try cache.modelBlocking(at: paths[0])
        #expect(heard.events.withLock { $0 } == [.loaded(path: keys[0], bytes: size)])
        _ = try await cache.model(at: paths[1])
        #expect(heard.events.withLock { $0 } == [.loaded(path: keys[0], bytes: size), .loaded(path: keys[1], bytes: size),
                                          .evicted(path: keys[0], bytes: size, reason: .budget)])
        #expect(cache.evict(at: paths[1]))
        #expect(heard.events.withLock { $0 }.last == .evicted(path: keys[1], bytes: size, reason: .requested))
        var iterator = cache.events.makeAsyncIterator()
        #expect(await iterator.next() == .loaded(path: keys[0], bytes: size))
    }

    /// Eight threads, thousands of random requests over more models than the
    /// budget holds: the counters stay consistent and nothing hangs.
    @Test(.timeLimit(.minutes(2))) func stress() async throws {
        let paths = try TestBundles.make(Array(repeating: 500, count: 12), label: "cache-stress")
        var sizes: [String: Int] = [:]
        for path in paths { sizes[URL(fileURLWithPath: path).standardizedFileURL.path] = try ModelBundle.open(path).residentBytes }
        let cache = ModelCache(budget: (sizes.values.max() ?? 0) * 4)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var generator = SplitMix(seed: UInt64(worker + 1))
                    for _ in 0..<2000 {
                        let lease = try await cache.model(at: paths[Int.random(in: 0..<paths.count, using: &generator)])
                        #expect(lease.model.weights.count == 1)
                        lease.release()
                    }
                }
            }
            try await group.waitForAll()
        }
        let statistics = cache.statistics
        #expect(statistics.hits + statistics.misses == 16_000)
        #expect(statistics.loads == statistics.misses)
        #expect(statistics.loads - statistics.evictions == statistics.modelsResident)
        #expect(statistics.bytesResident <= cache.budget)
        #expect(statistics.bytesResident == cache.residentPaths.reduce(0) { $0 + (sizes[$1] ?? -1) })
        #expect(statistics.modelsResident == cache.residentPaths.count)
    }
}
