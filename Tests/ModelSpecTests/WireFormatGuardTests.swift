import FixtureSupport
import Testing
@testable import ModelSpec

@Suite struct WireFormatGuardTests {
    func unpack(_ bytes: [UInt8]) throws(ModelSpecError) -> Specification {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ModelSpecError) in try Specification.unpack(buffer, path: "test.mlmodel") }
        }
        return try result.get()
    }

    func error(_ bytes: [UInt8]) -> ModelSpecError? {
        do {
            _ = try unpack(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func smallValidModelUnpacks() throws {
        let feature = Wire.field(Wire.featureName, bytes: Array("x".utf8))
        let bytes = Wire.field(Wire.specificationVersion, varint: 4)
            + Wire.field(Wire.description, bytes: Wire.field(Wire.descriptionInput, bytes: feature))
        let summary = ModelSummary(try unpack(bytes), blobs: nil)
        #expect(summary.specificationVersion == 4)
        #expect(summary.inputs.map(\.name) == ["x"])
    }

    /// Nesting sweeps across the limit: below it unpacks, at and above it is
    /// refused with a message, never a crash (protobuf-c alone overflows its
    /// stack on the deepest of these).
    @Test(arguments: [10, 45, 49, 50, 51, 1000, 5000])
    func nestingIsBounded(depth: Int) {
        // Each pipeline level is two messages (Model -> Pipeline -> Model).
        let levels = 2 * depth + 1
        let result = error(Wire.nestedPipelines(depth: depth))
        if levels < WireFormatGuard.maximumDepth {
            #expect(result == nil)
        } else {
            guard case .malformed(let path, let detail) = result else {
                Issue.record("expected .malformed, got \(String(describing: result))")
                return
            }
            #expect(path == "test.mlmodel")
            #expect(detail.hasPrefix("messages nest deeper than \(WireFormatGuard.maximumDepth) levels"))
        }
    }

    @Test(arguments: [[0xFF, 0xFE], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0x61, 0xE2, 0x82]] as [[UInt8]])
    func invalidUTF8StringsAreRefused(name: [UInt8]) {
        let feature = Wire.field(Wire.featureName, bytes: name)
        let bytes = Wire.field(Wire.specificationVersion, varint: 4)
            + Wire.field(Wire.description, bytes: Wire.field(Wire.descriptionInput, bytes: feature))
        guard case .malformed(_, let detail) = error(bytes) else {
            Issue.record("expected .malformed")
            return
        }
        #expect(detail.hasPrefix("string field name in description.input is not valid UTF-8"))
    }

    @Test func validMultibyteUTF8IsAccepted() throws {
        let feature = Wire.field(Wire.featureName, bytes: Array("größe→🙂".utf8))
        let bytes = Wire.field(Wire.specificationVersion, varint: 4)
            + Wire.field(Wire.description, bytes: Wire.field(Wire.descriptionInput, bytes: feature))
        #expect(ModelSummary(try unpack(bytes), blobs: nil).inputs.first?.name == "größe→🙂")
    }

    @Test func cutAnywhereIsTruncatedOrRefusedNeverACrash() {
        let feature = Wire.field(Wire.featureName, bytes: Array("input".utf8))
        let full = Wire.field(Wire.specificationVersion, varint: 4)
            + Wire.field(Wire.description, bytes: Wire.field(Wire.descriptionInput, bytes: feature) + Wire.field(2, bytes: feature))
        for length in 1..<full.count {
            let result = error(Array(full.prefix(length)))
            switch result {
            case .truncated, nil: break
            default: Issue.record("prefix of \(length) bytes: \(String(describing: result))")
            }
        }
        // Cut inside the description, the error says so.
        guard case .truncated(_, let detail) = error(Array(full.prefix(full.count - 3))) else {
            Issue.record("expected .truncated")
            return
        }
        #expect(detail.contains("description"))
    }

    @Test func wrongWireTypeOfKnownFieldIsMalformed() {
        let bytes = Wire.field(Wire.specificationVersion, varint: 4) + Wire.field(Wire.description, varint: 7)
        #expect(error(bytes) == .malformed(path: "test.mlmodel",
                                          detail: "field description at the top level has wire type 0 at byte 2, expected 2"))
    }

    @Test func groupsAndFieldZeroAreMalformed() {
        let version = Wire.field(Wire.specificationVersion, varint: 4)
        #expect(error(version + [0x1B]) == .malformed(path: "test.mlmodel",
            detail: "field 3 at the top level uses wire type 3, which Core ML never writes"))
        #expect(error(version + [0x00, 0x00]) == .malformed(path: "test.mlmodel",
            detail: "invalid field number 0 at byte 2 at the top level"))
    }

    @Test func nestedLengthPastItsParentIsMalformedNotTruncated() {
        // The description holds 3 bytes, and inside them an input claims 50;
        // the file itself goes on long enough, so this is corruption, not a cut.
        let description = Wire.varint(Wire.descriptionInput << 3 | 2) + Wire.varint(50) + [0x41]
        let padding = (0..<40).flatMap { _ in Wire.field(Wire.specificationVersion, varint: 4) }
        let bytes = Wire.field(Wire.specificationVersion, varint: 4) + Wire.field(Wire.description, bytes: description) + padding
        #expect(error(bytes) == .malformed(path: "test.mlmodel",
            detail: "field input in description declares 50 bytes, more than its enclosing message holds"))
    }

    @Test func otherFormatsAreNamed() {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
        #expect(error(png) == .notCoreML(path: "test.mlmodel", detail: "the file is a PNG image"))
        #expect(error(Array("  {\"a\": 1}".utf8)) == .notCoreML(path: "test.mlmodel", detail: "the file is JSON text"))
        #expect(error(Array("<!DOCTYPE html>".utf8))
            == .notCoreML(path: "test.mlmodel", detail: "the file is an HTML page (a download that returned a web page?)"))
    }

    @Test func bytesWithNoModelFieldAreNotCoreML() {
        // Valid protobuf, but field 77 is no field of a Model.
        #expect(error(Wire.field(77, varint: 1))
            == .notCoreML(path: "test.mlmodel", detail: "no field of a Core ML specification found"))
        #expect(error([0xFF]) == .notCoreML(path: "test.mlmodel", detail: "the bytes do not form a Core ML specification"))
    }

    @Test func unknownModelTypeNamesTheField() {
        let bytes = Wire.field(Wire.specificationVersion, varint: 4) + Wire.field(9999, bytes: [0x08, 0x01])
        #expect(error(bytes) == .unknownModelType(path: "test.mlmodel", fieldNumbers: [9999]))
    }

    @Test func emptyBytes() {
        #expect(error([]) == .emptyFile(path: "test.mlmodel"))
    }
}
