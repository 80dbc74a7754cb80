import CoreMLSchema
import FixtureSupport
import Foundation
import Testing
@testable import ModelSpec

/// Large weight payloads are unpacked from a skeleton and copied once; the
/// result must equal what protobuf-c makes of the plain input, always.
@Suite struct SkeletonUnpackerTests {
    /// What protobuf-c alone makes of `bytes`, re-serialized.
    func plainRepack(_ bytes: [UInt8]) throws -> [UInt8] {
        let descriptor = messageDescriptor(core_ml__specification__model__init, CoreML__Specification__Model())
        let message = try #require(bytes.withUnsafeBufferPointer { protobuf_c_message_unpack(descriptor, nil, $0.count, $0.baseAddress) })
        defer { protobuf_c_message_free_unpacked(message, nil) }
        return pack(UnsafeRawPointer(message))
    }

    func pack(_ message: UnsafeRawPointer) -> [UInt8] {
        let base = message.assumingMemoryBound(to: ProtobufCMessage.self)
        var out = [UInt8](repeating: 0, count: protobuf_c_message_get_packed_size(base))
        _ = out.withUnsafeMutableBufferPointer { protobuf_c_message_pack(base, $0.baseAddress) }
        return out
    }

    /// Unpacks through `Specification`, recording the released ranges.
    func unpack(_ bytes: [UInt8]) throws -> (repacked: [UInt8], released: [Range<Int>]) {
        var released: [Range<Int>] = []
        let specification = try bytes.withUnsafeBytes { buffer in
            try Specification.unpack(buffer, path: "t.mlmodel", release: { released.append($0) })
        }
        return (withExtendedLifetime(specification) { pack(UnsafeRawPointer(specification.root)) }, released)
    }

    func weights(_ count: Int, seed: Float) -> [Float] {
        (0..<count).map { Float($0) * 0.001 + seed }
    }

    @Test(arguments: [1, 1023, 1024, 1025, 70_000])
    func equalsPlainUnpack(floats: Int) throws {
        let bytes = Wire.innerProductNetwork(layers: [
            (UInt64(floats), 1, weights(floats, seed: 1)), (1, 3, weights(3, seed: 2)), (3, UInt64(floats), weights(3 * floats, seed: 3)),
        ])
        let (repacked, released) = try unpack(bytes)
        #expect(repacked == (try plainRepack(bytes)))
        // The input itself re-serializes identically: nothing was lost or moved.
        #expect(repacked == bytes)
        let large = [floats, 3, 3 * floats].filter { $0 * 4 >= WireFormatGuard.largeFieldThreshold }
        #expect(released.count == large.count)
        #expect(released.map(\.count) == large.map { $0 * 4 })
    }

    @Test func repeatedLargeFieldFallsBackToPlainUnpack() throws {
        // floatValue given twice in one WeightParams: protobuf concatenates them.
        let chunk = Wire.field(1, floats: weights(2000, seed: 4))
        let params = Wire.field(1, varint: 4000) + Wire.field(2, varint: 1) + Wire.field(20, bytes: chunk + chunk)
        let layer = Wire.field(1, bytes: Array("dense".utf8)) + Wire.field(2, bytes: Array("x".utf8))
            + Wire.field(3, bytes: Array("y".utf8)) + Wire.field(140, bytes: params)
        let description = Wire.field(1, bytes: Wire.arrayFeature("x", size: 4000)) + Wire.field(10, bytes: Wire.arrayFeature("y", size: 1))
        let bytes = Wire.field(1, varint: 1) + Wire.field(2, bytes: description) + Wire.field(500, bytes: Wire.field(1, bytes: layer))
        let (repacked, _) = try unpack(bytes)
        #expect(repacked == (try plainRepack(bytes)))
        let specification = try bytes.withUnsafeBytes { try Specification.unpack($0, path: "t.mlmodel") }
        let summary = ModelSummary(specification, blobs: nil)
        #expect(summary.weights?.first?.count == 4000)
    }

    @Test func spoofedMarkerCannotRedirectValues() throws {
        // A genuine two-float weight whose bits look like a marker for large field 0.
        let spoof = [Float(bitPattern: SkeletonUnpacker.magic), Float(bitPattern: 0)]
        let bytes = Wire.innerProductNetwork(layers: [(2, 1, spoof), (1, 2000, weights(2000, seed: 5))])
        let (repacked, _) = try unpack(bytes)
        #expect(repacked == bytes)
    }

    @Test func fixturesUnpackAsPlain() throws {
        for entry in Fixtures.models where entry.file.hasSuffix(".mlmodel") {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: Fixtures.path(entry.file))))
            #expect(try unpack(bytes).repacked == (try plainRepack(bytes)), "\(entry.file)")
        }
    }
}
