import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Debian's nginx serving the files in one directory on 127.0.0.1 for the life
/// of this object, with nginx's own ETag, Last-Modified and Range handling.
///
/// nginx runs in the foreground as one child process (no master, no workers,
/// so no user switch: the same as root and as anyone else). Its
/// configuration, pid file, error log and temp paths live in a scratch prefix
/// directory, removed on deinit. Starting and stopping are bounded in time.
final class NginxServer {
    static let executable = "/usr/sbin/nginx"

    enum StartError: Error, CustomStringConvertible {
        case notInstalled(path: String)
        case noFreePort(errno: Int32)
        case spawn(errno: Int32)
        case failed(attempts: Int, log: String)
        case timedOut(after: Duration, log: String)

        var description: String {
            switch self {
            case .notInstalled(let path):
                return "\(path) is missing: run `make deps` (or `apt-get install nginx`) to install nginx for these tests"
            case .noFreePort(let code):
                return "no free loopback port: \(String(cString: strerror(code)))"
            case .spawn(let code):
                return "cannot start \(executable): \(String(cString: strerror(code)))"
            case .failed(let attempts, let log):
                return "nginx did not start (\(attempts) attempt\(attempts == 1 ? "" : "s")): \(log)"
            case .timedOut(let after, let log):
                return "nginx did not accept connections within \(after): \(log)"
            }
        }
    }

    let port: Int
    /// With TLS: the self-signed certificate (for 127.0.0.1) clients must trust.
    let certificate: String?
    private let pid: pid_t
    private let prefix: String

