import Foundation

/// `test_server.py` running on 127.0.0.1 for the life of this object, serving
/// the files in one directory.
final class TestHTTPServer {
    enum StartError: Error { case noPort(String) }

    let port: Int
    private let process: Process
    /// The server's stdin; closing it stops the server (also when the test process dies).
    private let input = Pipe()

    init(serving directory: String) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("test_server.py").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, directory]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = input
        try process.run()
        var line = [UInt8]()
        let reader = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let port = Int(text) else {
            try? input.fileHandleForWriting.close()
            throw StartError.noPort(text)
        }
        self.port = port
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// The URL of `name` on this server, with `fault` as the query when given.
    func url(_ name: String, fault: String? = nil) -> String {
        "http://127.0.0.1:\(port)/\(name)" + (fault.map { "?fault=\($0)" } ?? "")
    }
}
