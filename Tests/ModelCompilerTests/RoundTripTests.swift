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

    init(_ model: ModelFile) throws {
        let root = UnsafeMutablePointer(mutating: model.specification.root)
        var data: [Data] = []
        var saved: [(UnsafeMutablePointer<CoreML__Specification__MILSpec__Value__BlobFileValue>, CoreML__Specification__MILSpec__Value__BlobFileValue)] = []
        for site in WeightSiteFinder(root: root).sites {
            guard case .programValue(let value) = site.holder,
                  value.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
                  let blob = value.pointee.blobfilevalue
            else { continue }
            let path = try #require(model.resolveProgramFile(text(blob.pointee.filename)))
            let file = try MILBlobFile(path: path)
            try withExtendedLifetime(file) { data.append(Data(try file.data(at: blob.pointee.offset))) }
            saved.append((blob, blob.pointee))
            blob.pointee.offset = 0
        }
        specification = SpecificationPacker.pack(root)
        for (blob, original) in saved { blob.pointee = original }
        blobData = data
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
