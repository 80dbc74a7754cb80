import Foundation
import Synchronization

/// The committed fixture models and the facts `Fixtures/generate.py` recorded
/// about them with coremltools (`Fixtures/index.json`).
public enum Fixtures {
    /// The package's root directory.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static let root = packageRoot.appendingPathComponent("Fixtures")

    /// The absolute path of a fixture named relative to `Fixtures/`.
    public static func path(_ relative: String) -> String {
        root.appendingPathComponent(relative).path
    }

    /// One entry of `index.json`, as JSON.
    public struct Entry: @unchecked Sendable {
        /// The path relative to `Fixtures/`.
        public let file: String
        /// The entry's keys; values are what `JSONSerialization` produced.
        public let facts: [String: Any]

        /// How a parameterized test names the case.
        public var testDescription: String { file }
    }

    /// The valid models.
    public static var models: [Entry] { entries("models") }

    /// The broken inputs, readable (semantic defects) or not.
    public static var broken: [Entry] { entries("broken") }

    private static func entries(_ key: String) -> [Entry] {
        guard let data = try? Data(contentsOf: root.appendingPathComponent("index.json")),
              let index = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let list = index[key] as? [[String: Any]]
        else { return [] }
        return list.compactMap { facts in (facts["file"] as? String).map { Entry(file: $0, facts: facts) } }
    }

    /// Where `actual` (modelc's JSON summary) disagrees with `expected` (an
    /// index entry), one line per difference; empty when they agree.
    ///
    /// Every key of `expected` must be in `actual` with an equal value (keys
    /// only modelc prints are allowed); arrays must match element by element.
    /// `pipeline` lists stage model types in the index and full summaries in
    /// modelc's output, so those are compared by `modelType`.
    public static func differences(expected: Any, actual: Any, at path: String = "") -> [String] {
        if let expected = expected as? [String: Any] {
            guard let actual = actual as? [String: Any] else { return ["\(path): expected an object, got \(actual)"] }
            var found: [String] = []
            for (key, value) in expected.sorted(by: { $0.key < $1.key }) where !["file", "problem", "readable", "inspectExitCode"].contains(key) {
                guard var other = actual[key] else {
                    found.append("\(path).\(key): missing, expected \(canonical(value))")
                    continue
                }
                if key == "pipeline", let stages = other as? [[String: Any]] {
                    other = stages.map { $0["modelType"] ?? NSNull() }
                }
                found += differences(expected: value, actual: other, at: "\(path).\(key)")
            }
            return found
        }
        if let expected = expected as? [Any] {
            guard let actual = actual as? [Any], actual.count == expected.count else {
                return ["\(path): expected \(canonical(expected)), got \(canonical(actual))"]
            }
            return zip(expected, actual).enumerated().flatMap { index, pair in
                differences(expected: pair.0, actual: pair.1, at: "\(path)[\(index)]")
            }
        }
        return canonical(expected) == canonical(actual) ? [] : ["\(path): expected \(canonical(expected)), got \(canonical(actual))"]
    }

    /// A value as compact JSON text with sorted keys, for comparing scalars of
    /// either parse and for messages.
    static func canonical(_ value: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys, .fragmentsAllowed]) else {
            return "\(value)"
        }
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }

    /// Parses JSON text into Foundation values.
    public static func parseJSON(_ text: String) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    /// A fresh empty directory under `scratchRoot`: it goes with the test
    /// process even when the test that made it forgets it.
    public static func temporaryDirectory(_ label: String) throws -> URL {
        // Short names: a Unix socket's path must fit in 108 bytes (the socket tests put theirs here).
        let url = scratchRoot.appendingPathComponent("\(label)-\(directoriesMade.add(1, ordering: .relaxed).newValue)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private static let directoriesMade = Atomic<Int>(0)

    /// `modelc-tests-PID` in the system's temporary directory, removed with
    /// everything in it when the test process exits.
    public static let scratchRoot: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-tests-\(getpid())", isDirectory: true)
        atexit { try? FileManager.default.removeItem(at: Fixtures.scratchRoot) }
        return url
    }()
}
