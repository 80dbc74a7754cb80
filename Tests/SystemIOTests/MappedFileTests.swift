import Foundation
import Testing
@testable import SystemIO

@Suite struct MappedFileTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-mapped-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    @Test(arguments: [1, 4095, 4096, 4097, 1 << 20])
    func mapsEveryByte(size: Int) throws {
        let path = directory.appendingPathComponent("data.bin").path
        let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(content).write(to: URL(fileURLWithPath: path))
        let file = try MappedFile(path: path)
        #expect(file.bytes.count == size)
        #expect(Array(file.bytes) == content)
    }

    @Test func emptyFileHasEmptyBuffer() throws {
        let path = directory.appendingPathComponent("empty").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let file = try MappedFile(path: path)
        #expect(file.bytes.isEmpty)
    }

    @Test func missingFileNamesPathAndReason() {
        let path = directory.appendingPathComponent("absent").path
        #expect(throws: MappedFile.OpenError.system(SystemCallError(call: "open", path: path, code: ENOENT))) {
            try MappedFile(path: path)
        }
    }

    @Test func directoryIsRefused() {
        #expect(throws: MappedFile.OpenError.notRegularFile(path: directory.path)) {
            try MappedFile(path: directory.path)
        }
    }

    @Test func mmapFailureSurfacesAsTypedError() throws {
        let path = directory.appendingPathComponent("data.bin").path
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        var failing = Syscalls.system
        failing.mmap = { _, _ in
            errno = ENOMEM
            return nil
        }
        let error = Syscalls.withOverride(failing) { () -> MappedFile.OpenError? in
            do throws(MappedFile.OpenError) {
                _ = try MappedFile(path: path)
                return nil
            } catch {
                return error
            }
        }
        #expect(error == .system(SystemCallError(call: "mmap", path: path, code: ENOMEM)))
        #expect(error?.description == "\(path): mmap failed: Cannot allocate memory")
    }
}
