import FixtureSupport
import Foundation
import SystemIO
import Testing
@testable import ModelSpec

extension Fixtures.Entry: CustomTestStringConvertible {}

/// Every fixture read through the library agrees with what coremltools
/// recorded about it in Fixtures/index.json.
@Suite struct FixtureReadingTests {
    @Test func indexListsTheModelsTheIssueNames() {
        let models = Fixtures.models.map(\.facts)
        let types = Set(models.compactMap { $0["modelType"] as? String } + models.flatMap { $0["pipeline"] as? [String] ?? [] })
        let required: Set = ["neuralNetworkClassifier", "neuralNetworkRegressor", "pipelineClassifier", "dictVectorizer", "glmClassifier", "glmRegressor",
                             "treeEnsembleRegressor", "treeEnsembleClassifier", "supportVectorClassifier",
                             "kNearestNeighborsClassifier", "normalizer", "scaler", "oneHotEncoder", "arrayFeatureExtractor",
                             "pipeline", "mlProgram"]
        #expect(required.isSubset(of: types), "missing: \(required.subtracting(types))")
        #expect(Fixtures.models.count >= 20)
    }

    @Test(arguments: Fixtures.models + Fixtures.broken.filter { $0.facts["readable"] as? Bool == true })
    func summaryMatchesIndex(entry: Fixtures.Entry) throws {
        let model = try ModelFile.open(Fixtures.path(entry.file))
        let summary = ModelSummary(model)
        let json = try #require(Fixtures.parseJSON(summary.jsonText()))
        let differences = Fixtures.differences(expected: entry.facts, actual: json)
        #expect(differences.isEmpty, "\(entry.file):\n\(differences.joined(separator: "\n"))")
    }

