import CoreMLSchema
import FixtureSupport
import Foundation
import SystemIO
import Testing
@testable import ModelCompiler
@testable import ModelSpec

/// Reads bundles with nothing but what docs/bundle-format.md says — raw JSON,
/// raw little-endian integers at documented offsets, the documented path
/// grammar — so the document and the writer cannot drift apart.
@Suite struct BundleFormatDocumentTests {
    /// The data type table of the document.
    static let dataTypeCodes: [String: UInt32] = [
        "float16": 1, "float32": 2, "uint8": 3, "int8": 4, "bfloat16": 5, "int16": 6, "uint16": 7, "int4": 8,
        "uint1": 9, "uint2": 10, "uint4": 11, "uint3": 12, "uint6": 13, "int32": 14, "uint32": 15,
        "float8E4M3FN": 16, "float8E5M2": 17,
    ]
    static let documentedFiles: Set = ["manifest.json", "metadata.json", "model.spec", "weights/weight.bin",
                                       "weights/index.json", "model.mil"]

    func json(_ path: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func integer<T: FixedWidthInteger>(_ bytes: Data, _ offset: Int, _: T.Type) -> T {
        var value: T = 0
        for index in 0..<MemoryLayout<T>.size {
            value |= T(bytes[bytes.startIndex + offset + index]) << (8 * index)
        }
        return value
    }

    @Test(arguments: Fixtures.models)
    func bundleReadsAsDocumented(entry: Fixtures.Entry) throws {
        let directory = try Fixtures.temporaryDirectory("document")
        let bundle = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path(entry.file), to: bundle)

        // manifest.json: version, files with sizes and digests, nothing undocumented.
        let manifest = try #require(try json(bundle + "/manifest.json") as? [String: Any])
        #expect(manifest["formatVersion"] as? Int == 1)
        let files = try #require(manifest["files"] as? [[String: Any]])
        let paths = files.compactMap { $0["path"] as? String }
        #expect(paths == paths.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        #expect(Set(paths + ["manifest.json"]) == Set(try tree(bundle).keys))
        #expect(Set(paths).isSubset(of: Self.documentedFiles))
        for file in files {
            let data = try Data(contentsOf: URL(fileURLWithPath: bundle + "/" + (file["path"] as? String ?? "")))
            #expect(file["size"] as? Int == data.count)
            #expect(file["sha256"] as? String == SHA256Digest.of(data).description)
        }
        let source = try #require(manifest["source"] as? [String: Any])
        #expect(source["sha256"] as? String == (try documentedSourceDigest(Fixtures.path(entry.file))))
        let metadataText = try String(contentsOfFile: bundle + "/metadata.json", encoding: .utf8)
        #expect(metadataText.hasSuffix("\n") && !metadataText.contains(directory.path))

        // weight.bin: header, then records and data on 64-byte boundaries.
        let weights = try Data(contentsOf: URL(fileURLWithPath: bundle + "/weights/weight.bin"))
        #expect(integer(weights, 4, UInt32.self) == 2)
        #expect(weights.prefix(64).dropFirst(8).allSatisfy { $0 == 0 })
        let index = try #require((try json(bundle + "/weights/index.json") as? [String: Any])?["weights"] as? [[String: Any]])
        var recordOffsets: [Int] = []
        for weight in index {
            let offset = try #require(weight["blobOffset"] as? Int)
            #expect(offset % 64 == 0 && offset >= 64 && offset + 64 <= weights.count)
            #expect(integer(weights, offset, UInt32.self) == 0xDEAD_BEEF)
            let dataType = try #require(weight["dataType"] as? String)
            #expect(integer(weights, offset + 4, UInt32.self) == Self.dataTypeCodes[dataType])
            #expect(integer(weights, offset + 8, UInt64.self) == UInt64(weight["bytes"] as? Int ?? -1))
            #expect(integer(weights, offset + 16, UInt64.self) == UInt64(offset + 64))
            #expect(weight["dataOffset"] as? Int == offset + 64)
            #expect(weights[(offset + 32)..<(offset + 64)].allSatisfy { $0 == 0 })
            if let shape = weight["shape"] as? [Int] {
                #expect(shape.reduce(1, *) == weight["count"] as? Int, "shape of \(weight["path"] ?? "")")
            }
            if !recordOffsets.contains(offset) { recordOffsets.append(offset) }
        }
        #expect(integer(weights, 0, UInt32.self) == UInt32(recordOffsets.count))
        #expect(recordOffsets == recordOffsets.sorted(), "blobs in order of first use")
        if let last = recordOffsets.last {
            #expect(weights.count == last + 64 + Int(integer(weights, last + 8, UInt64.self)))
        } else {
            #expect(weights.count == 64)
        }

        // Each path names, in the source, the weight whose values the blob holds.
        let model = try ModelFile.open(Fixtures.path(entry.file))
        for weight in index {
            let path = try #require(weight["path"] as? String)
            let target = try #require(resolve(path, in: MessageView(model.specification.root)), "\(path) not found")
            let offset = try #require(weight["dataOffset"] as? Int)
            let stored = weights[offset..<(offset + (weight["bytes"] as? Int ?? 0))]
            #expect(try sourceValues(of: target, model: model) == Data(stored), "\(path)")
        }
    }

