import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `test_server.py` running on 127.0.0.1 for the life of this object, serving
/// the files in one directory.
public final class TestHTTPServer {
    public enum StartError: Error { case noPort(String) }

    public let port: Int
    private let process: Process
    /// The server's stdin; closing it stops the server (also when the test process dies).
    private let input = Pipe()

    public init(serving directory: String) throws {
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
    public func url(_ name: String, fault: String? = nil) -> String {
        "http://127.0.0.1:\(port)/\(name)" + (fault.map { "?fault=\($0)" } ?? "")
    }

    /// The requests the server answered so far, oldest first: "path", "Host",
    /// "Range", "If-Range", "If-None-Match", "If-Modified-Since",
    /// "Authorization", "X-Token" (when sent), "status" and "sent" (body bytes).
    public func requestLog() throws -> [[String: Any]] {
        let response = try Self.get("/__log", port: port)
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw StartError.noPort("no log") }
        let body = Data(response[split.upperBound...])
        return (try JSONSerialization.jsonObject(with: body) as? [[String: Any]]) ?? []
    }

    /// The logged requests whose path starts with "/" + `name`.
    public func requests(for name: String) throws -> [[String: Any]] {
        try requestLog().filter { ($0["path"] as? String)?.hasPrefix("/" + name) ?? false }
    }

    /// A plain HTTP/1.0 GET over a socket (the tests' own client, independent of libcurl).
    private static func get(_ path: String, port: Int) throws -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartError.noPort("socket") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw StartError.noPort("connect") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else { throw StartError.noPort("send") }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            response += buffer[..<count]
        }
        return response
    }
}
