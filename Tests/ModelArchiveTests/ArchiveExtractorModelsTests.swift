import FixtureSupport
import Foundation
import ModelArchive
import Testing

@Suite(.timeLimit(.minutes(1))) struct ArchiveExtractorModelsTests {
    /// The files of the fixture package, as entries under `prefix`.
    static func packageEntries(prefix: String) throws -> [ArchiveBuilder.Entry] {
        let root = Fixtures.path("Models/MLProgram.mlpackage")
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        var entries: [ArchiveBuilder.Entry] = []
        for case let relative as String in enumerator {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory)
            if isDirectory.boolValue {
                entries.append(.directory(prefix + relative + "/"))
            } else {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))
                entries.append(.file(prefix + relative, Array(bytes)))
            }
        }
        return entries
    }

    @Test func zippedPackageIsExtracted() throws {
        let temporary = try TemporaryDirectory()
        let archive = temporary.path + "/model.zip"
        try ArchiveBuilder.write(try Self.packageEntries(prefix: "MLProgram.mlpackage/"), format: .zip, to: archive)
        #expect(try ArchiveExtractor.models(in: archive) == ["MLProgram.mlpackage"])
        let destination = temporary.path + "/out"
        let model = try ArchiveExtractor.extractModel(archive, into: destination)
        #expect(model == destination + "/MLProgram.mlpackage")
        let fixture = Fixtures.path("Models/MLProgram.mlpackage")
        for file in ["Manifest.json", "Data/com.apple.CoreML/weights/weight.bin", "Data/com.apple.CoreML/model.mlmodel"] {
            let extracted = FileManager.default.contents(atPath: model + "/" + file)
            #expect(extracted != nil && extracted == FileManager.default.contents(atPath: fixture + "/" + file), "\(file)")
        }
    }

    static let mixed: [ArchiveBuilder.Entry] = [
        .file("./Classifier.mlmodel", [1, 2, 3]),
        .file("nested/dir/Other.mlmodel", [4]),
        .file("Pkg.mlpackage/Manifest.json", Array("{}".utf8)),
        .file("Pkg.mlpackage/Data/com.apple.CoreML/model.mlmodel", [5]),
        .file("more/Second.mlpackage/Manifest.json", Array("{}".utf8)),
        .file("more/NotAPackage.mlpackage/readme.txt", [6]),
        .file("readme.mlmodel.txt", [7]),
        .file("more/Classifier.mlmodel", [8]),
    ]

    @Test(arguments: ArchiveBuilder.Format.allCases)
    func modelsAreListed(format: ArchiveBuilder.Format) throws {
        let temporary = try TemporaryDirectory()
        let archive = temporary.path + "/models.\(format)"
        try ArchiveBuilder.write(Self.mixed, format: format, to: archive)
        #expect(try ArchiveExtractor.models(in: archive) == [
            "Classifier.mlmodel", "Pkg.mlpackage", "more/Classifier.mlmodel", "more/Second.mlpackage", "nested/dir/Other.mlmodel",
        ])
    }

    @Test(arguments: [
        ("Other.mlmodel", "nested/dir/Other.mlmodel"),
        ("nested/dir/Other.mlmodel", "nested/dir/Other.mlmodel"),
        ("Pkg.mlpackage", "Pkg.mlpackage"),
        ("Pkg.mlpackage/", "Pkg.mlpackage"),
        ("./more/Classifier.mlmodel", "more/Classifier.mlmodel"),
        ("Classifier.mlmodel", "Classifier.mlmodel"),
    ])
    func memberIsChosen(member: String, expected: String) throws {
        let temporary = try TemporaryDirectory()
        let archive = temporary.path + "/models.zip"
        try ArchiveBuilder.write(Self.mixed, format: .zip, to: archive)
        let destination = temporary.path + "/out"
        if member == "Classifier.mlmodel" {
            // Both the top-level path and another file's last component match.
            #expect(throws: ArchiveError.ambiguousMember(path: archive, candidates: ["Classifier.mlmodel", "more/Classifier.mlmodel"])) {
                try ArchiveExtractor.extractModel(archive, into: destination, member: member)
            }
            #expect(temporary.listing() == ["models.zip"])
            return
        }
        #expect(try ArchiveExtractor.extractModel(archive, into: destination, member: member) == destination + "/" + expected)
        #expect(FileManager.default.fileExists(atPath: destination + "/" + expected))
    }

    @Test func missingAndAmbiguousMembersLeaveNothing() throws {
        let temporary = try TemporaryDirectory()
        let archive = temporary.path + "/models.tar.gz"
        try ArchiveBuilder.write(Self.mixed, format: .tarGzip, to: archive)
        let destination = temporary.path + "/out"
        let all = try ArchiveExtractor.models(in: archive)
        #expect(throws: ArchiveError.ambiguousMember(path: archive, candidates: all)) {
            try ArchiveExtractor.extractModel(archive, into: destination)
        }
        #expect(throws: ArchiveError.memberNotFound(path: archive, member: "Missing.mlmodel", available: all)) {
            try ArchiveExtractor.extractModel(archive, into: destination, member: "Missing.mlmodel")
        }
        let empty = temporary.path + "/none.tar"
        try ArchiveBuilder.write([.file("readme.txt", [1])], format: .tar, to: empty)
        #expect(throws: ArchiveError.memberNotFound(path: empty, member: "", available: [])) {
            try ArchiveExtractor.extractModel(empty, into: destination)
        }
        #expect(temporary.listing() == ["models.tar.gz", "none.tar"])
    }

    @Test func descriptionsAreOneLine() {
        let errors: [ArchiveError] = [
            .unreadable(path: "a.zip", reason: "No such file or directory"),
            .notAnArchive(path: "a.png"),
            .corrupt(path: "a.tar", entry: "x", reason: "truncated"),
            .corrupt(path: "a.tar", entry: nil, reason: "truncated"),
            .unsafeEntry(path: "a.tar", entry: "../x", reason: "\"..\" in the path"),
            .limitExceeded(path: "a.tar.gz", limit: "more than 10 entries"),
            .memberNotFound(path: "a.zip", member: "M", available: ["A.mlmodel"]),
            .memberNotFound(path: "a.zip", member: "", available: []),
            .ambiguousMember(path: "a.zip", candidates: ["A.mlmodel", "B.mlmodel"]),
        ]
        for error in errors {
            #expect(error.description.hasPrefix("a."))
            #expect(!error.description.contains("\n"))
        }
    }
}
