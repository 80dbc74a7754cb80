import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// Programs the tensor engine refuses, each with the one line it must give
/// (Fixtures/Parity/TensorOps/Refused, made by Fixtures/tensor_ops.py): an
/// operation or parameter it does not run at load (exit 94) — internal ones
/// only its own passes make (`fused_linear`, `max_pool`'s `channels_last`)
/// included — and an index outside its axis at prediction (exit 93).
@Suite("The tensor engine refuses what it cannot run, naming it")
struct RefusalTests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        let name: String
        let when: String
        let message: String
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = {
        let path = Fixtures.path("Parity/TensorOps/Refused/refusals.json")
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: [String: String]] else { return [] }
        return object.keys.sorted().map { Refusal(name: $0, when: object[$0]?["when"] ?? "", message: object[$0]?["message"] ?? "") }
    }()

    @Test("there are refusals to check")
    func fixturesExist() {
        #expect(Self.refusals.count == 7)
    }

    @Test("each refusal gives its message", arguments: refusals)
    func refusal(_ refusal: Refusal) throws {
        let path = Fixtures.path("Parity/TensorOps/Refused/\(refusal.name).mlpackage")
        let configuration = ModelConfiguration(threads: 1)
        if refusal.when == "load" {
            do {
                _ = try Model(contentsOf: path, configuration: configuration)
                Issue.record("\(refusal.name) was accepted")
            } catch {
                #expect(error.description == refusal.message)
                guard case .runtime(let runtime) = error else { Issue.record("not a runtime error: \(error)"); return }
                switch runtime {
                case .unsupportedLayer: break
                default: Issue.record("refused as \(runtime), expected an unsupported operation or parameter (exit 94)")
                }
            }
            return
        }
        let model = try Model(contentsOf: path, configuration: configuration)
        let inputs: [String: FeatureValue] = [
            "x": .multiArray(MultiArray([Double](repeating: 1, count: 12), shape: [4, 3], dataType: .float32)),
            "i": .multiArray(MultiArray([1, 7], shape: [2], dataType: .int32)),
        ]
        #expect(throws: RuntimeError.invalidValue(feature: "y", detail: "index 7 is outside an axis of size 4")) {
            _ = try model.prediction(from: inputs)
        }
        do {
            _ = try model.prediction(from: inputs)
        } catch {
            #expect(error.description == refusal.message)
        }
        // Negative indices count from the end.
        let wrapped = try model.prediction(from: ["x": inputs["x"] ?? .double(0),
                                                  "i": .multiArray(MultiArray([-1, 0], shape: [2], dataType: .int32))])
        #expect(wrapped["y"]?.multiArrayValue?.shape == [2, 3])
    }
}
