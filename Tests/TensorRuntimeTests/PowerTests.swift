import Foundation
import Testing
@testable import TensorRuntime

/// `pow` as a planned operation: a constant exponent of 2 (an RMS norm's
/// square) is computed as one multiplication, x² correctly rounded (float64's
/// square rounded once; glibc's `powf` is 1 ulp off for some, 34.39 among
/// them), the special values as `powf` gives them; other exponents and a
/// tensor of exponents keep `powf`.
@Suite("pow")
struct PowerTests {
    static let inputs: [Float] = stride(from: -40.0, through: 40.0, by: 0.173).map { Float($0) }
        + [0, -0, 1e-30, -1e-30, 1e19, -1e19, 3e38, -3e38, .leastNonzeroMagnitude, .infinity, -.infinity, .nan]

    /// pow(x, exponent) planned with the exponent as a constant of `exponentShape`.
    static func run(exponent: [Float], exponentShape: [Int]) throws -> [Float] {
        let shape = [Self.inputs.count]
        let y = Tensor(floats: exponent, shape: exponentShape)
        let block = GraphBlock(operations: [
            GraphOperation(type: "pow", arguments: ["x": [.value("x")], "y": [.constant(y)]],
                           outputs: [ConvolutionThreadingTests.value("p", shape)], blocks: []),
        ], outputs: ["p"], constants: [:])
        let function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", shape)], block: block)
        return try PlannedRun(function, input: Self.inputs, shape: shape, threads: 1).floats("p")
    }

    @Test("pow(x, 2) is x² correctly rounded; pow(x, 3) and pow(x, 0.5) equal powf bit for bit; NaN where powf gives NaN",
          arguments: [Float(2), 3, 0.5])
    func scalarExponent(exponent: Float) throws {
        let got = try Self.run(exponent: [exponent], exponentShape: [])
        for (x, value) in zip(Self.inputs, got) {
            let want = exponent == 2 && x.isFinite ? Float(Double(x) * Double(x)) : Foundation.pow(x, exponent)
            #expect(want.isNaN ? value.isNaN : value.bitPattern == want.bitPattern, "pow(\(x), \(exponent)) = \(value), powf \(want)")
        }
    }

    @Test("exponents given as a tensor (2 among them) are powf's")
    func tensorExponent() throws {
        let exponents = Self.inputs.indices.map { Float($0 % 3 == 0 ? 2 : 1.5) }
        let got = try Self.run(exponent: exponents, exponentShape: [exponents.count])
        for (index, x) in Self.inputs.enumerated() {
            let want = Foundation.pow(x, exponents[index])
            #expect(want.isNaN ? got[index].isNaN : got[index].bitPattern == want.bitPattern)
        }
    }
}
