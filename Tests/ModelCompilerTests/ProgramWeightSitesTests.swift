import BundleFormat
import CoreMLSchema
import FixtureSupport
import Foundation
import Testing
@testable import ModelCompiler
@testable import ModelSpec
import ModelValidation

/// Weight file references wherever a program holds them: operation inputs
/// (single and tuple bindings), const attributes, nested blocks, a second
/// block specialization, a second function; every sub-byte data type with
/// padding bits. The bug of issue 10: inputs were skipped, their blobs lost.
@Suite struct ProgramWeightSitesTests {
    typealias T = MILWire.DataType
    typealias S = MILWire.SubByte

    /// One blob of the synthetic program: where it is used, its types and bytes.
    struct Planted {
        var owner: String
        var role: String
        var milType: UInt64
        var shape: [UInt64]
        var blobType: UInt32
        var data: [UInt8]
        var paddingBits: UInt64
    }

    static let planted: [Planted] = [
        // 15 int4 values: 60 bits in 8 bytes, 4 padding bits.
        Planted(owner: "q", role: "data", milType: S.int4, shape: [5, 3], blobType: 8, data: (0..<8).map { UInt8($0 * 17) }, paddingBits: 4),
        Planted(owner: "q", role: "scale", milType: T.float32, shape: [5, 1], blobType: 2, data: (0..<20).map { UInt8($0) }, paddingBits: 0),
        // 7 uint3 values: 21 bits in 3 bytes, 3 padding bits.
        Planted(owner: "l", role: "indices", milType: S.uint3, shape: [7], blobType: 12, data: [0x12, 0x34, 0x05], paddingBits: 3),
        // A tuple input: two bindings, uint6 (18 bits in 3 bytes) and uint1 (9 bits in 2 bytes).
        Planted(owner: "t", role: "values[0]", milType: S.uint6, shape: [3], blobType: 13, data: [0xAB, 0xCD, 0x03], paddingBits: 6),
        Planted(owner: "t", role: "values[1]", milType: S.uint1, shape: [9], blobType: 9, data: [0xFF, 0x01], paddingBits: 7),
        // Inside the block of a cond operation.
        Planted(owner: "inner", role: "val", milType: S.uint2, shape: [6], blobType: 10, data: [0x1B, 0x02], paddingBits: 4),
        // The function's second block specialization.
        Planted(owner: "y", role: "val", milType: S.uint4, shape: [5], blobType: 11, data: [0x21, 0x43, 0x05], paddingBits: 4),
        // A second function.
        Planted(owner: "z", role: "val", milType: MILWire.int8, shape: [4], blobType: 4, data: [1, 0xFE, 3, 0x80], paddingBits: 0),
    ]

