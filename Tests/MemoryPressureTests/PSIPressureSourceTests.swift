import Foundation
import SystemIO
import Testing
@testable import MemoryPressure
#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct PSIPressureSourceTests {
    static let systemFile = "/proc/pressure/memory"

    /// Registers real triggers on the kernel's file. Whether the kernel takes
    /// them depends on the machine: 1 s windows need CAP_SYS_RESOURCE, and
    /// some containers have no PSI at all. A refusal is printed and accepted;
    /// a registration must then behave.
    @Test(arguments: [false, true])
    func realKernelTriggers(unprivileged: Bool) async throws {
        let warning = unprivileged ? PSIPressureSource.Trigger.warning.unprivileged : .warning
        let critical = unprivileged ? PSIPressureSource.Trigger.critical.unprivileged : .critical
        let source: PSIPressureSource
        do {
            source = try PSIPressureSource(path: Self.systemFile, warning: warning, critical: critical)
        } catch {
            print("note: the kernel refused PSI triggers here: \(error)")
            switch error {
            case .invalidTrigger(let path, _, _), .permissionDenied(let path), .unavailable(let path, _):
                #expect(path == Self.systemFile)
            default:
                Issue.record("unexpected error \(error)")
            }
            return
        }
        #expect(source.name.contains(Self.systemFile))
        #expect(source.name.contains(warning.summary) && source.name.contains(critical.summary))
        let levels = source.levels
        let start = ContinuousClock.now
        source.stop()
        #expect(ContinuousClock.now - start < .seconds(2))
        let received = await allLevels(levels)
        #expect(received != nil)
        #expect(received?.allSatisfy { $0 != .normal } == true)
        source.stop()
    }

    @Test func regularFileIsRefusedAndLeftAlone() throws {
        let path = try temporaryDirectory() + "/memory"
        try Data("some avg10=0.00\n".utf8).write(to: URL(fileURLWithPath: path))
        let log = CallLog()
        let error = Syscalls.withOverride(log.recording()) {
            #expect(throws: MemoryPressureError.self) { try PSIPressureSource(path: path) }
        }
        guard case .unavailable(path, let reason) = error else {
            Issue.record("expected .unavailable, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("not a PSI file"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "some avg10=0.00\n")
        #expect(Set(log.opened) == Set(log.closed))
    }

    @Test func missingFileIsUnavailable() throws {
        let path = try temporaryDirectory() + "/absent"
        let error = #expect(throws: MemoryPressureError.self) { try PSIPressureSource(path: path) }
        #expect(error == .unavailable(path: path, reason: "no such file (a kernel without PSI, or PSI turned off with psi=0)"))
        #expect(error?.description.hasPrefix("\(path): cannot watch for memory pressure: no such file") == true)
    }

    @Test(arguments: [EACCES, EPERM])
    func openRefusedIsPermissionDenied(code: Int32) {
        var failing = Syscalls.system
        failing.open = { _, _, _ in
            errno = code
            return -1
        }
        let error = Syscalls.withOverride(failing) {
            #expect(throws: MemoryPressureError.self) { try PSIPressureSource(path: "/sys/fs/cgroup/a/memory.pressure") }
        }
        #expect(error == .permissionDenied(path: "/sys/fs/cgroup/a/memory.pressure"))
        #expect(error?.description == "/sys/fs/cgroup/a/memory.pressure: permission denied")
    }

    /// Stands in for a PSI file: a temporary file that claims to be on procfs,
    /// with `write` answering `answer` for trigger lines (recorded in `log`).
    static func fakePSI(_ log: CallLog, answer: @escaping @Sendable (_ call: Int) -> Int32? = { _ in nil }) -> Syscalls {
        var calls = log.recording()
        calls.fileSystemType = { _ in 0x9fa0 }
        let count = CallCounter()
        calls.write = { fd, buffer, length in
            let bytes = Array(UnsafeRawBufferPointer(start: buffer, count: length))
            log.recordWrite(bytes)
            if let code = answer(count.next()) {
                errno = code
                return -1
            }
            return length
        }
        return calls
    }

    @Test func eachTriggerGoesToItsOwnFileWithItsNul() async throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let log = CallLog()
        let source = try Syscalls.withOverride(Self.fakePSI(log)) { () throws(MemoryPressureError) in
            try PSIPressureSource(path: path)
        }
        #expect(log.written == [Array("some 150000 1000000\0".utf8), Array("full 100000 1000000\0".utf8)])
        #expect(log.opened.count == 4)  // two trigger files and the wake-up pipe
        #expect(source.name == "kernel PSI \(path) (some 150ms/1s, full 100ms/1s)")
        let levels = source.levels
        source.stop()
        #expect(await allLevels(levels) == [])
        #expect(Set(log.closed) == Set(log.opened))
        #expect(log.closed.count == 4)
    }

    @Test func kernelRefusalsAreNamed() throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let cases: [(Int32, MemoryPressureError)] = [
            (EINVAL, .invalidTrigger(path: path, line: "full 100000 1000000",
                                     reason: "the kernel refused it; without CAP_SYS_RESOURCE the window must be a multiple of 2s")),
            (EBUSY, .invalidTrigger(path: path, line: "full 100000 1000000", reason: "the file already has a trigger")),
            (EACCES, .permissionDenied(path: path)),
            (EOPNOTSUPP, .unavailable(path: path, reason: "PSI is turned off in this kernel (psi=0)")),
            (EIO, .unavailable(path: path, reason: "write failed: Input/output error")),
        ]
        for (code, expected) in cases {
            let log = CallLog()
            // The first trigger registers, the second is refused: the first file must be closed too.
            let calls = Self.fakePSI(log) { call in call == 1 ? code : nil }
            let error = Syscalls.withOverride(calls) {
                #expect(throws: MemoryPressureError.self) { try PSIPressureSource(path: path) }
            }
            #expect(error == expected)
            #expect(log.opened.count == 2)
            #expect(Set(log.closed) == Set(log.opened))
        }
    }

    @Test func refusalOfATwoSecondWindowDoesNotBlamePrivileges() {
        #expect(PSIPressureSource.refusalReason(line: "some 300000 2000000") == "the kernel refused it (invalid argument)")
        #expect(PSIPressureSource.refusalReason(line: "some 150000 1000000").contains("CAP_SYS_RESOURCE"))
    }

    @Test func pollEventsBecomeLevels() async throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let log = CallLog()
        var calls = Self.fakePSI(log)
        // The first poll reports the warning trigger, the second the critical, then real polls.
        let polls = CallCounter()
        calls.poll = { fds, count, timeout in
            let call = polls.next()
            if call < 2 {
                for index in 0..<count { fds[index].revents = 0 }
                fds[call].revents = Int16(POLLPRI)
                return 1
            }
            return Glibc.poll(fds, nfds_t(count), timeout)
        }
        let source = try Syscalls.withOverride(calls) { () throws(MemoryPressureError) in
            try PSIPressureSource(path: path)
        }
        let levels = source.levels
        #expect(await firstLevels(levels, count: 2) == [.warning, .critical])
        source.stop()
    }

    /// A real PSI file without a trigger reports POLLERR at once, as it does
    /// when the kernel drops a trigger: the stream must end by itself.
    @Test func vanishedTriggerEndsTheStream() async throws {
        guard FileManager.default.fileExists(atPath: Self.systemFile) else {
            print("note: no \(Self.systemFile) here")
            return
        }
        let log = CallLog()
        let calls = Self.fakePSI(log)
        let source: PSIPressureSource
        do {
            source = try Syscalls.withOverride(calls) { () throws(MemoryPressureError) in
                try PSIPressureSource(path: Self.systemFile)
            }
        } catch {
            print("note: cannot open \(Self.systemFile): \(error)")
            return
        }
        #expect(await allLevels(source.levels) == [])
        source.stop()
        #expect(Set(log.closed) == Set(log.opened))
    }

    @Test func pipeFailureIsReportedAndClosesTheFiles() throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let log = CallLog()
        var calls = Self.fakePSI(log)
        calls.pipe = { _ in
            errno = EMFILE
            return -1
        }
        let error = Syscalls.withOverride(calls) {
            #expect(throws: MemoryPressureError.self) { try PSIPressureSource(path: path) }
        }
        #expect(error == .unavailable(path: path, reason: "memory pressure watcher: pipe failed: Too many open files"))
        #expect(Set(log.closed) == Set(log.opened))
    }

    @Test func stopIsPromptIdempotentAndDeinitReleasesTheThread() async throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        for stopFirst in [true, false] {
            let log = CallLog()
            var source: PSIPressureSource? = try Syscalls.withOverride(Self.fakePSI(log)) { () throws(MemoryPressureError) in
                try PSIPressureSource(path: path)
            }
            let levels = source?.levels ?? AsyncStream { $0.finish() }
            let start = ContinuousClock.now
            if stopFirst {
                source?.stop()
                source?.stop()
            }
            source = nil
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(await allLevels(levels) == [])
            #expect(log.closed.count == 4)
        }
    }

    @Test func concurrentStopsAllReturn() async throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let log = CallLog()
        let source = try Syscalls.withOverride(Self.fakePSI(log)) { () throws(MemoryPressureError) in
            try PSIPressureSource(path: path)
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { source.stop() } }
        }
        #expect(log.closed.count == 4)
    }
}
