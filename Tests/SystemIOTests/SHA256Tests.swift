import Testing
@testable import SystemIO

@Suite struct SHA256Tests {
    // Test vectors from FIPS 180-2 appendix B.
    @Test func knownVectors() {
        #expect(SHA256Digest.of(Array<UInt8>()).description
            == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest.of(Array("abc".utf8)).description
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Digest.of(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)).description
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test(arguments: [1, 7, 64, 1000, 65_536])
    func incrementalEqualsOneShot(chunkSize: Int) {
        // One million 'a' bytes: the long FIPS vector.
        let data = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        var hasher = SHA256Hasher()
        var offset = 0
        data.withUnsafeBytes { bytes in
            while offset < bytes.count {
                let end = min(offset + chunkSize, bytes.count)
                hasher.update(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                offset = end
            }
        }
        #expect(hasher.finalize().description == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
