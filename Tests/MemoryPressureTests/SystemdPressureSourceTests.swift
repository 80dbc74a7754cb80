import Foundation
import SystemIO
import Testing
@testable import MemoryPressure
#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct SystemdPressureSourceTests {
    static func failure(_ environment: [String: String]) -> MemoryPressureError? {
        #expect(throws: MemoryPressureError.self) { try SystemdPressureSource(environment: environment) }
    }

    @Test func unsetOrEmptyIsNotConfigured() {
        #expect(Self.failure([:]) == .notConfigured)
        #expect(Self.failure(["MEMORY_PRESSURE_WATCH": ""]) == .notConfigured)
        #expect(Self.failure(["MEMORY_PRESSURE_WRITE": "c29tZQ=="]) == .notConfigured)
    }

    @Test func devNullTurnsWatchingOff() {
        #expect(Self.failure(["MEMORY_PRESSURE_WATCH": "/dev/null"]) == .turnedOff)
    }

    @Test func relativePathIsInvalid() {
        #expect(Self.failure(["MEMORY_PRESSURE_WATCH": "memory.pressure"])
            == .invalidEnvironment(variable: "MEMORY_PRESSURE_WATCH", reason: "not an absolute path: \"memory.pressure\""))
    }

    @Test func badBase64IsInvalid() {
        let error = Self.failure(["MEMORY_PRESSURE_WATCH": "/proc/pressure/memory", "MEMORY_PRESSURE_WRITE": "not base64!"])
        #expect(error == .invalidEnvironment(variable: "MEMORY_PRESSURE_WRITE", reason: "not base64: \"not base64!\""))
        #expect(error?.description == "MEMORY_PRESSURE_WRITE: not base64: \"not base64!\"")
    }

    @Test func psiFileWithoutTriggerIsInvalid() {
        guard FileManager.default.fileExists(atPath: "/proc/pressure/memory") else { return }
        let error = Self.failure(["MEMORY_PRESSURE_WATCH": "/proc/pressure/memory"])
        #expect(error == .invalidEnvironment(
            variable: "MEMORY_PRESSURE_WRITE",
            reason: "unset or empty, but /proc/pressure/memory is a PSI file, which needs a trigger"))
    }

    @Test func regularFileIsNotAPSIFile() throws {
        let path = try temporaryDirectory() + "/memory.pressure"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        let error = Self.failure(["MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": "c29tZSAyMDAwMDAgMjAwMDAwMAA="])
        guard case .unavailable(path, let reason) = error else {
            Issue.record("expected .unavailable, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("not a PSI file"))
        #expect(FileManager.default.contents(atPath: path) == Data("x".utf8))
    }

    @Test func directoryIsRefused() throws {
        let path = try temporaryDirectory()
        // open(O_RDWR) of a directory fails with EISDIR.
        #expect(Self.failure(["MEMORY_PRESSURE_WATCH": path]) == .unavailable(path: path, reason: "open failed: Is a directory"))
    }

    @Test func fifoBytesAreWarnings() async throws {
        let path = try temporaryDirectory() + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let log = CallLog()
        let source = try Syscalls.withOverride(log.recording()) { () throws(MemoryPressureError) in
            try SystemdPressureSource(environment: ["MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": ""])
        }
        #expect(source.name == "systemd MEMORY_PRESSURE_WATCH=\(path) (FIFO)")
        let levels = source.levels
        let writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        #expect(write(writer, "x", 1) == 1)
        #expect(await firstLevels(levels, count: 1) == [.warning])
        // Several bytes at once are drained and make at most as many events.
        #expect(write(writer, "xyz", 3) == 3)
        #expect(await firstLevels(levels, count: 1) == [.warning])
        let start = ContinuousClock.now
        source.stop()
        source.stop()
        #expect(ContinuousClock.now - start < .seconds(2))
        let rest = await allLevels(levels)
        #expect(rest != nil && (rest?.count ?? 0) <= 2)
        #expect(log.opened.count == 3)
        #expect(Set(log.closed) == Set(log.opened))
    }

    /// The bytes of MEMORY_PRESSURE_WRITE written to a FIFO we also read are
    /// taken back, not reported as pressure.
    @Test func ownTriggerBytesOnAFIFOAreNotAnEvent() async throws {
        let path = try temporaryDirectory() + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let source = try SystemdPressureSource(
            environment: ["MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": Data("some 1 2\0".utf8).base64EncodedString()])
        let levels = source.levels
        try await Task.sleep(for: .milliseconds(200))
        source.stop()
        #expect(await allLevels(levels) == [])
    }

    @Test func socketIsConnectedWrittenToAndWatched() async throws {
        let path = try temporaryDirectory() + "/pressure.sock"
        let listener = try listeningSocket(at: path)
        defer { close(listener) }
        let source = try SystemdPressureSource(
            environment: ["MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": Data("hello\0".utf8).base64EncodedString()])
        #expect(source.name == "systemd MEMORY_PRESSURE_WATCH=\(path) (socket)")
        let levels = source.levels
        let peer = accept(listener, nil, nil)
        #expect(peer >= 0)
        var received = [UInt8](repeating: 0, count: 16)
        let count = read(peer, &received, received.count)
        #expect(Array(received.prefix(max(count, 0))) == Array("hello\0".utf8))
        #expect(write(peer, "!", 1) == 1)
        #expect(await firstLevels(levels, count: 1) == [.warning])
        // The peer hanging up ends the stream.
        close(peer)
        #expect(await allLevels(levels) == [])
        source.stop()
    }

    @Test func socketNobodyListensOnIsUnavailable() throws {
        let path = try temporaryDirectory() + "/pressure.sock"
        close(try listeningSocket(at: path))
        #expect(Self.failure(["MEMORY_PRESSURE_WATCH": path])
            == .unavailable(path: path, reason: "connect failed: Connection refused"))
    }

    @Test func deinitWithoutStopReleasesEverything() async throws {
        let path = try temporaryDirectory() + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let log = CallLog()
        var source: SystemdPressureSource? = try Syscalls.withOverride(log.recording()) { () throws(MemoryPressureError) in
            try SystemdPressureSource(environment: ["MEMORY_PRESSURE_WATCH": path])
        }
        let levels = source?.levels ?? AsyncStream { $0.finish() }
        source = nil
        #expect(await allLevels(levels) == [])
        #expect(log.opened.count == 3)
        #expect(log.closed.count == 3)
    }
}

/// An `AF_UNIX` stream socket listening at `path`.
func listeningSocket(at path: String) throws -> Int32 {
    struct SocketError: Error {}
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SocketError() }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw SocketError() }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
    let bound = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, listen(fd, 4) == 0 else {
        close(fd)
        throw SocketError()
    }
    return fd
}
