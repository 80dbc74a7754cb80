import BundleFormat
import CoreMLSchema
import FixtureSupport
import Foundation
import Testing
@testable import ModelCompiler
@testable import ModelSpec

/// A specification in a form where blob references are replaced by the bytes
/// they point at, so two models that store the same program constants in
/// different weight-file layouts compare equal.
struct CanonicalModel: Equatable {
    let specification: [UInt8]
    let blobData: [Data]
    /// Each blob's data type code and padding bits.
    let blobRecords: [[UInt64]]

    init(_ model: ModelFile) throws {
        let root = UnsafeMutablePointer(mutating: model.specification.root)
        var data: [Data] = []
        var records: [[UInt64]] = []
        var saved: [(UnsafeMutablePointer<CoreML__Specification__MILSpec__Value__BlobFileValue>, CoreML__Specification__MILSpec__Value__BlobFileValue)] = []
        for site in WeightLocator(root: root).locations {
            guard case .programValue(let value) = site.holder,
                  value.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
                  let blob = value.pointee.blobfilevalue
            else { continue }
            let path = try #require(model.resolveProgramFile(text(blob.pointee.filename)))
            let file = try MILBlobFile(path: path)
            try withExtendedLifetime(file) {
                data.append(Data(try file.data(at: blob.pointee.offset)))
                let record = try file.metadata(at: blob.pointee.offset)
                records.append([UInt64(record.dataTypeCode), record.paddingBits])
            }
            saved.append((blob, blob.pointee))
            blob.pointee.offset = 0
        }
        specification = SpecificationPacker.pack(root)
        for (blob, original) in saved { blob.pointee = original }
        blobData = data
        blobRecords = records
    }
}

