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

    @Test("matrix products split over 2 and 3 threads", arguments: files.filter { $0.name.hasSuffix("fp32") }, [2, 3])
    func threaded(_ file: ParityFile, threads: Int) throws {
        try file.check(threads: threads)
    }
}
