import Foundation

/// Where a request's spans belong: a W3C Trace Context trace id and the span that is their parent,
/// as the `traceparent` header carries them (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`).
public struct TraceContext: Sendable, Equatable {
    /// 32 lower-case hex digits, not all zero.
    public let traceID: String
    /// 16 lower-case hex digits, not all zero.
    public let parentSpanID: String
    /// The trace flags byte (bit 0: sampled).
    public let flags: UInt8

    /// The context a `traceparent` header gives, or nil when the header is absent or invalid (then
    /// the request starts a trace of its own, as the W3C recommendation says). Version 00 must be
    /// exactly 55 characters; a later version may carry more fields after its first four, which are
    /// read the same way; version ff is invalid.
    public init?(traceparent header: String?) {
        guard let header else { return nil }
        let text = header.trimmingCharacters(in: .whitespaces)
        let fields = text.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count >= 4, let version = Self.byte(fields[0]), version != 0xff else { return nil }
        if version == 0 { guard fields.count == 4, text.utf8.count == 55 else { return nil } }
        let traceID = String(fields[1])
        let parentSpanID = String(fields[2])
        guard Self.isID(traceID, digits: 32), Self.isID(parentSpanID, digits: 16), let flags = Self.byte(fields[3]) else { return nil }
        self.traceID = traceID
        self.parentSpanID = parentSpanID
        self.flags = flags
    }

    /// Lower-case hex of `digits` digits, not all zero.
    static func isID(_ text: String, digits: Int) -> Bool {
        text.utf8.count == digits && text.utf8.allSatisfy(isLowerHex) && text.utf8.contains { $0 != UInt8(ascii: "0") }
    }

    private static func byte(_ text: Substring) -> UInt8? {
        guard text.utf8.count == 2, text.utf8.allSatisfy(isLowerHex) else { return nil }
        return UInt8(text, radix: 16)
    }

    private static func isLowerHex(_ character: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(character) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(character)
    }
}

/// Random W3C trace and span ids, as lower-case hex, from the system's generator.
enum TraceIDs {
    /// 16 random bytes, never all zero.
    static func traceID() -> String { hex(count: 16) }

    /// 8 random bytes, never all zero.
    static func spanID() -> String { hex(count: 8) }

    private static func hex(count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        while true {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count)
            while bytes.count < count {
                var word = generator.next() as UInt64
                for _ in 0..<min(8, count - bytes.count) {
                    bytes.append(UInt8(truncatingIfNeeded: word))
                    word >>= 8
                }
            }
            if bytes.contains(where: { $0 != 0 }) { return hexString(bytes) }
        }
    }

    static func hexString(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
