import ModelRuntime
import Testing

/// The ML programs of Fixtures/Parity/Networks (NumPy float64 and
/// onnxruntime references) run on the tensor engine alone, from the source
/// package and compiled.
@Suite("ML programs on the tensor engine agree with NumPy and onnxruntime")
struct TensorEngineParityTests {
    static let files = ParityFile.all(in: "Networks").filter { $0.name.hasPrefix("Networks/program_") }

    @Test("the program fixtures are there")
    func fixturesExist() {
        #expect(Self.files.count >= 10)
    }

    @Test("source package", arguments: files)
    func source(_ file: ParityFile) throws {
        try file.check()
    }

    @Test("compiled bundle, two predictions at once", arguments: files)
    func compiled(_ file: ParityFile) throws {
        try file.check(compiled: true, concurrently: 2)
    }
}
