import BundleFormat
import Foundation
import MemoryPressure
import SystemIO

/// What a `ResourceCache` keeps: a loaded model of some kind, shared by
/// reference and safe to use from any thread.
public protocol CachedResource: AnyObject, Sendable {
    /// Bytes of memory the resource holds now, counted against the cache's
    /// budget. Read when the resource is loaded and again whenever a lease on
    /// it comes back (a runnable model grows as it plans and runs); must be
    /// cheap and must not call back into the cache.
    var residentBytes: Int { get }
}

/// Loaded models kept within a memory budget, as Core ML keeps models: a
/// model is loaded once however many callers ask for it at the same time,
/// handed out as leases, kept while leased, and evicted (released) least
/// recently used first when the budget or memory pressure calls for it — to be
/// loaded again, unchanged, on the next request.
///
/// Generic over what it keeps: `ModelCache` keeps opened bundles
/// (`ModelBundle`), `ModelRuntime`'s `RunnableModelCache` keeps models ready to
/// run. A model's bytes are its `residentBytes`, measured when it is loaded and
/// each time a lease on it is released.
///
/// Thread-safe; all state is behind one lock, and loads run outside it.
public final class ResourceCache<Resource: CachedResource, Failure: Error & Equatable>: Sendable {
    /// Counters since the cache was made.
    public struct Statistics: Equatable, Sendable {
        /// Requests served by a loaded model, or by joining a load under way.
        public var hits = 0
        /// Requests that started a load.
        public var misses = 0
        /// Loads that succeeded.
        public var loads = 0
        /// Loads that failed (their error reached every request waiting).
        public var failedLoads = 0
        /// Models evicted, for the budget, for pressure, or on request.
        public var evictions = 0
        /// Bytes of the models loaded now (see `CachedResource.residentBytes`).
        public var bytesResident = 0
        /// Models loaded now.
        public var modelsResident = 0
        /// Requests waiting now for a load under way.
        public var waiting = 0
        /// Bytes reserved now for what is not a model but counts against the budget (`reserve(_:)`).
        public var bytesReserved = 0
    }

    /// Why a model was evicted.
    public enum EvictionReason: String, Sendable {
        case budget
        case pressureWarning
        case pressureCritical
        case requested
    }

    /// What happened, for logs.
    public enum Event: Equatable, Sendable {
        case loaded(path: String, bytes: Int)
        case loadFailed(path: String, error: Failure)
        case evicted(path: String, bytes: Int, reason: EvictionReason)
        /// A memory pressure notice, or why none can be had.
        case pressure(String)
    }

    /// Loads the model at a path (standardized, absolute); runs on a Dispatch
    /// thread, never under the cache's lock.
    public typealias Loader = @Sendable (String) throws(Failure) -> Resource

    private struct Entry {
        var model: Resource?
        var bytes = 0
        var leases = 0
        var lastUse: UInt64 = 0
        /// Evict when the last lease comes back (`evict(at:)` while leased).
        var evictWhenReturned = false
        /// Requests waiting for the load under way, told its outcome.
        var waiters: [@Sendable (Result<Resource, Failure>) -> Void] = []
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var clock: UInt64 = 0
        var statistics = Statistics()
    }

    /// The bytes all loaded models may take. Unleased models are evicted to
    /// keep within it; leased ones stay even when they alone exceed it (then
    /// no unleased model is kept).
    public let budget: Int
    private let state = Locked(State())
    private let loader: Loader
    let eventSink: AsyncStream<Event>.Continuation
    /// Pressure sources watched, and the tasks reading them.
    let pressureWatches = Locked<[(any MemoryPressureSource, Task<Void, Never>)]>([])
    /// Events as they happen; one consumer.
    public let events: AsyncStream<Event>
    /// Told every event on the thread that raises it (`observe(_:)`).
    private let observer = Locked<(@Sendable (Event) -> Void)?>(nil)