    /// Writes `program.mlmodel` and `weights/weight.bin` into a new directory.
    static func writeProgram(_ label: String) throws -> (directory: URL, source: String) {
        let (weightFile, offsets) = MILBlobFileBuilder.make(planted.map {
            MILBlobFileBuilder.Blob(dataType: $0.blobType, data: $0.data, paddingBits: $0.paddingBits)
        })
        func blob(_ index: Int) -> [UInt8] {
            MILWire.blobValue(MILWire.tensorType(planted[index].milType, planted[index].shape.map { Optional($0) }), offset: offsets[index])
        }
        func constant(_ name: String, _ index: Int) -> [UInt8] {
            MILWire.operation("const", outputs: [MILWire.named(name, MILWire.tensorType(planted[index].milType, planted[index].shape.map { Optional($0) }))],
                              attributes: [("name", MILWire.stringValue(name)), ("val", blob(index))])
        }
        let fp32 = { (shape: [UInt64]) in MILWire.tensorType(T.float32, shape.map { Optional($0) }) }
        let quantized = MILWire.operation("constexpr_blockwise_shift_scale", inputs: [("data", [.value(blob(0))]), ("scale", [.value(blob(1))])],
                                          outputs: [MILWire.named("q", fp32([5, 3]))], attributes: [("name", MILWire.stringValue("q"))])
        let lookup = MILWire.operation("constexpr_lut_to_dense", inputs: [("indices", [.value(blob(2))])],
                                       outputs: [MILWire.named("l", fp32([7]))], attributes: [("name", MILWire.stringValue("l"))])
        let tuple = MILWire.operation("concat", inputs: [("values", [.value(blob(3)), .value(blob(4))])],
                                      outputs: [MILWire.named("t", fp32([12]))], attributes: [("name", MILWire.stringValue("t"))])
        let cond = MILWire.operation("cond", inputs: [("pred", [.name("x")])], outputs: [MILWire.named("c", fp32([6]))],
                                     blocks: [MILWire.block(outputs: ["inner"], operations: [constant("inner", 5)])],
                                     attributes: [("name", MILWire.stringValue("c"))])
        let identity = MILWire.operation("identity", inputs: [("x", [.name("q")])], outputs: [MILWire.named("y", fp32([5, 3]))],
                                         attributes: [("name", MILWire.stringValue("y"))])
        let main = MILWire.block(outputs: ["y"], operations: [quantized, lookup, tuple, cond, identity])
        let older = MILWire.block(outputs: ["y"], operations: [constant("y", 6)])
        let second = MILWire.block(outputs: ["z"], operations: [constant("z", 7)])

        let input = MILWire.named("x", fp32([1]))
        let mainFunction = Wire.field(1, bytes: input) + MILWire.string(2, "CoreML8")
            + MILWire.entry(3, key: "CoreML8", value: main) + MILWire.entry(3, key: "CoreML7", value: older)
        let secondFunction = Wire.field(1, bytes: input) + MILWire.string(2, "CoreML8") + MILWire.entry(3, key: "CoreML8", value: second)
        let program = Wire.field(1, varint: 1) + MILWire.entry(2, key: "main", value: mainFunction)
            + MILWire.entry(2, key: "second", value: secondFunction)
        let description = Wire.field(1, bytes: MILWire.arrayFeature("x", shape: [1])) + Wire.field(10, bytes: MILWire.arrayFeature("y", shape: [5, 3]))
        let model = Wire.field(1, varint: 9) + Wire.field(2, bytes: description) + Wire.field(502, bytes: program)

        let directory = try Fixtures.temporaryDirectory(label)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("weights"), withIntermediateDirectories: true)
        try Data(weightFile).write(to: directory.appendingPathComponent("weights/weight.bin"))
        let source = directory.appendingPathComponent("program.mlmodel").path
        try Data(model).write(to: URL(fileURLWithPath: source))
        return (directory, source)
    }

    @Test func everyReferenceIsFoundWithItsOwnerAndRole() throws {
        let (_, source) = try Self.writeProgram("sites")
        let model = try ModelFile.open(source)
        let found = WeightLocator(root: model.specification.root).locations.filter { $0.blobReference != nil }
        #expect(Set(found.map { "\($0.owner) \($0.role)" }) == Set(Self.planted.map { "\($0.owner) \($0.role)" }))
        #expect(found.count == Self.planted.count)
        #expect(ModelValidator.validate(model).map(\.description) == [])
    }

    @Test func everyReferenceIsCompiledVerifiedAndRestored() throws {
        let (directory, source) = try Self.writeProgram("all-sites")
        let bundle = directory.appendingPathComponent("program.mlmodelc").path
        let report = try BundleCompiler().compile(source, to: bundle)
        #expect(report.weightCount == Self.planted.count)
        let contents = try BundleContents.open(bundle, verifyDigests: true)
        let index = contents.index.weights
        for planted in Self.planted {
            let entry = try #require(index.first { $0.owner == planted.owner && $0.role == planted.role }, "\(planted.owner) \(planted.role)")
            let type = try #require(MILBlobFile.DataType(rawValue: planted.blobType))
            #expect(entry.dataType == type.name)
            #expect(entry.count == Int(planted.shape.reduce(1, *)))
            #expect(entry.bytes == type.packedSize(count: entry.count)?.bytes)
            #expect(Array(try contents.data(for: entry)) == planted.data)
            #expect(try contents.weights.metadata(at: entry.blobOffset).paddingBits == planted.paddingBits)
        }
        let text = try String(contentsOfFile: bundle + "/" + BundleLayout.programText, encoding: .utf8)
        #expect(text.components(separatedBy: "BLOBFILE(").count - 1 == Self.planted.count)

        let output = directory.appendingPathComponent("rebuilt.mlpackage").path
        let restored = try BundleDecompiler.decompile(bundle, to: output)
        #expect(restored.weightCount == Self.planted.count)
        #expect(try CanonicalModel(ModelFile.open(output)) == CanonicalModel(ModelFile.open(source)))
    }

    /// `ceil(count × bits / 8)` bytes, and the unused bits, for every type and a sweep of counts.
    @Test(arguments: MILBlobFile.DataType.allCases)
    func packedSizes(type: MILBlobFile.DataType) throws {
        for count in [0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 1000, 1001] {
            let bits = count * type.bitWidth
            let size = try #require(type.packedSize(count: count))
            #expect(size.bytes == UInt64((bits + 7) / 8))
            #expect(size.paddingBits == size.bytes * 8 - UInt64(bits))
        }
        #expect(type.packedSize(count: -1) == nil)
        #expect((type.packedSize(count: Int.max) == nil) == (type.bitWidth > 2), "Int.max × bits overflows 64 bits from 3 bits on")
    }
}
