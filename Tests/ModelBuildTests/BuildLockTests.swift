import Foundation
import ModelBuild
import Testing

@Suite struct BuildLockTests {
    let entry = BuildLock.Entry(source: "https://example.com/a.zip", sourceSHA256: String(repeating: "a", count: 64), etag: "\"1\"",
                                member: "a.mlpackage", fp16: false, compiler: "modelc 0.1.0", bundleSHA256: String(repeating: "b", count: 64))

    @Test func theTextIsStableAndReadsBack() throws {
        let lock = BuildLock(models: ["z": entry, "a": entry])
        let path = NSTemporaryDirectory() + "lock-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try lock.write(to: path)
        #expect(try BuildLock.read(path) == lock)
        #expect(BuildLock(models: ["a": entry, "z": entry]).text == lock.text)
        #expect(lock.text.hasSuffix("}\n"))
        #expect(lock.text.range(of: "\"a\"")!.lowerBound < lock.text.range(of: "\"z\"")!.lowerBound)
    }

    @Test func changesNameEachFieldButNotTheETag() {
        var changed = entry
        changed.fp16 = true
        changed.etag = "\"2\""
        changed.bundleSHA256 = String(repeating: "c", count: 64)
        let old = BuildLock(models: ["kept": entry, "gone": entry])
        let new = BuildLock(models: ["kept": changed, "added": entry])
        #expect(new.changes(from: old) == [
            "added: not in the lockfile",
            "gone: in the lockfile but not in the manifest",
            "kept: fp16 false → true",
            "kept: bundle sha256 \(entry.bundleSHA256) → \(changed.bundleSHA256)",
        ])
        #expect(old.changes(from: old) == [])
    }

    @Test func lockfileSitsBesideTheManifest() {
        #expect(BuildLock.path(forManifest: "ci/models.json") == "ci/models.lock.json")
        #expect(BuildLock.path(forManifest: "models") == "models.lock.json")
    }

    @Test func malformedLockfilesAreNamed() throws {
        let path = NSTemporaryDirectory() + "lock-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("{\"lockfileVersion\": 2, \"models\": {}}".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: BuildError.invalidLockfile(path: path, reason: "version 2 is not 1")) { try BuildLock.read(path) }
        try Data("[]".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: BuildError.invalidLockfile(path: path, reason: "malformed")) { try BuildLock.read(path) }
        #expect(try BuildLock.read(path + ".missing") == nil)
    }
}
