import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// Programs whose operations hold parameter values their MIL definitions do
/// not allow, or modes modelc does not run (Fixtures/Parity/TensorOps/BadParameters,
/// made by Fixtures/tensor_op_cases.py, which writes the values into files the
/// builder would have refused): each is refused at load with one line naming
/// the operation and the parameter — exit 94 for what modelc does not run,
/// 76 for what no valid program holds — never run and never a crash.
@Suite("The tensor engine refuses bad parameters, naming the operation and the parameter")
struct BadParameterTests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        let name: String
        let exitCode: Int
        let message: String
        let operation: String
        let parameter: String
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = {
        let path = Fixtures.path("Parity/TensorOps/BadParameters/refusals.json")
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: [String: Any]] else { return [] }
        return object.keys.sorted().compactMap { name in
            guard let entry = object[name], let exitCode = entry["exit"] as? Int, let message = entry["message"] as? String,
                  let operation = entry["operation"] as? String, let parameter = entry["parameter"] as? String else { return nil }
            return Refusal(name: name, exitCode: exitCode, message: message, operation: operation, parameter: parameter)
        }
    }()

    /// Whether `word` appears in `text` as a word (not inside another: `shape` in `reshape` does not count).
    static func namesWord(_ text: String, _ word: String) -> Bool {
        let characters = Array(text), target = Array(word)
        guard target.count <= characters.count else { return false }
        func isNamePart(_ character: Character) -> Bool { character.isLetter || character.isNumber || character == "_" }
        for start in 0...(characters.count - target.count) where Array(characters[start..<(start + target.count)]) == target {
            let before = start == 0 || !isNamePart(characters[start - 1])
            let end = start + target.count
            if before && (end == characters.count || !isNamePart(characters[end])) { return true }
        }
        return false
    }

    @Test("there are bad parameters to check")
    func fixturesExist() {
        #expect(Self.refusals.count >= 55)
    }

    @Test("each bad parameter is refused at load, naming the operation and the parameter", arguments: refusals)
    func refusal(_ refusal: Refusal) throws {
        let path = Fixtures.path("Parity/TensorOps/BadParameters/\(refusal.name).mlpackage")
        do {
            _ = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
            Issue.record("\(refusal.name) was accepted")
        } catch {
            #expect(error.description == refusal.message)
            #expect(error.description.contains("\"\(refusal.operation)\""))
            #expect(Self.namesWord(error.description, refusal.parameter), "the message does not name \(refusal.parameter)")
            guard case .runtime(let runtime) = error else { Issue.record("not a runtime error: \(error)"); return }
            switch runtime {
            case .unsupportedLayer: #expect(refusal.exitCode == 94, "refused as not run (94): \(error)")
            case .invalidParameters: #expect(refusal.exitCode == 76, "refused as invalid (76): \(error)")
            default: Issue.record("refused as \(runtime), expected exit \(refusal.exitCode)")
            }
        }
    }
}
