import ModelRuntime
import Testing

/// The model zoo (Fixtures/Parity/Zoo, made by Scripts/zoo.py): torchvision
/// classification and segmentation models and Hugging Face transformers
/// architectures (text encoders and decoders, vision transformers, speech
/// encoders) with seeded weights, converted by ct.convert as fp32 and fp16
/// ML programs, neural networks and compressed programs, against PyTorch
/// float64. Tolerances are in each file: 1e-5 relative to max(1, |reference|)
/// for programs computing in fp32, compressed programs and neural networks;
/// 5e-3 for fp16 programs, whose weights and inputs are rounded to fp16
/// (fp16's rounding is 4.9e-4; modelc computes their operations in fp32), or
/// twice what that rounding alone moves PyTorch's float64 outputs where that
/// is more (MobileViT).
@Suite("Zoo models agree with PyTorch float64")
struct ZooParityTests {
    static let files = ParityFile.all(in: "Zoo")
    static let programs = files.filter { !$0.name.hasSuffix("_nn") }

    @Test("the zoo is there")
    func fixturesExist() {
        #expect(Self.files.count >= 83)
        #expect(Self.files.count - Self.programs.count >= 20)
    }

    /// Neural networks are lowered onto the tensor engine, which runs ML programs: one engine for both.
    @Test("every zoo model, ML programs and lowered neural networks", arguments: files)
    func automatic(_ file: ParityFile) throws {
        try file.check()
    }

    @Test("ML programs on the tensor engine", arguments: programs)
    func tensor(_ file: ParityFile) throws {
        try file.check(exactShapes: true)
    }

    @Test("matrix products split over 2 and 3 threads", arguments: programs.filter { $0.name.hasSuffix("fp32") }, [2, 3])
    func threaded(_ file: ParityFile, threads: Int) throws {
        try file.check(threads: threads)
    }
}