    /// Starts nginx serving `directory` on a free loopback port and returns
    /// once it accepts connections; each attempt waits at most `startTimeout`.
    /// A port taken between choosing and binding it costs another attempt.
    ///
    /// With `tls`, nginx serves https with HTTP/2 and a fresh self-signed
    /// certificate for 127.0.0.1 (made with the openssl command), and logs
    /// each request's protocol to `requestProtocols`.
    init(serving directory: String, tls: Bool = false, startTimeout: Duration = .seconds(10), attempts: Int = 3) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw StartError.notInstalled(path: Self.executable)
        }
        let prefix = NSTemporaryDirectory() + "nginx-\(UUID().uuidString)"
        self.prefix = prefix
        var started = false
        defer { if !started { try? FileManager.default.removeItem(atPath: prefix) } }
        var attempt = 0
        while true {
            attempt += 1
            try? FileManager.default.removeItem(atPath: prefix)
            try FileManager.default.createDirectory(atPath: prefix + "/temp", withIntermediateDirectories: true)
            let port = try Self.freeLoopbackPort()
            let configuration = prefix + "/nginx.conf"
            if tls { try Self.makeCertificate(prefix: prefix) }
            try Self.configuration(prefix: prefix, port: port, root: directory, tls: tls)
                .write(toFile: configuration, atomically: true, encoding: .utf8)
            let pid = try Self.spawn([Self.executable, "-p", prefix + "/", "-c", configuration, "-e", prefix + "/error.log"])

            let deadline = ContinuousClock.now + startTimeout
            var exited = false
            var ready = false
            while true {
                exited = Self.reap(pid, blocking: false)
                ready = !exited && Self.isReady(pid: pid, prefix: prefix, port: port)
                if exited || ready || ContinuousClock.now >= deadline { break }
                usleep(10_000)
            }
            if ready {
                self.port = port
                certificate = tls ? prefix + "/cert.pem" : nil
                self.pid = pid
                started = true
                return
            }
            let log = Self.errorLog(prefix: prefix)
            if !exited {
                Self.stop(pid)
                throw StartError.timedOut(after: startTimeout, log: log)
            }
            // nginx tries to bind for 2.5 s, then exits: someone else took the port.
            guard log.contains("Address already in use"), attempt < attempts else {
                throw StartError.failed(attempts: attempt, log: log)
            }
        }
    }

    deinit {
        Self.stop(pid)
        try? FileManager.default.removeItem(atPath: prefix)
    }

    /// The URL of `name` on this server.
    func url(_ name: String) -> String {
        "\(certificate == nil ? "http" : "https")://127.0.0.1:\(port)/\(name)"
    }

    /// With TLS, the protocol of each request so far ("HTTP/2.0", "HTTP/1.1").
    var requestProtocols: [String] {
        ((try? String(contentsOfFile: prefix + "/access.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// A key and a self-signed certificate for 127.0.0.1, valid for a day.
    private static func makeCertificate(prefix: String) throws {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", prefix + "/key.pem", "-out", prefix + "/cert.pem", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw StartError.failed(attempts: 0, log: "openssl could not make a certificate") }
    }

    /// A configuration that touches nothing outside `prefix` (Debian's
    /// compiled-in paths are under /var and /run) and logs no requests (with
    /// TLS, only each request's protocol).
    private static func configuration(prefix: String, port: Int, root: String, tls: Bool) -> String {
        let listen = tls
            ? """
              listen 127.0.0.1:\(port) ssl http2;
                      ssl_certificate "\(prefix)/cert.pem";
                      ssl_certificate_key "\(prefix)/key.pem";
                      access_log "\(prefix)/access.log" protocols;
              """
            : "listen 127.0.0.1:\(port);"
        return """
        daemon off;
        master_process off;
        worker_processes 1;
        pid "\(prefix)/nginx.pid";
        error_log "\(prefix)/error.log" warn;
        events { worker_connections 64; }
        http {
            access_log off;
            log_format protocols '$server_protocol';
            default_type application/octet-stream;
            sendfile on;
            client_body_temp_path "\(prefix)/temp/body";
            proxy_temp_path "\(prefix)/temp/proxy";
            fastcgi_temp_path "\(prefix)/temp/fastcgi";
            uwsgi_temp_path "\(prefix)/temp/uwsgi";
            scgi_temp_path "\(prefix)/temp/scgi";
            server {
                \(listen)
                root "\(root)";
            }
        }

        """
    }

    /// True once nginx wrote its pid file (it does so after binding its
    /// socket, so another server on the port does not count) and the port
    /// accepts a connection.
    private static func isReady(pid: pid_t, prefix: String, port: Int) -> Bool {
        guard let text = try? String(contentsOfFile: prefix + "/nginx.pid", encoding: .utf8),
              pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) == pid
        else { return false }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return connected == 0
    }

    /// A port the kernel had free a moment ago: bound with port 0, then released.
    private static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartError.noFreePort(errno: errno) }
        defer { close(fd) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 ? getsockname(fd, pointer, &length) : -1
            }
        }
        guard bound == 0 else { throw StartError.noFreePort(errno: errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// Starts `arguments[0]` with stdin, stdout and stderr on /dev/null, no
    /// other descriptor inherited, and no signal blocked. (Foundation's
    /// `Process` hands the child the mask of the thread that starts it, and
    /// the test runner's threads block SIGTERM: nginx would never see it.)
    private static func spawn(_ arguments: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Other tests' sockets and pipes (glibc skips any closed by now).
        for fd in ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ)
        guard result == 0 else { throw StartError.spawn(errno: result) }
        return pid
    }

    /// Collects the child's exit status; true once it has exited (it is then
    /// gone, so its pid is never signalled again).
    private static func reap(_ pid: pid_t, blocking: Bool) -> Bool {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if result == -1, errno == EINTR { continue }
            return result == pid || result == -1
        }
    }

    /// SIGTERM (nginx's fast shutdown), then SIGKILL if it is still running after 5 s.
    private static func stop(_ pid: pid_t) {
        if reap(pid, blocking: false) { return }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if reap(pid, blocking: false) { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        _ = reap(pid, blocking: true)
    }

    /// The last lines of nginx's error log, for an error message.
    private static func errorLog(prefix: String) -> String {
        let text = (try? String(contentsOfFile: prefix + "/error.log", encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").suffix(3)
        return lines.isEmpty ? "(empty error log)" : lines.joined(separator: " / ")
    }
}
