import BundleFormat
import FixtureSupport
import Foundation
import ModelCompiler
import ModelSpec
import Testing
@testable import ModelLoader

extension Fixtures.Entry: CustomTestStringConvertible {}

@Suite struct ModelBundleTests {
    @Test(arguments: Fixtures.models)
    func everyWeightIsViewableInPlace(entry: Fixtures.Entry) throws {
        let directory = try Fixtures.temporaryDirectory("bundle")
        let path = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path(entry.file), to: path)
        let bundle = try ModelBundle.open(path)
        #expect(bundle.modelType == (entry.facts["modelType"] as? String))
        let weights = try Data(contentsOf: URL(fileURLWithPath: path + "/weights/weight.bin"))
        for index in bundle.weights {
            let view = try #require(bundle.weight(owner: index.owner, role: index.role))
            #expect(view.count == index.count && view.byteCount == Int(index.bytes))
            #expect(view.shape.reduce(1, *) == index.count)
            #expect(Int(bitPattern: view.base) % 64 == 0, "data of \(index.path) is 64-byte aligned in memory")
            let offset = Int(index.dataOffset)
            #expect(Data(view.bytes) == weights[offset..<(offset + Int(index.bytes))])
        }
        #expect(bundle.weight(owner: "no such layer", role: "weights") == nil)
    }

    @Test func viewsAreTypedAndShaped() throws {
        let directory = try Fixtures.temporaryDirectory("bundle-typed")
        let path = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: path)
        let bundle = try ModelBundle.open(path)
        let conv = try #require(bundle.weight(owner: "conv1", role: "weights"))
        #expect(conv.dataType == .float32 && conv.shape == [8, 3, 3, 3])
        let values = try #require(conv.float32Values)
        // The same values the source model holds.
        let source = try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel"))
        let rebuilt = directory.appendingPathComponent("r.mlmodel").path
        _ = try BundleDecompiler.decompile(path, to: rebuilt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: rebuilt)) == Data(contentsOf: URL(fileURLWithPath: source.path)))
        #expect(values.count == 216 && values.allSatisfy(\.isFinite))
    }

    /// Opening reads the small files and the weight records only: with the
    /// weight file out of the page cache, no data page is read by opening,
    /// and reading a view brings them in (so the measurement is real).
    @Test func openingDoesNotReadTheWeights() throws {
        let path = try TestBundles.make([1 << 20], label: "bundle-lazy")[0]
        let weightFile = path + "/weights/weight.bin"
        let fd = open(weightFile, O_RDONLY)
        #expect(fd >= 0)
        #expect(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        close(fd)

        let bundle = try ModelBundle.open(path)
        let view = try #require(bundle.weights.first.flatMap(bundle.view(of:)))
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        // The first page holds the header and the record, which opening reads.
        let start = (Int(bitPattern: view.base) / page + 1) * page
        let pages = (Int(bitPattern: view.base) + view.byteCount - start) / page
        func residentPages() -> Int {
            var residency = [UInt8](repeating: 0, count: pages)
            guard mincore(UnsafeMutableRawPointer(bitPattern: start), pages * page, &residency) == 0 else { return -1 }
            return residency.filter { $0 & 1 == 1 }.count
        }
        #expect(pages > 900)
        #expect(residentPages() == 0)
        let sum = view.float32Values?.reduce(0, +) ?? 0
        #expect(sum > 0)
        #expect(residentPages() == pages)
    }

    @Test func newerFormatIsRefusedSayingSo() throws {
        let path = try TestBundles.make([64], label: "bundle-newer")[0]
        let manifest = path + "/manifest.json"
        try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: "\"formatVersion\" : 1", with: "\"formatVersion\" : 2")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(throws: BundleError.newerFormat(path: path, version: 2, supported: 1)) { try ModelBundle.open(path) }
    }
}

/// Bundles whose documents lie about their contents are refused at opening.
@Suite struct DamagedBundleTests {
    func imageClassifierBundle(_ label: String) throws -> String {
        let directory = try Fixtures.temporaryDirectory(label)
        let path = directory.appendingPathComponent("m.mlmodelc").path
        _ = try BundleCompiler().compile(Fixtures.path("Models/ImageClassifier.mlmodel"), to: path)
        return path
    }

    /// Rewrites `file` in the bundle with `edit`, keeping its size (so the
    /// manifest's size check passes and the content check is what refuses it).
    func edit(_ bundle: String, _ file: String, _ edit: (String) -> String) throws {
        let path = bundle + "/" + file
        let before = try String(contentsOfFile: path, encoding: .utf8)
        let after = edit(before)
        #expect(after.utf8.count == before.utf8.count && after != before)
        try after.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test func countThatDoesNotFitItsBytesIsRefused() throws {
        let bundle = try imageClassifierBundle("damaged-count")
        try edit(bundle, "weights/index.json") { $0.replacingOccurrences(of: "\"count\" : 216", with: "\"count\" : 999") }
        guard case .inconsistentIndex(_, let detail)? = openError(bundle) else { Issue.record("opened"); return }
        #expect(detail.contains("999 values of 32 bits do not fit in 864 bytes"))
    }

    @Test func shapeThatDoesNotMultiplyToTheCountIsRefused() throws {
        let bundle = try imageClassifierBundle("damaged-shape")
        try edit(bundle, "weights/index.json") { text in
            guard let range = text.range(of: #""shape" : \[\s*8"#, options: .regularExpression) else { return text }
            return text.replacingCharacters(in: range, with: text[range].dropLast() + "9")
        }
        guard case .inconsistentIndex(_, let detail)? = openError(bundle) else { Issue.record("opened"); return }
        #expect(detail.contains("shape [9, 3, 3, 3] does not hold 216 values"))
    }

    @Test func duplicateOrMissingManifestEntriesAreRefused() throws {
        let bundle = try imageClassifierBundle("damaged-manifest")
        // The manifest lists every file but itself, so its own size is free to change.
        let manifest = bundle + "/manifest.json"
        let original = try String(contentsOfFile: manifest, encoding: .utf8)
        try original.replacingOccurrences(of: "\"path\" : \"model.spec\"", with: "\"path\" : \"metadata.json\"")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(openError(bundle) == .malformedFile(path: manifest, detail: "a file is listed more than once"))
        try original.replacingOccurrences(of: "\"path\" : \"model.spec\"", with: "\"path\" : \"model.mil\"")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(openError(bundle) == .malformedFile(path: manifest, detail: "model.spec is not listed"))
    }

    func openError(_ path: String) -> BundleError? {
        do {
            _ = try ModelBundle.open(path)
            return nil
        } catch {
            return error
        }
    }
}
