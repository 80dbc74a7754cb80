import FixtureSupport
import Foundation
import SystemIO
import Testing

/// A project directory with a manifest, fixture models served by the test
/// server (some archived), and a private cache.
final class BuildScene {
    let directory: URL
    let served: String
    let server: TestHTTPServer
    var cache: String

    init(_ label: String) throws {
        directory = try Fixtures.temporaryDirectory(label)
        served = directory.appendingPathComponent("served").path
        cache = directory.appendingPathComponent("cache").path
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: false)
        server = try TestHTTPServer(serving: served)
        try FileManager.default.createDirectory(atPath: path("project"), withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/ImageClassifier.mlmodel"), toPath: served + "/classifier.mlmodel")
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/Scaler.mlmodel"), toPath: path("project/scaler.mlmodel"))
        try ArchiveBuilder.write(try ArchiveBuilder.entries(ofDirectory: Fixtures.path("Models/MLProgram.mlpackage")), format: .zip, to: served + "/program.zip")
        let tree = try Array(Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/TreeEnsembleRegressor.mlmodel"))))
        try ArchiveBuilder.write([.directory("models"), .file("models/tree.mlmodel", tree), .file("LICENSE", Array("MIT".utf8))],
                                 format: .tarGzip, to: served + "/tree.tar.gz")
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ relative: String) -> String { directory.appendingPathComponent(relative).path }
    var manifest: String { path("project/models.json") }
    var lockfile: String { path("project/models.lock.json") }

    func sha256(ofServed name: String) throws -> String {
        try SHA256Digest.ofFile(at: served + "/" + name).digest.description
    }

    /// The usual models: two URLs (one archived with a package, one tar.gz), and a local file.
    func standardModels() throws -> [[String: Any]] {
        [
            ["name": "classifier", "source": server.url("classifier.mlmodel"), "sha256": try sha256(ofServed: "classifier.mlmodel")],
            ["name": "program", "source": server.url("program.zip"), "sha256": try sha256(ofServed: "program.zip"), "options": ["fp16": true]],
            ["name": "tree", "source": server.url("tree.tar.gz"), "sha256": try sha256(ofServed: "tree.tar.gz"), "member": "tree.mlmodel"],
            ["name": "scaler", "source": "scaler.mlmodel"],
        ]
    }

    func writeManifest(_ models: [[String: Any]]) throws {
        let data = try JSONSerialization.data(withJSONObject: ["models": models], options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: manifest))
    }

    func build(_ arguments: [String] = []) throws -> ModelcProcess.Result {
        try ModelcProcess.run(["build", manifest, "--retries", "1", "--timeout", "5"] + arguments,
                              environment: ["MODELC_CACHE": cache, "MODELC_OFFLINE": "", "MODELC_TOKEN": ""])
    }
}