    /// A cache of at most `budget` bytes of unleased models, loaded by `loader`.
    public init(budget: Int, loader: @escaping Loader) {
        self.budget = budget
        self.loader = loader
        (events, eventSink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1024))
    }

    deinit {
        for (source, task) in pressureWatches.withLock({ $0 }) {
            task.cancel()
            source.stop()
        }
        eventSink.finish()
    }

    /// Calls `handler` with every later event, synchronously on the thread that
    /// raises it and before the event goes on `events`: a log written here has
    /// every line in it by the time the load or eviction returns, whether or not
    /// a task is free to read the stream (a process ending right after loses nothing).
    /// Replaces any handler set before; `handler` must not call back into the cache.
    public func observe(_ handler: @escaping @Sendable (Event) -> Void) {
        observer.withLock { $0 = handler }
    }

    func emit(_ event: Event) {
        observer.withLock { $0 }?(event)
        eventSink.yield(event)
    }

    /// The counters now.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// The entry's key for `path`: absolute (from the working directory), `.` and `..` resolved,
    /// no trailing slash — `URL(fileURLWithPath:).standardizedFileURL.path` without the file
    /// system call that form makes to learn whether `path` is a directory (it asks on every request
    /// of a server, and the answer never changes the key).
    public static func key(for path: String) -> String {
        if isStandardAbsolute(path) { return path }
        return URL(filePath: path, directoryHint: .inferFromPath).standardizedFileURL.path
    }

    /// Whether `path` is its own key already (the usual case, and cheaper to see than to make): absolute,
    /// without empty, `.` or `..` components, nor a trailing slash.
    static func isStandardAbsolute(_ path: String) -> Bool {
        let bytes = path.utf8
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        var componentLength = 0
        var dots = 0
        for byte in bytes.dropFirst() {
            if byte == slash {
                if componentLength == 0 || componentLength == dots && dots <= 2 { return false }
                componentLength = 0
                dots = 0
            } else {
                componentLength += 1
                if byte == dot { dots += 1 }
            }
        }
        return componentLength > 0 && !(componentLength == dots && dots <= 2)
    }

    /// The model of the bundle at `path`, loaded if it is not: concurrent
    /// requests for one path share one load, and a load's error reaches every
    /// request waiting for it.
    public func model(at path: String) async throws(Failure) -> ResourceLease<Resource> {
        let key = Self.key(for: path)
        while true {
            switch begin(key) {
            case .loaded(let model):
                return lease(model, key)
            case .load:
                return try await load(key)
            case .join:
                do {
                    let model = try await withCheckedThrowingContinuation { continuation in
                        let outcome = join(key) { result in
                            switch result {
                            case .success(let model): continuation.resume(returning: model)
                            case .failure(let error): continuation.resume(throwing: error)
                            }
                        }
                        switch outcome {
                        case .some(.some(let model)): continuation.resume(returning: model)
                        case .some(.none): continuation.resume(throwing: Retry())
                        case .none: break
                        }
                    }
                    return lease(model, key)
                } catch let error as Failure {
                    throw error
                } catch {
                    continue  // the load ended, and its model went, before this request joined; not counted yet
                }
            }
        }
    }

    /// `model(at:)` for a thread that may block — a server's connection or
    /// worker thread, never one of Swift's cooperative pool: a load runs on
    /// the calling thread, and a request joining a load under way waits for it
    /// on a semaphore. No other thread is needed, so a request is never held
    /// up by a thread pool (cooperative or Dispatch's) that unrelated work
    /// keeps busy. Shares loads, counters and leases with `model(at:)`.
    public func modelBlocking(at path: String) throws(Failure) -> ResourceLease<Resource> {
        let key = Self.key(for: path)
        while true {
            switch begin(key) {
            case .loaded(let model):
                return lease(model, key)
            case .load:
                return try finish(key, Result { () throws(Failure) in try loader(key) })
            case .join:
                let handoff = Locked<Result<Resource, Failure>?>(nil)
                let done = DispatchSemaphore(value: 0)
                let outcome = join(key) { result in
                    handoff.withLock { $0 = result }
                    done.signal()
                }
                switch outcome {
                case .some(.some(let model)):
                    return lease(model, key)
                case .some(.none):
                    continue  // the load ended, and its model went, before this request joined; not counted yet
                case .none:
                    done.wait()
                    guard let result = handoff.withLock({ $0 }) else { preconditionFailure("a load finished without a result") }
                    return lease(try result.get(), key)
                }
            }
        }
    }

    /// Joins the load under way for `key`: the model when it has come in the
    /// meantime (leased and counted), no entry (`.some(nil)`) when the load
    /// ended without a model before this request joined, or `nil` when
    /// `waiter` was queued and will be told the load's outcome.
    private func join(_ key: String, _ waiter: @escaping @Sendable (Result<Resource, Failure>) -> Void) -> Resource?? {
        state.withLock { state in
            guard state.entries[key] != nil else { return .some(nil) }
            if let model = state.entries[key]?.model {
                state.clock += 1
                state.entries[key]?.lastUse = state.clock
                state.entries[key]?.leases += 1
                state.statistics.hits += 1
                return .some(model)
            }
            state.entries[key]?.waiters.append(waiter)
            state.statistics.waiting += 1
            return nil
        }
    }

    private struct Retry: Error {}

    private enum Start {
        case loaded(Resource)
        case load
        case join
    }

    /// Decides how to serve a request. Hits and misses are counted where a
    /// request is served: here for loaded models and new loads, when joining
    /// for requests that wait for a load.
    private func begin(_ key: String) -> Start {
        state.withLock { state in
            if let entry = state.entries[key] {
                if let model = entry.model {
                    state.statistics.hits += 1
                    // The lease is counted under the lock that found the model,
                    // so no eviction can come between.
                    state.clock += 1
                    state.entries[key]?.lastUse = state.clock
                    state.entries[key]?.leases += 1
                    return .loaded(model)
                }
                return .join
            }
            state.statistics.misses += 1
            state.entries[key] = Entry()
            return .load
        }
    }

    /// Loads on a Dispatch queue: opening a bundle is blocking file I/O,
    /// which must not hold a thread of Swift's cooperative pool.
    private func load(_ key: String) async throws(Failure) -> ResourceLease<Resource> {
        let loader = self.loader
        // The result crosses threads through a lock as well as through the
        // continuation: ThreadSanitizer does not see a continuation resumed
        // from a Dispatch thread as ordering, and would report the new
        // model's fields as racing.
        let handoff = Locked<Result<Resource, Failure>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .userInitiated).async {
                let result = Result { () throws(Failure) in try loader(key) }
                handoff.withLock { $0 = result }
                continuation.resume()
            }
        }
        guard let outcome = handoff.withLock({ $0 }) else { preconditionFailure("load finished without a result") }
        return try finish(key, outcome)
    }

    /// Records a load's outcome, tells the requests that joined it, and
    /// leases the model to the request that loaded it.
    private func finish(_ key: String, _ outcome: Result<Resource, Failure>) throws(Failure) -> ResourceLease<Resource> {
        let model: Resource
        switch outcome {
        case .success(let loaded):
            model = loaded
        case .failure(let error):
            let waiters = state.withLock { state in
                state.statistics.failedLoads += 1
                let waiters = state.entries.removeValue(forKey: key)?.waiters ?? []
                state.statistics.waiting -= waiters.count
                return waiters
            }
            emit(.loadFailed(path: key, error: error))
            for waiter in waiters { waiter(.failure(error)) }
            throw error
        }
        let bytes = model.residentBytes
        let waiters = state.withLock { state in
            state.clock += 1
            let waiters = state.entries[key]?.waiters ?? []
            state.entries[key] = Entry(model: model, bytes: bytes, leases: 1 + waiters.count, lastUse: state.clock)
            state.statistics.hits += waiters.count
            state.statistics.waiting -= waiters.count
            state.statistics.loads += 1
            state.statistics.bytesResident += bytes
            state.statistics.modelsResident += 1
            return waiters
        }
        emit(.loaded(path: key, bytes: bytes))
        for waiter in waiters { waiter(.success(model)) }
        evict(toAtMost: budget, reason: .budget)
        return lease(model, key)
    }

    /// A lease on the model `key` names, given back to `returned` when released.
    private func lease(_ model: Resource, _ key: String) -> ResourceLease<Resource> {
        ResourceLease(model: model) { [self] in returned(key, model) }
    }

    /// A lease came back: the model's bytes are measured again (outside the
    /// lock; a runnable model grows as it runs), then the budget is kept.
    private func returned(_ key: String, _ model: Resource) {
        let bytes = model.residentBytes
        state.withLock { state in
            state.clock += 1
            state.entries[key]?.leases -= 1
            state.entries[key]?.lastUse = state.clock
            // A leased model is never evicted, so the entry still holds it.
            if let entry = state.entries[key], entry.model === model {
                state.statistics.bytesResident += bytes - entry.bytes
                state.entries[key]?.bytes = bytes
            }
        }
        if state.withLock({ $0.entries[key].map { $0.evictWhenReturned && $0.leases == 0 } ?? false }) {
            evict(at: key)
        }
        evict(toAtMost: budget, reason: .budget)
    }

    /// Evicts the model at `path` now when nobody leases it, otherwise as
    /// soon as its last lease comes back. Returns whether it was evicted now.
    @discardableResult
    public func evict(at path: String, reason: EvictionReason = .requested) -> Bool {
        let key = Self.key(for: path)
        var evicted: (Int, Resource)? = state.withLock { state in
            guard let entry = state.entries[key], let model = entry.model else { return nil }
            guard entry.leases == 0 else {
                state.entries[key]?.evictWhenReturned = true
                return nil
            }
            state.entries.removeValue(forKey: key)
            state.statistics.bytesResident -= entry.bytes
            state.statistics.modelsResident -= 1
            state.statistics.evictions += 1
            return (entry.bytes, model)
        }
        guard let bytes = evicted?.0 else { return false }
        // The model goes before the event is told (an observer may trim malloc's free memory).
        evicted = nil
        emit(.evicted(path: key, bytes: bytes, reason: reason))
        return true
    }

    /// Evicts models nobody leases, least recently used first, until the
    /// loaded models take at most `bytes` (or only leased ones are left).
    /// Evicted models are unmapped once the cache drops them.
    public func evict(toAtMost bytes: Int, reason: EvictionReason = .requested) {
        var evicted: [(String, Int, Resource)] = state.withLock { state in
            var evicted: [(String, Int, Resource)] = []
            while state.statistics.bytesResident + state.statistics.bytesReserved > bytes {
                let candidates = state.entries.filter { $0.value.model != nil && $0.value.leases == 0 }
                guard let oldest = candidates.min(by: { $0.value.lastUse < $1.value.lastUse }),
                      let model = oldest.value.model
                else { break }
                state.entries.removeValue(forKey: oldest.key)
                state.statistics.bytesResident -= oldest.value.bytes
                state.statistics.modelsResident -= 1
                state.statistics.evictions += 1
                evicted.append((oldest.key, oldest.value.bytes, model))
            }
            return evicted
        }
        // The models are released here, outside the lock (unmapping takes time), before
        // the events are told.
        let gone = evicted.map { (path: $0.0, bytes: $0.1) }
        evicted.removeAll()
        for (path, size) in gone {
            emit(.evicted(path: path, bytes: size, reason: reason))
        }
    }

    /// Reserves `bytes` of the budget for memory held beside the models (a server's per-sequence
    /// states), evicting unleased models least recently used first to make room. Reserved bytes
    /// count against the budget until `unreserve(_:)` gives them back.
    ///
    /// - Returns: false, reserving nothing, when the leased models and what is reserved already
    ///   leave less than `bytes` of the budget.
    public func reserve(_ bytes: Int) -> Bool {
        evict(toAtMost: budget - bytes, reason: .budget)
        return state.withLock { state in
            guard state.statistics.bytesResident + state.statistics.bytesReserved + bytes <= budget else { return false }
            state.statistics.bytesReserved += bytes
            return true
        }
    }

    /// Gives back bytes `reserve(_:)` reserved.
    public func unreserve(_ bytes: Int) {
        state.withLock { $0.statistics.bytesReserved -= bytes }
    }

    /// The paths of the loaded models, least recently used first (for tests and logs).
    public var residentPaths: [String] {
        state.withLock { state in
            state.entries.filter { $0.value.model != nil }.sorted { $0.value.lastUse < $1.value.lastUse }.map(\.key)
        }
    }
}
