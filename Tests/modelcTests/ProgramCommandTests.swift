import FixtureSupport
import Foundation
import Testing

/// `modelc predict` on ML programs the tensor engine runs: functions by name
/// (exit 106 for one the program lacks), engines by name, flexible shapes
/// (exit 93 naming the input, the shape and the shapes allowed).
@Suite("modelc predict: program functions, engines and flexible shapes")
struct ProgramCommandTests {
    let cache = FileManager.default.temporaryDirectory.appendingPathComponent("program-command-\(UUID().uuidString)")

    func predict(_ arguments: [String]) throws -> ModelcProcess.Result {
        try ModelcProcess.run(["predict"] + arguments, environment: ["MODELC_CACHE": cache.path])
    }

    static let image = "x=" + String(describing: [[[[Double]]]](repeating: [[[Double]]](repeating: [[Double]](repeating: [0.1, 0.2, 0.3, 0.4], count: 4),
                                                                                            count: 32), count: 1))

    @Test("--function runs each function; an unknown one exits 106 naming the functions")
    func functions() throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        let model = Fixtures.path("Models/MultiFunctionProgram.mlpackage")
        for function in ["main", "palettized"] {
            let result = try predict([model, "--function", function, "--input", Self.image, "--json"])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.hasPrefix("{\"outputs\": {\"probs\": [["))
        }
        let unknown = try predict([model, "--function", "nope", "--input", Self.image])
        #expect(unknown.status == 106)
        #expect(unknown.standardError == "modelc: error: the model has no function \"nope\" (it has main, palettized)\n")
    }

    /// One engine is left: every `--engine` value runs the tensor engine;
    /// `layer` (once the layer engine, which refused this transformer with
    /// exit 94) is deprecated and says so on one line of standard error.
    @Test("--engine auto, tensor and the deprecated layer all run the tensor engine; layer warns once")
    func engines() throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        let model = Fixtures.path("Parity/Zoo/gpt2_fp32.mlpackage")
        let tensor = try predict([model, "--engine", "tensor", "--input", "input_ids=[[5, 6, 7]]", "--json"])
        #expect(tensor.status == 0, "\(tensor.standardError)")
        #expect(tensor.standardError.isEmpty)
        let automatic = try predict([model, "--input", "input_ids=[[5, 6, 7]]", "--json"])
        #expect(automatic.standardOutput == tensor.standardOutput)
        let layer = try predict([model, "--engine", "layer", "--input", "input_ids=[[5, 6, 7]]", "--json"])
        #expect(layer.status == 0, "\(layer.standardError)")
        #expect(layer.standardOutput == tensor.standardOutput)
        #expect(layer.standardError == "modelc: warning: --engine layer is deprecated: the layer engine was removed; the tensor engine runs the model\n")
        #expect(try predict([model, "--engine", "fast", "--input", "input_ids=[[5]]"]).status == 64)
        #expect(try predict([model, "--engine", "automatic", "--input", "input_ids=[[5]]"]).status == 64)
    }

    @Test("a sequence outside the flexible range exits 93 naming the input, the shape and the range")
    func flexibleShapes() throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        let model = Fixtures.path("Parity/Zoo/bert_fp32.mlpackage")
        let tokens = "[[" + (0..<65).map { String($0 % 90) }.joined(separator: ", ") + "]]"
        let result = try predict([model, "--input", "input_ids=\(tokens)"])
        #expect(result.status == 93)
        #expect(result.standardError == "modelc: error: input \"input_ids\" has shape 1 × 65, expected 1 × 1...64\n")
        let longest = "[[" + (0..<64).map { String($0 % 90) }.joined(separator: ", ") + "]]"
        #expect(try predict([model, "--input", "input_ids=\(longest)", "--json"]).status == 0)
    }
}
