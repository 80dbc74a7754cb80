import Dispatch
import FixtureSupport
import Foundation
import ModelCompiler
import ModelFeatures
import ModelRuntime
import SystemIO
import Testing

/// One case file of Fixtures/Parity: a model and the outputs an independent
/// engine gave for some inputs.
struct ParityFile: CustomTestStringConvertible, Sendable {
    /// The path below Fixtures/Parity without ".json" (`svr_rbf`, `Networks/mobilenet_block`).
    let name: String
    var testDescription: String { name }

    /// The case files of one folder below Fixtures/Parity ("" for the top).
    static func all(in folder: String) -> [ParityFile] {
        let directory = Fixtures.path(folder.isEmpty ? "Parity" : "Parity/\(folder)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let prefix = folder.isEmpty ? "" : folder + "/"
        return names.filter { $0.hasSuffix(".json") }.sorted().map { ParityFile(name: prefix + String($0.dropLast(5))) }
    }

    var folder: String {
        guard let slash = name.lastIndex(of: "/") else { return "Parity" }
        return "Parity/" + name[..<slash]
    }

    /// Runs every case through the file's model, on `threads` threads per
    /// prediction and `concurrently` predictions at once, and records each
    /// output that differs from the reference by more than the tolerance (or,
    /// with `exactShapes`, has another shape than the reference's arrays).
    func check(compiled: Bool = false, threads: Int = 1, concurrently: Int = 1, exactShapes: Bool = false) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/\(name).json")))) as? [String: Any])
        let modelName = try #require(document["model"] as? String)
        let tolerance = try #require(document["tolerance"] as? Double)
        let cases = try #require(document["cases"] as? [[String: Any]])
        #expect(!cases.isEmpty)
        var path = Fixtures.path("\(folder)/\(modelName)")
        var scratch: URL?
        if compiled {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parity-\(UUID().uuidString)")
            scratch = directory
            path = directory.appendingPathComponent("model.mlmodelc").path
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            _ = try BundleCompiler().compile(Fixtures.path("\(folder)/\(modelName)"), to: path)
        }
        defer { if let scratch { try? FileManager.default.removeItem(at: scratch) } }
        let model = try Model(contentsOf: path, configuration: ModelConfiguration(threads: threads))
        #expect(model.summary.modelType == document["kind"] as? String)
        let parser = PredictionInputs(model: model)
        var prepared: [(inputs: [String: FeatureValue], expected: [String: Any])] = []
        for testCase in cases {
            prepared.append((try parser.parse(object: try #require(testCase["inputs"])),
                             try #require(testCase["outputs"] as? [String: Any])))
        }
        // Every case on each of `concurrently` threads at once (not the one
        // that opened the model), each mismatch recorded.
        let mismatches = Locked<[String]>([])
        let shared = UncheckedSendable(prepared)
        DispatchQueue.concurrentPerform(iterations: concurrently) { _ in
            for (index, testCase) in shared.value.enumerated() {
                do {
                    let outputs = try model.prediction(from: testCase.inputs)
                    for (output, want) in testCase.expected {
                        guard let got = outputs[output] else {
                            mismatches.withLock { $0.append("case \(index): no output \"\(output)\"") }
                            continue
                        }
                        if let mismatch = ParityComparison.difference(got, want, tolerance: tolerance, exactShape: exactShapes) {
                            mismatches.withLock { $0.append("case \(index) output \"\(output)\": \(mismatch)") }
                        }
                    }
                } catch {
                    mismatches.withLock { $0.append("case \(index): \(error)") }
                }
            }
        }
        #expect(mismatches.withLock { $0 } == [])
    }
}

/// Classic models against scikit-learn, XGBoost and NumPy.
@Suite("Classic models agree with scikit-learn, XGBoost and NumPy")
struct ClassicParityTests {
    static let files = ParityFile.all(in: "")

    @Test("the parity fixtures are there")
    func fixturesExist() {
        #expect(Self.files.count >= 50)
    }

    @Test("outputs match the reference engine", arguments: files)
    func parity(_ file: ParityFile) throws {
        try file.check()
    }
}

/// Neural networks and ML programs against onnxruntime and NumPy float64,
/// from the source model and from its compiled bundle (weights read from the
/// bundle's weight file).
@Suite("Networks agree with onnxruntime and NumPy")
struct NetworkParityTests {
    static let files = ParityFile.all(in: "Networks")

    @Test("outputs match the reference engine, from the source model", arguments: files)
    func source(_ file: ParityFile) throws {
        try file.check()
    }

    @Test("outputs match the reference engine, from the compiled bundle", arguments: files)
    func compiled(_ file: ParityFile) throws {
        try file.check(compiled: true)
    }

    /// Kernels split their work over the model's threads (pointwise
    /// convolutions in row blocks, for one): any split gives the same answers.
    @Test("outputs match the reference engine on several threads", arguments: files, [2, 3, 5])
    func threaded(_ file: ParityFile, threads: Int) throws {
        try file.check(threads: threads)
    }

    /// One opened model serves predictions from several threads at once, none
    /// of them the thread that prepared its kernels.
    @Test("outputs match the reference engine with predictions running at once", arguments: files)
    func concurrent(_ file: ParityFile) throws {
        try file.check(concurrently: 4)
    }
}

/// A value handed to other threads that only read it.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
