import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// Every neural-network fixture run on the tensor engine through the
/// lowering (`engine: .tensor`), with the tolerances and shape checks the
/// layer engine's tests use: NumPy float64 and onnxruntime references.
@Suite("Neural networks lowered onto the tensor engine agree with NumPy and onnxruntime")
struct NetworkLoweringTests {
    /// The neural networks (and pipelines holding them) of Fixtures/Parity/Networks.
    static let networks = ParityFile.all(in: "Networks").filter { !$0.name.hasPrefix("Networks/program_") }
    /// The neural-network regressions of Fixtures/Parity/Regressions (shapes checked exactly).
    static let regressions = ParityFile.all(in: "Regressions").filter { $0.name.hasPrefix("Regressions/nn_") }
    /// Layers only the lowering runs (Fixtures/network_lowering.py), shapes checked exactly.
    static let lowered = ParityFile.all(in: "Lowering")

    @Test("the network fixtures are there")
    func fixturesExist() {
        #expect(Self.networks.count >= 20)
        #expect(Self.regressions.count >= 8)
    }

    @Test("network fixtures, from the source model", arguments: networks)
    func sourceNetwork(_ file: ParityFile) throws {
        try file.check(engine: .tensor)
    }

    @Test("network fixtures, from the compiled bundle, two predictions at once", arguments: networks)
    func compiled(_ file: ParityFile) throws {
        try file.check(compiled: true, concurrently: 2, engine: .tensor)
    }

    @Test("regression fixtures keep their shapes", arguments: regressions)
    func regression(_ file: ParityFile) throws {
        try file.check(exactShapes: true, engine: .tensor)
    }

    @Test("layers the layer engine refuses", arguments: lowered)
    func loweredLayer(_ file: ParityFile) throws {
        try file.check(exactShapes: true, engine: .tensor)
        try file.check(compiled: true, exactShapes: true, engine: .automatic)
    }
}
