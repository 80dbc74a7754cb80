import FixtureSupport
import Foundation
import ModelCompiler
import ModelRuntime
import Testing

/// A source model is validated when it is opened to run, as compiling it
/// validates it: one that breaks a rule is refused with the diagnostics
/// `CompileError.invalid` lists (Fixtures/Broken, made by Fixtures/generate.py).
@Suite("Source models are validated at load, as compiled ones are")
struct SourceValidationTests {
    @Test("an invalid source model is refused with the compiler's diagnostics, in one line",
          arguments: ["wrong-weight-count", "undefined-layer-input", "duplicate-output"])
    func invalidSourceRefused(name: String) throws {
        let path = Fixtures.path("Broken/\(name).mlmodel")
        let output = try Fixtures.temporaryDirectory("source-validation").appendingPathComponent("m.mlmodelc").path
        let compiled: CompileError
        do {
            _ = try BundleCompiler().compile(path, to: output)
            Issue.record("\(name) was compiled")
            return
        } catch {
            compiled = error
        }
        guard case .invalid(let compiledPath, let diagnostics) = compiled else {
            Issue.record("compile refused \(name) as \(compiled), not as invalid")
            return
        }
        #expect(throws: ModelError.invalid(path: compiledPath, diagnostics: diagnostics)) {
            _ = try Model(contentsOf: path)
        }
        do {
            _ = try Model(contentsOf: path)
        } catch {
            #expect(error.description == "\(path): 1 validation error: \(diagnostics.map(\.description).joined())")
            #expect(!error.description.contains("\n"))
        }
    }
}
