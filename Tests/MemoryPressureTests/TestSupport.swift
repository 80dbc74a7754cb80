import FixtureSupport
import Foundation
import MemoryPressure
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The first `count` levels of `stream`, or nil if they do not arrive within `timeout`.
func firstLevels(
    _ stream: AsyncStream<MemoryPressureLevel>, count: Int, timeout: Duration = .seconds(10)
) async -> [MemoryPressureLevel]? {
    await withTaskGroup(of: [MemoryPressureLevel]?.self) { group in
        group.addTask {
            var levels: [MemoryPressureLevel] = []
            for await level in stream {
                levels.append(level)
                if levels.count == count { break }
            }
            return levels
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Every level until `stream` ends, or nil if it does not end within `timeout`.
func allLevels(_ stream: AsyncStream<MemoryPressureLevel>, timeout: Duration = .seconds(10)) async -> [MemoryPressureLevel]? {
    await withTaskGroup(of: [MemoryPressureLevel]?.self) { group in
        group.addTask {
            var levels: [MemoryPressureLevel] = []
            for await level in stream {
                levels.append(level)
            }
            return Task.isCancelled ? nil : levels
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// A fresh directory under the test process's scratch root (removed when the process exits).
func temporaryDirectory() throws -> String {
    try Fixtures.temporaryDirectory("pressure").path
}

/// Counts what a `Syscalls` table opened and closed, for leak checks.
final class CallLog: Sendable {
    private let state = Mutex<(opened: [Int32], closed: [Int32], written: [[UInt8]])>(([], [], []))

    var opened: [Int32] { state.withLock { $0.opened } }
    var closed: [Int32] { state.withLock { $0.closed } }
    var written: [[UInt8]] { state.withLock { $0.written } }

    /// `base` with `open`, `pipe` and `close` recorded.
    func recording(_ base: Syscalls = .system) -> Syscalls {
        var calls = base
        calls.open = { path, flags, mode in
            let fd = base.open(path, flags, mode)
            if fd >= 0 { self.state.withLock { $0.opened.append(fd) } }
            return fd
        }
        calls.pipe = { fds in
            let result = base.pipe(fds)
            if result == 0 { self.state.withLock { $0.opened += [fds[0], fds[1]] } }
            return result
        }
        calls.close = { fd in
            self.state.withLock { $0.closed.append(fd) }
            return base.close(fd)
        }
        return calls
    }

    func recordWrite(_ bytes: [UInt8]) {
        state.withLock { $0.written.append(bytes) }
    }
}


/// Numbers calls 0, 1, 2, … across threads.
final class CallCounter: Sendable {
    private let count = Mutex(0)

    func next() -> Int {
        count.withLock { count in
            defer { count += 1 }
            return count
        }
    }
}