@Suite(.timeLimit(.minutes(3))) struct BuildCommandTests {
    @Test func buildsEveryModelAndReportsTheOneThatFails() throws {
        let scene = try BuildScene("build-fail")
        let missing: [String: Any] = ["name": "missing", "source": scene.server.url("missing.mlmodel"), "sha256": String(repeating: "1", count: 64)]
        try scene.writeManifest(try scene.standardModels() + [missing])
        let result = try scene.build(["--jobs", "3"])
        #expect(result.status == 90)
        #expect(result.standardError.contains("modelc: error: missing: \(scene.server.url("missing.mlmodel")): server answered HTTP 404"))
        let rows = result.standardOutput.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(rows.first == ["NAME", "STATUS", "SOURCE", "BUNDLE", "TIME"])
        #expect(rows.dropFirst().prefix(5).map { Array($0.prefix(2)) } == [
            ["classifier", "compiled"], ["program", "compiled"], ["tree", "compiled"], ["scaler", "compiled"], ["missing", "failed"],
        ])
        for name in ["classifier", "program", "tree", "scaler"] {
            #expect(try ModelcProcess.run(["verify", scene.path("project/build/\(name).mlmodelc")]).status == 0)
        }
        #expect(!FileManager.default.fileExists(atPath: scene.path("project/build/missing.mlmodelc")))
        // The lockfile has the four that were built, and not the failure.
        let lock = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: scene.lockfile))) as? [String: Any])
        let models = try #require(lock["models"] as? [String: [String: Any]])
        #expect(models.keys.sorted() == ["classifier", "program", "scaler", "tree"])
        #expect(models["program"]?["member"] as? String == "MLProgram.mlpackage")
        #expect(models["program"]?["fp16"] as? Bool == true)
        #expect(models["tree"]?["member"] as? String == "models/tree.mlmodel")
        #expect(models["classifier"]?["sourceSHA256"] as? String == (try scene.sha256(ofServed: "classifier.mlmodel")))
        #expect(models["classifier"]?["etag"] is String)
        #expect(models["scaler"]?["compiler"] as? String == "modelc 0.1.0")
    }

    @Test func aSecondRunIsUpToDateWithoutTheNetworkAndFrozenPasses() throws {
        let scene = try BuildScene("build-again")
        try scene.writeManifest(try scene.standardModels())
        #expect(try scene.build().status == 0)
        let lock = try Data(contentsOf: URL(fileURLWithPath: scene.lockfile))
        let requests = try scene.server.requestLog().count

        let again = try scene.build(["--frozen"])
        #expect(again.status == 0, "\(again.standardError)")
        #expect(again.standardOutput.split(separator: "\n").dropFirst().prefix(4).allSatisfy { $0.contains("up to date") })
        #expect(again.standardOutput.contains("models.lock.json: unchanged"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: scene.lockfile)) == lock)
        // Every URL is pinned and in the cache: no request at all.
        #expect(try scene.server.requestLog().count == requests)
    }

    @Test func frozenFailsNamingWhatWouldChange() throws {
        let scene = try BuildScene("build-frozen")
        var models = try scene.standardModels()
        try scene.writeManifest(models)
        let noLock = try scene.build(["--frozen"])
        #expect(noLock.status == 91)
        #expect(noLock.standardError.contains("the lockfile does not exist"))

        #expect(try scene.build().status == 0)
        let lock = try Data(contentsOf: URL(fileURLWithPath: scene.lockfile))
        models[3]["options"] = ["fp16": true]
        models.remove(at: 0)
        try scene.writeManifest(models)
        let frozen = try scene.build(["--frozen"])
        #expect(frozen.status == 91)
        #expect(frozen.standardError.contains("classifier: in the lockfile but not in the manifest"))
        #expect(frozen.standardError.contains("scaler: fp16 false → true"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: scene.lockfile)) == lock)

        let unfrozen = try scene.build()
        #expect(unfrozen.status == 0)
        #expect(unfrozen.standardOutput.contains("models.lock.json: updated (3 changes)"))
        #expect(unfrozen.standardOutput.contains("scaler: bundle sha256 "))
    }

    @Test func aChangedUpstreamFileIsDetected() throws {
        let scene = try BuildScene("build-upstream")
        let url = scene.server.url("classifier.mlmodel")
        try scene.writeManifest([["name": "classifier", "source": url]])
        let unpinned = try scene.build()
        #expect(unpinned.status == 92)
        #expect(unpinned.standardError.contains("models[0].sha256: a URL source needs a sha256 (or --allow-unpinned)"))
        #expect(try scene.build(["--allow-unpinned"]).status == 0)
        let before = try scene.sha256(ofServed: "classifier.mlmodel")

        // Upstream changes the file (a different fixture under the same name).
        try FileManager.default.removeItem(atPath: scene.served + "/classifier.mlmodel")
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/ImageClassifierInt8.mlmodel"), toPath: scene.served + "/classifier.mlmodel")
        let after = try scene.sha256(ofServed: "classifier.mlmodel")

        // CI with the cache it kept: the lockfile pins the old content, which
        // the cache holds, so the build reproduces the locked bundle offline.
        let cached = try scene.build(["--allow-unpinned", "--frozen"])
        #expect(cached.status == 0)
        #expect(cached.standardError.contains("classifier: up to date"))
        // CI with an empty cache must download: the change is an error.
        scene.cache = scene.path("empty-cache")
        let frozen = try scene.build(["--allow-unpinned", "--frozen"])
        #expect(frozen.status == 90)
        #expect(frozen.standardError.contains("classifier: \(url): SHA-256 is \(after), expected \(before)"))
        // A developer: the lockfile takes the new content and says so.
        let updated = try scene.build(["--allow-unpinned"])
        #expect(updated.status == 0)
        #expect(updated.standardOutput.contains("classifier: source sha256 \(before) → \(after)"))
    }

    @Test func twoMembersOfOneArchiveBuildInParallel() throws {
        let scene = try BuildScene("build-members")
        let model = Array(try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/GLMRegressor.mlmodel"))))
        let other = Array(try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/SVMRegressor.mlmodel"))))
        try ArchiveBuilder.write([.file("a/glm.mlmodel", model), .file("b/svm.mlmodel", other)], format: .zip, to: scene.served + "/both.zip")
        let sha = try scene.sha256(ofServed: "both.zip")
        try scene.writeManifest((0..<6).map { index in
            ["name": "m\(index)", "source": scene.server.url("both.zip"), "sha256": sha, "member": index % 2 == 0 ? "glm.mlmodel" : "svm.mlmodel"]
        })
        let result = try scene.build(["--jobs", "6"])
        #expect(result.status == 0, "\(result.standardError)")
        // One download, one unpacking, six bundles.
        #expect(try scene.server.requests(for: "both.zip").count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scene.cache + "/extracted") == [sha])
        for index in 0..<6 {
            #expect(try ModelcProcess.run(["verify", scene.path("project/build/m\(index).mlmodelc")]).status == 0)
        }
    }

    @Test func frozenReportsAChangedSourceInsteadOfUsingTheOldPin() throws {
        let scene = try BuildScene("build-source-change")
        try scene.writeManifest([["name": "classifier", "source": scene.server.url("classifier.mlmodel")]])
        #expect(try scene.build(["--allow-unpinned"]).status == 0)
        try FileManager.default.copyItem(atPath: Fixtures.path("Models/GLMRegressor.mlmodel"), toPath: scene.served + "/other.mlmodel")
        try scene.writeManifest([["name": "classifier", "source": scene.server.url("other.mlmodel")]])
        let frozen = try scene.build(["--allow-unpinned", "--frozen"])
        #expect(frozen.status == 91)
        #expect(frozen.standardError.contains("classifier: source \(scene.server.url("classifier.mlmodel")) → \(scene.server.url("other.mlmodel"))"))
    }

    @Test func twoBuildsGiveByteIdenticalBundles() throws {
        let scene = try BuildScene("build-reproducible")
        try scene.writeManifest(try scene.standardModels())
        #expect(try scene.build(["--out", scene.path("first")]).status == 0)
        // Another cache and another directory, as on another machine.
        scene.cache = scene.path("other-cache")
        try FileManager.default.removeItem(atPath: scene.lockfile)
        let second = try scene.build(["--out", scene.path("second"), "--jobs", "1"])
        #expect(second.status == 0)
        let first = try filesBelow(scene.path("first"))
        #expect(first.count >= 4 * 5)
        #expect(first == (try filesBelow(scene.path("second"))))
    }

    @Test func failFastStartsNothingAfterAFailure() throws {
        let scene = try BuildScene("build-fail-fast")
        let missing: [String: Any] = ["name": "missing", "source": "missing.mlmodel"]
        try scene.writeManifest([missing] + (try scene.standardModels()))
        let result = try scene.build(["--fail-fast", "--jobs", "1"])
        #expect(result.status == 90)
        #expect(result.standardError.contains("missing: \(scene.path("project/missing.mlmodel")): no such file or directory"))
        let statuses = result.standardOutput.split(separator: "\n").dropFirst().prefix(5).map { $0.split(separator: " ", omittingEmptySubsequences: true)[1] }
        #expect(statuses == ["failed", "skipped", "skipped", "skipped", "skipped"])
    }

    @Test func jsonSummary() throws {
        let scene = try BuildScene("build-json")
        try scene.writeManifest(try scene.standardModels())
        let result = try scene.build(["--json"])
        #expect(result.status == 0)
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        let models = try #require(summary["models"] as? [[String: Any]])
        #expect(models.map { $0["name"] as? String } == ["classifier", "program", "tree", "scaler"])
        #expect(models.allSatisfy { $0["status"] as? String == "compiled" && ($0["bundleSHA256"] as? String)?.count == 64 })
        #expect(summary["failed"] as? Int == 0)
        #expect(((summary["lockfile"] as? [String: Any])?["changes"] as? [String])?.count == 4)
    }

    @Test(arguments: [
        (#"{"models": [{"name": "a", "source": "a.mlmodel", "sha265": "x"}]}"#, 92, "models[0].sha265: unknown key; did you mean 'sha256'?"),
        (#"{"models": [{"name": "a", "source": "a.mlmodel"}, {"name": "a", "source": "b.mlmodel"}]}"#, 92, "models[1].name: 'a' is used twice"),
        (#"{"models": [{"name": "../a", "source": "a.mlmodel"}]}"#, 92, "models[0].name: expected a name of letters"),
        (#"{"models": [{"name": "a", "source": "ftp://h/a.mlmodel", "sha256": "00"}]}"#, 92, "models[0].source: unsupported scheme 'ftp'"),
        (#"{"models": [{"name": "a", "source": "a.mlmodel", "options": {"fp16": "yes"}}]}"#, 92, "models[0].options.fp16: expected true or false"),
        (#"{"models": "#, 92, "not valid JSON"),
    ])
    func invalidManifestsAreRefusedWithTheirLocation(text: String, status: Int32, message: String) throws {
        let scene = try BuildScene("build-invalid")
        try Data(text.utf8).write(to: URL(fileURLWithPath: scene.manifest))
        let result = try scene.build()
        #expect(result.status == status)
        #expect(result.standardError.hasPrefix("modelc: error: \(scene.manifest)"))
        #expect(result.standardError.contains(message), "\(result.standardError)")
    }

    @Test func aMissingManifestIsNamed() throws {
        let scene = try BuildScene("build-nomanifest")
        let result = try scene.build()
        #expect(result.status == 66)
        #expect(result.standardError == "modelc: error: \(scene.manifest): no such file\n")
    }
}
