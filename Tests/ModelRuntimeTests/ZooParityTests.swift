import ModelRuntime
import Testing

/// Hugging Face transformers architectures (BERT, DistilBERT, GPT-2, ViT)
/// from tiny configs, converted by ct.convert as fp32 and fp16 ML programs
/// (Fixtures/Parity/Zoo, made by Scripts/zoo.py) against PyTorch float64.
@Suite("Transformer programs agree with PyTorch float64")
struct ZooParityTests {
    static let files = ParityFile.all(in: "Zoo")

    @Test("the zoo is there")
    func fixturesExist() {
        #expect(Self.files.count >= 8)
    }

    @Test("as modelc chooses the engine", arguments: files)
    func automatic(_ file: ParityFile) throws {
        try file.check()
    }
}
