import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// Every case in Fixtures/Parity: the model run by modelc must give the
/// outputs an independent engine (scikit-learn, XGBoost, NumPy float64) gave
/// for the same inputs, labels exactly and numbers within the file's
/// tolerance (relative to max(1, |expected|)).
@Suite("Classic models agree with scikit-learn, XGBoost and NumPy")
struct ClassicParityTests {
    struct ParityFile: CustomTestStringConvertible, Sendable {
        let name: String
        var testDescription: String { name }
    }

    static let files: [ParityFile] = {
        let directory = Fixtures.path("Parity")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { ParityFile(name: String($0.dropLast(5))) }
    }()

    @Test("the parity fixtures are there")
    func fixturesExist() {
        #expect(Self.files.count >= 50)
    }

    @Test("outputs match the reference engine", arguments: files)
    func parity(_ file: ParityFile) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/\(file.name).json")))) as? [String: Any])
        let modelName = try #require(document["model"] as? String)
        let tolerance = try #require(document["tolerance"] as? Double)
        let cases = try #require(document["cases"] as? [[String: Any]])
        #expect(!cases.isEmpty)
        let model = try Model(contentsOf: Fixtures.path("Parity/\(modelName)"), configuration: ModelConfiguration(threads: 1))
        #expect(model.summary.modelType == document["kind"] as? String)
        let parser = PredictionInputs(model: model)
        for (index, testCase) in cases.enumerated() {
            let inputs = try parser.parse(object: try #require(testCase["inputs"]))
            let expected = try #require(testCase["outputs"] as? [String: Any])
            let outputs = try model.prediction(from: inputs)
            for (name, want) in expected {
                let got = try #require(outputs[name], "case \(index): no output \"\(name)\"")
                let mismatch = ParityComparison.difference(got, want, tolerance: tolerance)
                #expect(mismatch == nil, "case \(index) output \"\(name)\": \(mismatch ?? "")")
            }
        }
    }
}

/// Compares a computed feature value with the JSON a reference engine wrote.
enum ParityComparison {
    /// `nil` when equal within `tolerance`, else what differs.
    static func difference(_ got: FeatureValue, _ want: Any, tolerance: Double) -> String? {
        switch got {
        case .string(let text):
            return text == want as? String ? nil : "got \"\(text)\", want \(want)"
        case .int64(let number):
            guard let expected = (want as? NSNumber)?.doubleValue else { return "got \(number), want \(want)" }
            return Double(number) == expected ? nil : "got \(number), want \(expected)"
        case .double(let number):
            return numbers([number], flatten(want), tolerance: tolerance)
        case .multiArray(let array):
            let expected = flatten(want)
            guard shape(want) == array.shape || expected.count == array.count else {
                return "got shape \(array.shape), want \(shape(want))"
            }
            return numbers(array.doubles, expected, tolerance: tolerance)
        case .dictionary(let dictionary):
            guard let object = want as? [String: Any] else { return "got a dictionary, want \(want)" }
            let entries: [String: Double] = switch dictionary {
            case .strings(let values): values
            case .int64s(let values): Dictionary(uniqueKeysWithValues: values.map { (String($0.key), $0.value) })
            }
            guard Set(entries.keys) == Set(object.keys) else {
                return "got keys \(entries.keys.sorted()), want \(object.keys.sorted())"
            }
            for key in object.keys.sorted() {
                if let problem = numbers([entries[key] ?? .nan], flatten(object[key] ?? NSNull()), tolerance: tolerance) {
                    return "key \"\(key)\": \(problem)"
                }
            }
            return nil
        case .sequence(let sequence):
            // In order, element by element: item ids (strings or int64s).
            guard let expected = want as? [Any] else { return "got a sequence, want \(want)" }
            let texts: [String] = switch sequence {
            case .strings(let values): values
            case .int64s(let values): values.map(String.init)
            }
            let wanted = expected.map { ($0 as? String) ?? ($0 as? NSNumber).map { String($0.int64Value) } ?? "\($0)" }
            return texts == wanted ? nil : "got \(texts), want \(wanted)"
        case .image:
            return "unexpected \(got.kindText)"
        }
    }

    private static func numbers(_ got: [Double], _ want: [Double], tolerance: Double) -> String? {
        guard got.count == want.count else { return "got \(got.count) values, want \(want.count)" }
        for (index, (g, w)) in zip(got, want).enumerated() {
            if g.isNaN && w.isNaN { continue }
            if !(abs(g - w) <= tolerance * max(1, abs(w))) {
                return "element \(index): got \(g), want \(w) (tolerance \(tolerance))"
            }
        }
        return nil
    }

    private static func flatten(_ json: Any) -> [Double] {
        if let array = json as? [Any] { return array.flatMap(flatten) }
        if json is NSNull { return [.nan] }
        return [(json as? NSNumber)?.doubleValue ?? .nan]
    }

    private static func shape(_ json: Any) -> [Int] {
        guard let array = json as? [Any] else { return [] }
        return [array.count] + (array.first.map(shape) ?? [])
    }
}