@Suite struct RoundTripTests {
    @Test(arguments: Fixtures.models)
    func decompiledModelEqualsSource(entry: Fixtures.Entry) throws {
        let directory = try Fixtures.temporaryDirectory("roundtrip")
        let bundle = directory.appendingPathComponent(bundleName(entry)).path
        _ = try BundleCompiler().compile(Fixtures.path(entry.file), to: bundle)
        let output = directory.appendingPathComponent("rebuilt." + URL(fileURLWithPath: entry.file).pathExtension).path
        let report = try BundleDecompiler.decompile(bundle, to: output)
        let source = try ModelFile.open(Fixtures.path(entry.file))
        let rebuilt = try ModelFile.open(output)
        #expect(report.format == source.format)
        #expect(try CanonicalModel(rebuilt) == CanonicalModel(source))
        #expect(ModelSummary(rebuilt).jsonText().replacingOccurrences(of: "\"bytes\"", with: "")
            == ModelSummary(source).jsonText().replacingOccurrences(of: "\"bytes\"", with: ""))
        if source.format == .mlmodel {
            // protobuf-c and coremltools serialize the same way: the very bytes come back.
            #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(contentsOf: URL(fileURLWithPath: Fixtures.path(entry.file))))
        }
    }

    /// Program constants held inline: those a blob can store and that have at
    /// least 10 elements move to the weight file and come back inline; the
    /// rest stay where they are.
    @Test func inlineProgramConstantsRoundTrip() throws {
        typealias T = MILWire.DataType
        func constant(_ name: String, _ type: [UInt8], tensor: [UInt8]) -> [UInt8] {
            MILWire.operation("const", outputs: [MILWire.named(name, type)],
                              attributes: [("name", MILWire.stringValue(name)), ("val", MILWire.immediate(type, tensor: tensor))])
        }
        let floats = (0..<12).map { Float($0) / 3 }
        let weights = constant("w", MILWire.tensorType(T.float32, [1, 12]), tensor: Wire.field(1, bytes: Wire.field(1, floats: floats)))
        let indices = constant("i", MILWire.tensorType(T.int32, [16]),
                               tensor: Wire.field(2, bytes: Wire.field(1, varints: (0..<16).map { UInt64($0 * 7) })))
        let halves = constant("h", MILWire.tensorType(T.float16, [10]),
                              tensor: Wire.field(7, bytes: Wire.field(1, bytes: (0..<20).map { UInt8($0) })))
        let small = constant("s", MILWire.tensorType(T.float32, [5]), tensor: Wire.field(1, bytes: Wire.field(1, floats: [1, 2, 3, 4, 5])))
        let flags = constant("b", MILWire.tensorType(T.bool, [12]), tensor: Wire.field(3, bytes: Wire.field(1, bytes: Array(repeating: 1, count: 12))))
        let add = MILWire.operation("add", inputs: [("x", [.name("x")]), ("y", [.name("w")])],
                                    outputs: [MILWire.named("y", MILWire.tensorType(T.float32, [1, 12]))],
                                    attributes: [("name", MILWire.stringValue("y"))])
        let bytes = MILWire.describedModel(inputs: [("x", [1, 12])], outputs: [("y", [1, 12])], opset: "CoreML7",
                                           block: MILWire.block(outputs: ["y"], operations: [weights, indices, halves, small, flags, add]))
        let directory = try Fixtures.temporaryDirectory("inline")
        let source = directory.appendingPathComponent("program.mlmodel").path
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let bundle = directory.appendingPathComponent("program.mlmodelc").path
        _ = try BundleCompiler().compile(source, to: bundle)
        let index = try BundleContents.open(bundle).index.weights
        #expect(index.map(\.owner) == ["w", "i", "h"])
        #expect(index.map(\.dataType) == ["float32", "int32", "float16"])
        #expect(index.allSatisfy { $0.source == "immediateValue" && $0.role == "val" })
        let output = directory.appendingPathComponent("rebuilt.mlmodel").path
        let report = try BundleDecompiler.decompile(bundle, to: output)
        #expect(report.format == .mlmodel)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(bytes))
    }

    @Test func float16BundleDecompilesToFloat16Weights() throws {
        let directory = try Fixtures.temporaryDirectory("fp16")
        let bundle = directory.appendingPathComponent("m.mlmodelc").path
        let report = try BundleCompiler(options: .init(fp16: true)).compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: bundle)
        let error = try #require(report.float16MaxRelativeError)
        #expect(error > 0 && error < 1.0 / 1024, "float16 keeps 11 significant bits")
        let contents = try BundleContents.open(bundle)
        #expect(contents.index.weights.allSatisfy { $0.dataType == "float16" && $0.source == "floatValue" })
        let output = directory.appendingPathComponent("m.mlmodel").path
        _ = try BundleDecompiler.decompile(bundle, to: output)
        let weights = try #require(ModelSummary(try ModelFile.open(output)).weights)
        let original = try #require(ModelSummary(try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel"))).weights)
        #expect(weights.map(\.storage) == Array(repeating: .float16, count: original.count))
        #expect(weights.map(\.count) == original.map(\.count))
    }

    @Test func decompileRefusesExistingOutputAndPlainFileForPrograms() throws {
        let directory = try Fixtures.temporaryDirectory("decompile-errors")
        let bundle = directory.appendingPathComponent("p.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/MLProgram.mlpackage"), to: bundle)
        let file = directory.appendingPathComponent("p.mlmodel").path
        #expect(throws: DecompileError.needsPackage(path: file)) { try BundleDecompiler.decompile(bundle, to: file) }
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(throws: DecompileError.outputExists(path: bundle)) { try BundleDecompiler.decompile(bundle, to: bundle) }
    }

    @Test func decompileChecksDigests() throws {
        let directory = try Fixtures.temporaryDirectory("decompile-digest")
        let bundle = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: bundle)
        // Flip one byte of the weight data, keeping the size.
        let weightPath = bundle + "/" + BundleLayout.weightFile
        var bytes = try Data(contentsOf: URL(fileURLWithPath: weightPath))
        bytes[200] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: weightPath))
        let output = directory.appendingPathComponent("m.mlmodel").path
        do throws(DecompileError) {
            _ = try BundleDecompiler.decompile(bundle, to: output)
            Issue.record("a corrupt bundle was decompiled")
        } catch {
            guard case .bundle(.digestMismatch(let path, _, _)) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(path == weightPath)
        }
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