    /// Follows a documented weight path (`a.b[2].c[key]`) from the root.
    func resolve(_ path: String, in root: MessageView) -> MessageView? {
        var current = root
        for component in path.split(separator: ".") {
            let name = component.prefix { $0 != "[" }
            let selector = component.contains("[") ? String(component.drop { $0 != "[" }.dropFirst().dropLast()) : nil
            guard let field = current.field(named: String(name)) else { return nil }
            let children = current.messages(in: field.pointee)
            if let selector {
                if let position = Int(selector), field.pointee.label == PROTOBUF_C_LABEL_REPEATED, children.indices.contains(position),
                   children[position].field(named: "key") == nil {
                    current = children[position]
                } else if let match = children.first(where: { mapKey($0) == selector }) {
                    current = match
                } else {
                    return nil
                }
            } else {
                guard let only = children.first else { return nil }
                current = only
            }
        }
        return current
    }

    func mapKey(_ entry: MessageView) -> String? {
        guard let field = entry.field(named: "key") else { return nil }
        return text((entry.pointer + Int(field.pointee.offset)).load(as: UnsafePointer<CChar>?.self))
    }

    /// The little-endian bytes of the values a source message holds.
    func sourceValues(of message: MessageView, model: ModelFile) throws -> Data {
        if message.typeName == "CoreML.Specification.WeightParams" {
            let params = message.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self).pointee
            if params.n_floatvalue > 0 { return Data(buffer: UnsafeBufferPointer(start: params.floatvalue, count: params.n_floatvalue)) }
            for binary in [params.float16value, params.rawvalue, params.int8rawvalue] where binary.len > 0 {
                return Data(bytes: binary.data, count: binary.len)
            }
            return Data()
        }
        let value = message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Value.self).pointee
        if let blob = value.blobfilevalue?.pointee, value.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE {
            let file = try MILBlobFile(path: try #require(model.resolveProgramFile(text(blob.filename))))
            return try withExtendedLifetime(file) { Data(try file.data(at: blob.offset)) }
        }
        let tensor = try #require(value.immediatevalue?.pointee.tensor?.pointee)
        if let floats = tensor.floats?.pointee { return Data(buffer: UnsafeBufferPointer(start: floats.values, count: floats.n_values)) }
        if let ints = tensor.ints?.pointee { return Data(buffer: UnsafeBufferPointer(start: ints.values, count: ints.n_values)) }
        let bytes = try #require(tensor.bytes?.pointee.values)
        return Data(bytes: bytes.data, count: bytes.len)
    }

    /// `source.sha256` as the document defines it.
    func documentedSourceDigest(_ path: String) throws -> String {
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        guard isDirectory.boolValue else { return SHA256Digest.of(try Data(contentsOf: URL(fileURLWithPath: path))).description }
        var listing = Data()
        for (relative, bytes) in try tree(path).sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
            listing += Data(relative.utf8) + [0] + Data(String(bytes.count).utf8) + [0]
                + Data(SHA256Digest.of(bytes).description.utf8) + [0x0A]
        }
        return SHA256Digest.of(listing).description
    }
}
