import FixtureSupport
import Foundation
import SystemIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A served directory, the test server, and a private cache for `modelc fetch`.
final class FetchCommandScene {
    let directory: URL
    let served: String
    let cache: String
    let server: TestHTTPServer
    let model: Data

    init(_ label: String) throws {
        directory = try Fixtures.temporaryDirectory(label)
        served = directory.appendingPathComponent("served").path
        cache = directory.appendingPathComponent("cache").path
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: false)
        model = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Models/ImageClassifier.mlmodel")))
        try model.write(to: URL(fileURLWithPath: served + "/classifier.mlmodel"))
        server = try TestHTTPServer(serving: served)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    func url(_ name: String = "classifier.mlmodel", fault: String? = nil) -> String { server.url(name, fault: fault) }
    var environment: [String: String] { ["MODELC_CACHE": cache, "MODELC_OFFLINE": "", "MODELC_TOKEN": ""] }
    var modelSHA256: String { model.withUnsafeBytes { SHA256Digest.of($0) }.description }

    func fetch(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ModelcProcess.Result {
        try ModelcProcess.run(["fetch"] + arguments + ["--retries", "2", "--timeout", "5"],
                              environment: environment.merging(extra) { _, added in added })
    }

    func cacheCommand(_ arguments: [String]) throws -> ModelcProcess.Result {
        try ModelcProcess.run(["cache"] + arguments, environment: environment)
    }

    /// The cached files (locks left out), relative to the cache.
    func cacheFiles() -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: cache) else { return [] }
        var files: [String] = []
        while let path = walker.nextObject() as? String {
            if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular, !path.hasPrefix("locks/") { files.append(path) }
        }
        return files.sorted()
    }

    /// A file of `size` random bytes, served as `name`.
    @discardableResult
    func serveRandom(_ name: String, size: Int) throws -> Data {
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try data.write(to: URL(fileURLWithPath: served + "/" + name))
        return data
    }
}