    @Test func imageClassifierInDetail() throws {
        let summary = ModelSummary(try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel")))
        #expect(summary.modelType == "neuralNetworkClassifier")
        #expect(summary.classLabels == .strings(["cat", "dog", "bird"]))
        guard case .image(let image) = summary.inputs.first?.type else {
            Issue.record("input is not an image")
            return
        }
        #expect(image == ImageType(width: 16, height: 16, colorSpace: "RGB", sizeFlexibility: nil))
        let convolution = try #require(summary.weights?.first)
        #expect(convolution.layer == "conv1" && convolution.role == "weights" && convolution.storage == .float32)
        #expect(convolution.bytes == convolution.count * 4)
    }

    @Test func quantizedWeightsReportBits() throws {
        let summary = ModelSummary(try ModelFile.open(Fixtures.path("Models/ImageClassifierInt8.mlmodel")))
        let quantized = (summary.weights ?? []).filter { $0.storage == .quantized }
        #expect(!quantized.isEmpty)
        #expect(quantized.allSatisfy { $0.quantizationBits == 8 && $0.count == $0.bytes })
    }

    @Test func programBlobsReadTheirRecords() throws {
        let summary = ModelSummary(try ModelFile.open(Fixtures.path("Models/MLProgram.mlpackage")))
        let blobs = try #require(summary.blobWeights)
        #expect(!blobs.isEmpty)
        for blob in blobs {
            #expect(blob.problem == nil)
            #expect(blob.dataType == "FLOAT32")
            #expect(blob.bytes == UInt64(blob.count * 4))
        }
    }

    /// Unreadable inputs fail with the error kind their problem calls for.
    @Test(arguments: [
        ("Broken/truncated.mlmodel", "truncated"),
        ("Broken/not-protobuf.mlmodel", "notCoreML"),
        ("Broken/empty.mlmodel", "emptyFile"),
        ("Broken/unknown-model-type.mlmodel", "unknownModelType"),
        ("Broken/deep-nesting.mlmodel", "malformed"),
        ("Broken/bad-utf8.mlmodel", "malformed"),
        ("Broken/not-a-package.mlpackage", "notAPackage"),
        ("Broken/escaping-path.mlpackage", "unsafePackagePath"),
    ])
    func brokenInputFails(file: String, kind: String) {
        let path = Fixtures.path(file)
        do {
            _ = try ModelFile.open(path)
            Issue.record("\(file) was read")
        } catch {
            #expect(String(describing: error).hasPrefix(path + ": "))
            #expect("\(Mirror(reflecting: error).children.first?.label ?? "")" == kind, "\(error)")
            #expect(error.path == path)
        }
    }

    @Test func everyUnreadableBrokenFixtureIsCovered() {
        let unreadable = Set(Fixtures.broken.filter { $0.facts["readable"] as? Bool == false }.map(\.file))
        #expect(unreadable == ["Broken/truncated.mlmodel", "Broken/not-protobuf.mlmodel", "Broken/empty.mlmodel",
                               "Broken/unknown-model-type.mlmodel", "Broken/deep-nesting.mlmodel", "Broken/bad-utf8.mlmodel",
                               "Broken/not-a-package.mlpackage", "Broken/escaping-path.mlpackage"])
    }

    /// A copy of MLProgram.mlpackage whose root model item path is `entry`,
    /// and an outside file a symlink can point at.
    func package(rootPath entry: String, link: (name: String, target: String)? = nil) throws -> String {
        let directory = try Fixtures.temporaryDirectory("package")
        let package = directory.appendingPathComponent("p.mlpackage").path
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/MLProgram.mlpackage"), toPath: package)
        let manifestPath = package + "/Manifest.json"
        let manifest = try String(contentsOfFile: manifestPath, encoding: .utf8)
        try manifest.replacingOccurrences(of: "\"com.apple.CoreML/model.mlmodel\"", with: "\"\(entry)\"")
            .write(toFile: manifestPath, atomically: true, encoding: .utf8)
        if let link {
            try FileManager.default.createSymbolicLink(atPath: package + "/Data/" + link.name, withDestinationPath: link.target)
        }
        return package
    }

    @Test func symlinkOutOfThePackageIsRefused() throws {
        let outside = Fixtures.path("Models/GLMRegressor.mlmodel")
        let path = try package(rootPath: "escape.mlmodel", link: ("escape.mlmodel", outside))
        #expect(throws: ModelSpecError.unsafePackagePath(path: path, entry: "escape.mlmodel")) { try ModelFile.open(path) }
    }

    @Test func symlinkInsideThePackageIsFollowed() throws {
        let path = try package(rootPath: "alias.mlmodel", link: ("alias.mlmodel", "com.apple.CoreML/model.mlmodel"))
        #expect(ModelSummary(try ModelFile.open(path)).modelType == "mlProgram")
    }

    @Test(arguments: ["/etc/passwd", "com.apple.CoreML/../../../x.mlmodel", ""])
    func absoluteOrClimbingPathsAreRefused(entry: String) throws {
        let path = try package(rootPath: entry)
        #expect(throws: ModelSpecError.unsafePackagePath(path: path, entry: entry)) { try ModelFile.open(path) }
    }

    @Test func missingPathCannotBeRead() {
        #expect(throws: ModelSpecError.cannotRead(path: "/nonexistent/model.mlmodel", reason: "No such file or directory")) {
            try ModelFile.open("/nonexistent/model.mlmodel")
        }
    }

    @Test func unreadableFileNamesTheReason() throws {
        // Root reads any file, so the permission failure is injected.
        let path = Fixtures.path("Models/GLMRegressor.mlmodel")
        var denying = Syscalls.system
        denying.open = { file, flags, mode in
            guard file == path else { return Syscalls.system.open(file, flags, mode) }
            errno = EACCES
            return -1
        }
        Syscalls.withOverride(denying) {
            #expect(throws: ModelSpecError.cannotRead(path: path, reason: "Permission denied")) { try ModelFile.open(path) }
        }
        // The override ended with the call.
        #expect((try? ModelFile.open(path)) != nil)
    }
}

@Suite struct BlobDataTypeTests {
    /// The names are part of the bundle format; they must match its table.
    @Test func namesAndCodesMatchTheDocument() throws {
        let document = try String(contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/bundle-format.md"), encoding: .utf8)
        for type in MILBlobFile.DataType.allCases {
            #expect(document.contains("| \(type.rawValue) | \(type.name) |"), "\(type.rawValue) \(type.name)")
        }
        #expect(Set(MILBlobFile.DataType.allCases.map(\.name)).count == MILBlobFile.DataType.allCases.count)
    }
}
