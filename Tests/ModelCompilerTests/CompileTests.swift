import BundleFormat
import FixtureSupport
import Foundation
import Testing
@testable import ModelCompiler
@testable import ModelSpec

extension Fixtures.Entry: CustomTestStringConvertible {}

/// Files of a directory tree: relative path → bytes.
func tree(_ directory: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    let enumerator = FileManager.default.enumerator(atPath: directory)
    while let relative = enumerator?.nextObject() as? String {
        var isDirectory: ObjCBool = false
        let full = directory + "/" + relative
        if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
            files[relative] = try Data(contentsOf: URL(fileURLWithPath: full))
        }
    }
    return files
}

func bundleName(_ entry: Fixtures.Entry) -> String {
    URL(fileURLWithPath: entry.file).deletingPathExtension().lastPathComponent + ".mlmodelc"
}

@Suite struct CompileTests {
    @Test(arguments: Fixtures.models)
    func everyFixtureCompilesToAConsistentBundle(entry: Fixtures.Entry) throws {
        let directory = try Fixtures.temporaryDirectory("compile")
        let output = directory.appendingPathComponent(bundleName(entry)).path
        let report = try BundleCompiler().compile(Fixtures.path(entry.file), to: output)
        #expect(report.outcome == .compiled)
        let contents = try BundleContents.open(output, verifyDigests: true)
        #expect(contents.manifest.formatVersion == BundleLayout.formatVersion)
        #expect(contents.manifest.source.name == URL(fileURLWithPath: entry.file).lastPathComponent)

        // Every weight the source holds is indexed: neural-network tensors and
        // weight-file constants of ML programs.
        let summary = ModelSummary(try ModelFile.open(Fixtures.path(entry.file)))
        let tensors = (summary.weights?.count ?? 0) + (summary.pipeline ?? []).reduce(0) { $0 + ($1.weights?.count ?? 0) }
        let blobs = summary.blobWeights?.count ?? 0
        let indexed = contents.index.weights
        #expect(indexed.filter { $0.source != "immediateValue" }.count == tensors + blobs)
        #expect(report.weightCount == indexed.count)
        for weight in indexed {
            #expect(weight.blobOffset % 64 == 0 && weight.dataOffset % 64 == 0, "\(weight.path) not aligned")
            #expect(try contents.data(for: weight).count == Int(weight.bytes))
        }
        // The stripped specification keeps everything but the weight values.
        let stripped = ModelSummary(contents.specification, blobs: nil)
        #expect(stripped.modelType == summary.modelType)
        #expect(stripped.inputs == summary.inputs && stripped.outputs == summary.outputs)
        #expect(stripped.layers == summary.layers)
        #expect(FileManager.default.fileExists(atPath: output + "/" + BundleLayout.programText) == (summary.modelType == "mlProgram"))
    }

    @Test(arguments: Fixtures.models)
    func compilingTwiceGivesIdenticalBytes(entry: Fixtures.Entry) throws {
        let directory = try Fixtures.temporaryDirectory("reproducible")
        let first = directory.appendingPathComponent("a/" + bundleName(entry)).path
        let second = directory.appendingPathComponent("b/" + bundleName(entry)).path
        for output in [first, second] {
            try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: output).deletingLastPathComponent().path,
                                                    withIntermediateDirectories: true)
            _ = try BundleCompiler().compile(Fixtures.path(entry.file), to: output)
        }
        let a = try tree(first)
        let b = try tree(second)
        #expect(a.keys.sorted() == b.keys.sorted())
        #expect(a.keys.count >= 5)
        for (path, bytes) in a {
            #expect(b[path] == bytes, "\(path) differs")
        }
    }

    @Test func indexRecordsDeclaredShapes() throws {
        let directory = try Fixtures.temporaryDirectory("shapes")
        let image = directory.appendingPathComponent("i.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: image)
        let shapes = try BundleContents.open(image).index.weights.map { "\($0.owner).\($0.role) \($0.shape ?? [])" }
        #expect(shapes == ["conv1.weights [8, 3, 3, 3]", "conv1.bias [8]", "bn1.gamma [8]", "bn1.beta [8]", "bn1.mean [8]",
                           "bn1.variance [8]", "conv2.weights [16, 8, 3, 3]", "fc.weights [3, 16]", "fc.bias [3]"])
        let program = directory.appendingPathComponent("p.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/MLProgram.mlpackage"), to: program)
        #expect(try BundleContents.open(program).index.weights.map { $0.shape ?? [] } == [[32, 16], [32], [8, 4, 3], [4, 64]])
    }

    @Test func secondCompileIsUpToDateAndForceOrNewOptionsRebuild() throws {
        let directory = try Fixtures.temporaryDirectory("incremental")
        let output = directory.appendingPathComponent("m.mlmodelc").path
        let source = Fixtures.path("Models/ImageClassifier.mlmodel")
        #expect(try BundleCompiler().compile(source, to: output).outcome == .compiled)
        let manifestPath = output + "/" + BundleLayout.manifest
        let stamp = try FileManager.default.attributesOfItem(atPath: manifestPath)[.modificationDate] as? Date
        #expect(try BundleCompiler().compile(source, to: output).outcome == .upToDate)
        #expect(try FileManager.default.attributesOfItem(atPath: manifestPath)[.modificationDate] as? Date == stamp)
        #expect(try BundleCompiler(options: .init(force: true)).compile(source, to: output).outcome == .compiled)
        #expect(try BundleCompiler(options: .init(fp16: true)).compile(source, to: output).outcome == .compiled)
        #expect(try BundleCompiler(options: .init(fp16: true)).compile(source, to: output).outcome == .upToDate)
        // A damaged bundle (a file of the wrong size) is rebuilt, not trusted.
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: output + "/" + BundleLayout.metadata))
        #expect(try BundleCompiler(options: .init(fp16: true)).compile(source, to: output).outcome == .compiled)
        _ = try BundleContents.open(output, verifyDigests: true)
    }

    @Test func sourceChangeIsNotUpToDate() throws {
        let directory = try Fixtures.temporaryDirectory("changed")
        let source = directory.appendingPathComponent("model.mlmodel").path
        let output = directory.appendingPathComponent("model.mlmodelc").path
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/GLMRegressor.mlmodel"), toPath: source)
        _ = try BundleCompiler().compile(source, to: output)
        try FileManager.default.removeItem(atPath: source)
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/Scaler.mlmodel"), toPath: source)
        #expect(try BundleCompiler().compile(source, to: output).outcome == .compiled)
        let contents = try BundleContents.open(output)
        #expect(ModelSummary(contents.specification, blobs: nil).modelType == "scaler")
    }
}