@Suite(.timeLimit(.minutes(2))) struct FetchCommandTests {
    @Test func printsTheHashAndTheCachedPathThenRevalidates() throws {
        let scene = try FetchCommandScene("fetch-plain")
        let blob = scene.cache + "/blobs/sha256/" + scene.modelSHA256
        let first = try scene.fetch([scene.url()])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput == "\(scene.modelSHA256)  \(blob)\n")
        #expect(first.standardError.contains("pin this content with --sha256 \(scene.modelSHA256)"))
        #expect(FileManager.default.contents(atPath: blob) == scene.model)

        let second = try scene.fetch([scene.url()])
        #expect(second.status == 0)
        #expect(second.standardOutput == first.standardOutput)
        #expect(!second.standardError.contains("pin this content"))
        #expect(try scene.server.requests(for: "classifier.mlmodel").map { $0["status"] as? Int } == [200, 304])
    }

    @Test func copiesOutAndCompiles() throws {
        let scene = try FetchCommandScene("fetch-compile")
        let out = scene.path("out") + "/"
        let bundle = scene.path("classifier.mlmodelc")
        let result = try scene.fetch([scene.url(), "-o", out, "--compile", bundle])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "\(scene.modelSHA256)  \(out)classifier.mlmodel\n\(bundle): compiled\n")
        #expect(FileManager.default.contents(atPath: out + "classifier.mlmodel") == scene.model)
        #expect(try ModelcProcess.run(["verify", bundle]).status == 0)
    }

    @Test func aZippedPackageComesOutAsTheSameDirectory() throws {
        let scene = try FetchCommandScene("fetch-package")
        let package = Fixtures.path("Models/MLProgram.mlpackage")
        try ArchiveBuilder.write(try ArchiveBuilder.entries(ofDirectory: package), format: .zip, to: scene.served + "/program.zip")
        let output = scene.path("fetched.mlpackage")
        let result = try scene.fetch([scene.url("program.zip"), "-o", output, "--compile", scene.path("program.mlmodelc")])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasSuffix("  \(output)\n\(scene.path("program.mlmodelc")): compiled\n"))
        let expected = try FileManager.default.subpathsOfDirectory(atPath: package).sorted()
        #expect(try FileManager.default.subpathsOfDirectory(atPath: output).sorted() == expected)
        #expect(try filesBelow(output) == filesBelow(package))
    }

    @Test func aKilledDownloadResumesToTheSameBytes() throws {
        let scene = try FetchCommandScene("fetch-kill")
        let data = try scene.serveRandom("big.bin", size: 3_000_000)
        let url = scene.url("big.bin", fault: "throttle:1000000")
        let process = ModelcProcess.prepare(["fetch", url, "--quiet"], environment: scene.environment)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Kill once a good part is on disk, well before the end (about 3 s).
        let deadline = Date().addingTimeInterval(20)
        var partialBytes: UInt64 = 0
        while partialBytes < 400_000, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            partialBytes = scene.cacheFiles().filter { $0.hasSuffix(".partial") }
                .compactMap { try? FileManager.default.attributesOfItem(atPath: scene.cache + "/" + $0)[.size] as? UInt64 }.first ?? 0
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(partialBytes >= 400_000 && partialBytes < 3_000_000)
        #expect(!scene.cacheFiles().contains { $0.hasPrefix("blobs/") })

        let rerun = try scene.fetch([url, "--json"])
        #expect(rerun.status == 0, "\(rerun.standardError)")
        let sha256 = data.withUnsafeBytes { SHA256Digest.of($0) }.description
        #expect(FileManager.default.contents(atPath: scene.cache + "/blobs/sha256/" + sha256) == data)
        let start = try #require(jsonLines(rerun.standardOutput).first { $0["event"] as? String == "start" })
        #expect((start["resumedFrom"] as? Int).map { $0 >= 400_000 } == true)
        let requests = try scene.server.requests(for: "big.bin")
        #expect(requests.count == 2)
        #expect((requests.last?["Range"] as? String)?.hasPrefix("bytes=") == true)
        #expect(requests.last?["status"] as? Int == 206)
    }

    @Test func eightProcessesShareOneTransfer() throws {
        let scene = try FetchCommandScene("fetch-concurrent")
        let data = try scene.serveRandom("shared.bin", size: 1_000_000)
        let url = scene.url("shared.bin", fault: "throttle:1000000")
        var processes: [(Process, Pipe, Pipe)] = []
        for index in 0..<8 {
            let process = ModelcProcess.prepare(["fetch", url, "-o", scene.path("copy-\(index).bin")], environment: scene.environment)
            let output = Pipe(), error = Pipe()
            process.standardOutput = output
            process.standardError = error
            try process.run()
            processes.append((process, output, error))
        }
        var waited = 0
        for (process, output, error) in processes {
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let complaints = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(complaints)")
            #expect(printed.hasPrefix(data.withUnsafeBytes { SHA256Digest.of($0) }.description + "  "))
            if complaints.contains("waiting for another modelc process fetching it") { waited += 1 }
        }
        #expect(waited >= 1)
        for index in 0..<8 {
            #expect(FileManager.default.contents(atPath: scene.path("copy-\(index).bin")) == data)
        }
        let transfers = try scene.server.requests(for: "shared.bin").filter { $0["status"] as? Int == 200 }
        #expect(transfers.count == 1)
    }

    /// Each failure a user can cause: its exit code and the start of its one-line error.
    @Test(arguments: [
        (["URL:missing.mlmodel"], 82, "server answered HTTP 404"),
        (["ftp://127.0.0.1/model.mlmodel"], 86, "unsupported scheme"),
        (["URL:classifier.mlmodel", "--offline"], 85, "not in the cache, and offline mode forbids downloading it"),
        (["URL:classifier.mlmodel", "--sha256", String(repeating: "0", count: 64)], 83, "SHA-256 is "),
        (["URL:classifier.mlmodel", "--max-size", "1K"], 84, "larger than the limit of 1024 bytes"),
        (["URL:classifier.mlmodel", "--sha256", "abc"], 64, "invalid value 'abc' for '--sha256'"),
        (["URL:classifier.mlmodel", "--member", "x.mlmodel"], 87, "a member was named, but the file is not a zip or tar archive"),
        (["URL:classifier.mlmodel", "--json", "--quiet"], 64, "options '--quiet' and '--json' exclude each other"),
        (["URL:classifier.mlmodel", "--max-size", "lots"], 64, "invalid value 'lots' for '--max-size'"),
        (["URL:classifier.mlmodel", "--header", "X-A: b\r\nX-B: c"], 64, "invalid value 'X-A' for '--header': expected 'NAME: VALUE' on one line"),
        (["URL:classifier.mlmodel?fault=redirect-file"], 81, "not http or https"),
    ])
    func failuresHaveTheirExitCodes(arguments: [String], status: Int32, message: String) throws {
        let scene = try FetchCommandScene("fetch-fail")
        let resolved = arguments.map { $0.hasPrefix("URL:") ? scene.server.url(String($0.dropFirst(4))) : $0 }
        let result = try scene.fetch(resolved)
        #expect(result.status == status)
        #expect(result.standardError.hasPrefix("modelc: error: "))
        #expect(result.standardError.contains(message), "\(result.standardError)")
        #expect(result.standardOutput == "")
        // A file that is not an archive is a good download, kept in the cache.
        if status != 87 { #expect(!scene.cacheFiles().contains { $0.hasPrefix("blobs/") }) }
    }

    @Test func aMissingMemberNamesTheModelsThereAre() throws {
        let scene = try FetchCommandScene("fetch-member")
        try ArchiveBuilder.write([.file("a.mlmodel", Array(scene.model)), .file("b.mlmodel", Array(scene.model))], format: .tarXz,
                                 to: scene.served + "/two.tar.xz")
        let ambiguous = try scene.fetch([scene.url("two.tar.xz")])
        #expect(ambiguous.status == 88)
        let missing = try scene.fetch([scene.url("two.tar.xz"), "--member", "c.mlmodel"])
        #expect(missing.status == 88)
        #expect(missing.standardError.contains("a.mlmodel") && missing.standardError.contains("b.mlmodel"))
        let chosen = try scene.fetch([scene.url("two.tar.xz"), "--member", "b.mlmodel"])
        #expect(chosen.status == 0)
        #expect(chosen.standardOutput.hasSuffix("/b.mlmodel\n"))
    }

    @Test func jsonPrintsOneEventPerLine() throws {
        let scene = try FetchCommandScene("fetch-json")
        try scene.serveRandom("large.bin", size: 1_500_000)
        let result = try scene.fetch([scene.url("large.bin", fault: "throttle:1000000,503-once"), "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let events = jsonLines(result.standardOutput)
        #expect(events.count == result.standardOutput.split(separator: "\n").count)
        let names = events.compactMap { $0["event"] as? String }
        #expect(names.first == "retry")
        #expect(names.dropFirst().first == "start")
        #expect(names.filter { $0 == "progress" }.count >= 1)
        #expect(names.last == "done")
        let done = try #require(events.last)
        #expect(done["source"] as? String == "network")
        #expect(done["attempts"] as? Int == 2)
        #expect((done["sha256"] as? String)?.count == 64)
        #expect(events.first?["delaySeconds"] as? Double == 1)
        #expect(result.standardError == "")

        let failed = try scene.fetch([scene.url("missing.bin"), "--json"])
        #expect(failed.status == 82)
        let error = try #require(jsonLines(failed.standardOutput).last)
        #expect(error["event"] as? String == "error")
        #expect(error["exitCode"] as? Int == 82)
    }

    @Test func theTokenGoesToTheURLsHostOnlyAndIsNeverPrinted() throws {
        let scene = try FetchCommandScene("fetch-token")
        let secret = "token-\(UUID().uuidString)"
        let result = try scene.fetch([scene.url(fault: "redirect-host:localhost"), "--header", "X-Token: header-\(secret)"],
                                     environment: ["MODELC_TOKEN": secret])
        #expect(result.status == 0, "\(result.standardError)")
        let requests = try scene.server.requests(for: "classifier.mlmodel")
        #expect(requests.count == 2)
        #expect(requests.first?["Authorization"] as? String == "Bearer \(secret)")
        #expect(requests.first?["X-Token"] as? String == "header-\(secret)")
        #expect(requests.last?["Authorization"] == nil)
        #expect(requests.last?["X-Token"] == nil)

        let failed = try scene.fetch([scene.url("missing.mlmodel"), "--json", "--header", "X-Token: header-\(secret)"],
                                     environment: ["MODELC_TOKEN": secret])
        #expect(failed.status == 82)
        for text in [result.standardOutput, result.standardError, failed.standardOutput, failed.standardError] {
            #expect(!text.contains(secret))
        }
    }

    @Test func aTokenWithALineBreakIsRefusedUnprinted() throws {
        let scene = try FetchCommandScene("fetch-token-break")
        let result = try scene.fetch([scene.url()], environment: ["MODELC_TOKEN": "secret\r\nX-Injected: 1"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("the token holds a line break"))
        #expect(!result.standardError.contains("secret"))
        #expect(try scene.server.requestLog().isEmpty)
    }

    @Test func userInformationInTheURLIsNeverPrintedNorStored() throws {
        let scene = try FetchCommandScene("fetch-userinfo")
        let url = scene.url().replacingOccurrences(of: "http://", with: "http://user:hunter2@")
        let result = try scene.fetch([url, "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let again = try scene.fetch([url, "--json"])
        #expect(again.standardOutput.contains("\"revalidate\""))
        for text in [result.standardOutput, result.standardError, again.standardOutput, again.standardError, try scene.cacheCommand(["list"]).standardOutput] {
            #expect(!text.contains("hunter2"))
        }
        for file in scene.cacheFiles() where file.hasSuffix(".json") {
            #expect(!(try String(contentsOfFile: scene.cache + "/" + file, encoding: .utf8)).contains("hunter2"))
        }
    }

    @Test func offlineModeFromTheEnvironmentServesTheCache() throws {
        let scene = try FetchCommandScene("fetch-offline")
        #expect(try scene.fetch([scene.url()]).status == 0)
        let offline = try scene.fetch([scene.url()], environment: ["MODELC_OFFLINE": "1"])
        #expect(offline.status == 0)
        let miss = try scene.fetch([scene.url("other.mlmodel")], environment: ["MODELC_OFFLINE": "1"])
        #expect(miss.status == 85)
        #expect(try scene.server.requestLog().count == 1)
    }

    @Test func cacheListVerifyAndPrune() throws {
        let scene = try FetchCommandScene("fetch-cache")
        #expect(try scene.fetch([scene.url()]).status == 0)
        let path = try scene.cacheCommand(["path"])
        #expect(path.standardOutput == scene.cache + "\n")
        let list = try scene.cacheCommand(["list"])
        #expect(list.status == 0)
        #expect(list.standardOutput.hasPrefix(scene.modelSHA256 + "  "))
        #expect(list.standardOutput.contains(scene.url()))
        let listJSON = try #require(jsonLines(try scene.cacheCommand(["list", "--json"]).standardOutput).first)
        #expect((listJSON["entries"] as? [[String: Any]])?.first?["sha256"] as? String == scene.modelSHA256)

        #expect(try scene.cacheCommand(["verify"]).status == 0)
        let blob = scene.cache + "/blobs/sha256/" + scene.modelSHA256
        chmod(blob, 0o644)
        try Data("damaged".utf8).write(to: URL(fileURLWithPath: blob))
        let verify = try scene.cacheCommand(["verify"])
        #expect(verify.status == 89)
        #expect(verify.standardOutput.contains("\(blob): damaged, removed"))

        #expect(try scene.fetch([scene.url()]).status == 0)
        let prune = try scene.cacheCommand(["prune", "--all"])
        #expect(prune.status == 0)
        #expect(prune.standardOutput.contains("removed \(scene.url())"))
        #expect(scene.cacheFiles() == [])

        let wrong = try scene.cacheCommand(["prun"])
        #expect(wrong.status == 64)
        #expect(wrong.standardError.hasPrefix("modelc: error: invalid ACTION 'prun': expected one of list, verify, prune, path; did you mean 'prune'?"))
        #expect(try scene.cacheCommand(["list", "--all"]).status == 64)
    }
}

/// Every regular file below `root`, by relative path, with its bytes.
func filesBelow(_ root: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    for relative in try FileManager.default.subpathsOfDirectory(atPath: root) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue {
            files[relative] = FileManager.default.contents(atPath: root + "/" + relative)
        }
    }
    return files
}

/// The JSON objects of NDJSON text.
func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}
