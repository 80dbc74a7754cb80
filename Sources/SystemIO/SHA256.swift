#if canImport(Glibc)
import Glibc
#endif
import CCrypto

/// A SHA-256 digest computed by OpenSSL's libcrypto.
public struct SHA256Digest: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    public let bytes: [UInt8]

    /// Lowercase hexadecimal, 64 characters.
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The digest written as `description` writes it (64 hexadecimal digits); `nil` for anything else.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.bytes = bytes
    }

    fileprivate init(bytes: [UInt8]) { self.bytes = bytes }

    /// The digest of `data` in one call.
    public static func of(_ data: UnsafeRawBufferPointer) -> SHA256Digest {
        var hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    /// The digest of `data` in one call.
    public static func of<Bytes: Sequence<UInt8>>(_ data: Bytes) -> SHA256Digest {
        let array = Array(data)
        return array.withUnsafeBytes { of($0) }
    }
}

/// Incremental SHA-256 for streams: feed it chunks, then finalize once.
///
/// A value type with reference semantics inside (the OpenSSL context): do not
/// copy a hasher and use both copies.
public struct SHA256Hasher: ~Copyable {
    private let context: OpaquePointer

    public init() {
        // EVP_MD_CTX_new only fails when memory is exhausted; nothing sensible
        // can continue then.
        guard let context = EVP_MD_CTX_new() else { fatalError("OpenSSL: out of memory creating a digest context") }
        self.context = context
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `data` to the digest.
    public mutating func update(_ data: UnsafeRawBufferPointer) {
        guard let base = data.baseAddress, !data.isEmpty else { return }
        EVP_DigestUpdate(context, base, data.count)
    }

    /// Finishes and returns the digest; the hasher is consumed.
    public consuming func finalize() -> SHA256Digest {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        digest.withUnsafeMutableBufferPointer { buffer in
            _ = EVP_DigestFinal_ex(context, buffer.baseAddress, &length)
        }
        return SHA256Digest(bytes: digest)
    }
}

extension SHA256Digest {
    /// The digest and size of the file at `path`, read in 1 MiB chunks so
    /// memory stays constant whatever the file's size.
    public static func ofFile(at path: String) throws(SystemCallError) -> (digest: SHA256Digest, size: UInt64) {
        let (digest, size, _) = try ofFileWithIdentity(at: path)
        return (digest, size)
    }

    /// The digest and size of the file at `path`, and which file was read
    /// (device and inode of the open file), so a caller holding another path
    /// to it can recognize it.
    public static func ofFileWithIdentity(
        at path: String
    ) throws(SystemCallError) -> (digest: SHA256Digest, size: UInt64, identity: FileIdentity) {
        let calls = Syscalls.current
        let fd = calls.open(path, O_RDONLY, 0)
        guard fd >= 0 else { throw SystemCallError(call: "open", path: path, code: errno) }
        defer { _ = calls.close(fd) }
        let identity = try FileIdentity(fd: fd, path: path)
        var hasher = SHA256Hasher()
        var size: UInt64 = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { chunk.deallocate() }
        while true {
            guard let base = chunk.baseAddress else { break }
            let count = calls.read(fd, base, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(call: "read", path: path, code: errno)
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
            size += UInt64(count)
        }
        return (hasher.finalize(), size, identity)
    }
}

/// Which file an open descriptor is, and the state of its content: device,
/// inode, size and modification and change times. Two identities are equal
/// when they name the same file and nothing was written to it in between
/// (as far as the file system's time stamps tell).
public struct FileIdentity: Equatable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: UInt64
    public var modified: timespec
    public var changed: timespec

    public init(device: UInt64, inode: UInt64, size: UInt64, modified: timespec, changed: timespec) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modified = modified
        self.changed = changed
    }

    /// The identity of the file open as `fd`.
    public init(fd: Int32, path: String) throws(SystemCallError) {
        var info = stat()
        guard Syscalls.current.fstat(fd, &info) == 0 else { throw SystemCallError(call: "fstat", path: path, code: errno) }
        self.init(info)
    }

    /// The identity of the file at `path`.
    public init(path: String) throws(SystemCallError) {
        var info = stat()
        guard Syscalls.current.stat(path, &info) == 0 else { throw SystemCallError(call: "stat", path: path, code: errno) }
        self.init(info)
    }

    private init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = UInt64(max(info.st_size, 0))
        modified = info.st_mtim
        changed = info.st_ctim
    }

    public static func == (lhs: FileIdentity, rhs: FileIdentity) -> Bool {
        lhs.device == rhs.device && lhs.inode == rhs.inode && lhs.size == rhs.size
            && lhs.modified.tv_sec == rhs.modified.tv_sec && lhs.modified.tv_nsec == rhs.modified.tv_nsec
            && lhs.changed.tv_sec == rhs.changed.tv_sec && lhs.changed.tv_nsec == rhs.changed.tv_nsec
    }
}
