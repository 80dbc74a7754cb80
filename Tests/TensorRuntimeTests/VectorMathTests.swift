import Foundation
import Testing
@testable import TensorRuntime

/// `VectorMath`'s vectorized GELU (tanh form, through its own `e^x`) against
/// the same function in float64 (Foundation's libm), over a range whose
/// exponents reach both ends of the float range, every length up to two
/// vectors (the loop's remainder), and the values at the edges.
@Suite("Vectorized GELU, SiLU and softmax")
struct VectorMathTests {
    /// -100 … 100 in steps that hit no grid, then the edges.
    static let inputs: [Float] = stride(from: -100.0, through: 100.0, by: 0.0371).map { Float($0) }
        + [0, -0, 1e-30, -1e-30, 87.3, 88.3, -87.3, 89, -90, 1e6, -1e6, .infinity, -.infinity]

    /// `loop` over every length up to two vectors (short runs around 0, where the functions bend) and over every
    /// finite input, each value within 1e-6 of max(1, |float64's|); then the special values, as `loop` leaves them.
    static func sweep(_ name: String, _ loop: (UnsafeMutablePointer<Float>, Int) -> Void, reference: (Double) -> Double) -> [Float] {
        let finite = inputs.filter(\.isFinite)
        for count in Array(0...17) + [finite.count] {
            let source = count == finite.count ? finite : Array(finite[(finite.count / 2 - 8)...].prefix(count))
            var values = source
            values.withUnsafeMutableBufferPointer { buffer in
                if let base = buffer.baseAddress { loop(base, buffer.count) }
            }
            for (x, got) in zip(source, values) {
                let want = reference(Double(x))
                #expect(abs(Double(got) - want) <= 1e-6 * max(1, abs(want)), "\(name)(\(x)) = \(got), float64 \(want)")
            }
        }
        var special: [Float] = [.nan, .infinity, -.infinity, 0, -0]
        special.withUnsafeMutableBufferPointer { loop($0.baseAddress!, $0.count) }
        return special
    }

    @Test("GELU's tanh form is float64's within 1e-6 of max(1, |value|), for every length up to two vectors and a long one")
    func geluTanh() {
        let special = Self.sweep("gelu", { VectorMath.geluTanh($0, count: $1) }) { v in
            0.5 * v * (1 + Foundation.tanh((2 / Double.pi).squareRoot() * (v + 0.044715 * v * v * v)))
        }
        #expect(special[0].isNaN)
        #expect(special[1] == .infinity)
        #expect(special[2].isNaN, "−∞ · (1 + tanh(−∞)) / 2 is NaN, as in float64: \(special[2])")
        #expect(special[3] == 0 && special[4] == 0)
    }

    @Test("SiLU is float64's x / (1 + e^−x) within 1e-6 of max(1, |value|), for every length up to two vectors and a long one")
    func silu() {
        let special = Self.sweep("silu", { VectorMath.silu($0, count: $1) }) { v in v / (1 + Foundation.exp(-v)) }
        #expect(special[0].isNaN)
        #expect(special[1] == .infinity)
        #expect(special[2].isNaN, "−∞ / (1 + e^∞) is NaN, as in float64 and PyTorch (−∞ · sigmoid(−∞)): \(special[2])")
        #expect(special[3] == 0 && special[4] == 0)
    }

    @Test("softmax rows are float64's within 1e-6 for every row length up to three vectors and a long one; a masked column weighs exactly 0, a fully masked row is NaN")
    func softmaxRows() {
        for columns in Array(1...24) + [428] {
            let rows = 3
            var values = (0..<(rows * columns)).map { Float(sin(Double($0) * 0.73) * 9) }
            // Row 1 has every third column masked; row 2 holds one very large value.
            for column in stride(from: 1, to: columns, by: 3) { values[columns + column] = -.infinity }
            values[2 * columns + columns / 2] = 80
            let source = values
            values.withUnsafeMutableBufferPointer { VectorMath.softmaxRows($0.baseAddress!, rows: rows, columns: columns) }
            for row in 0..<rows {
                let line = source[(row * columns)..<((row + 1) * columns)].map(Double.init)
                let top = line.max() ?? 0
                let exps = line.map { Foundation.exp($0 - top) }
                let sum = exps.reduce(0, +)
                for column in 0..<columns {
                    let got = values[row * columns + column], want = exps[column] / sum
                    #expect(abs(Double(got) - want) <= 1e-6, "row \(row) of \(columns), column \(column): \(got), float64 \(want)")
                    if line[column] == -.infinity { #expect(got == 0, "a masked column: \(got)") }
                }
            }
        }
        var masked: [Float] = [-.infinity, -.infinity, -.infinity, -.infinity, -.infinity, -.infinity, -.infinity, -.infinity, -.infinity]
        masked.withUnsafeMutableBufferPointer { VectorMath.softmaxRows($0.baseAddress!, rows: 1, columns: $0.count) }
        #expect(masked.allSatisfy { $0.isNaN }, "a fully masked row is NaN, as float64's 0 / 0: \(masked)")
    }

    @Test("a gelu operation in its tanh form runs the loop, in blocks on 2 and 3 threads, and equals float64's", arguments: [1, 2, 3])
    func standaloneGELU(threads: Int) throws {
        let shape = [3, 17_000]
        let count = shape.reduce(1, *)
        let block = GraphBlock(operations: [
            GraphOperation(type: "gelu", arguments: ["x": [.value("x")],
                                                     "mode": [.constant(Tensor(type: .string, shape: [], storage: .strings(["TANH_APPROXIMATION"])))]],
                           outputs: [ConvolutionThreadingTests.value("g", shape)], blocks: []),
        ], outputs: ["g"], constants: [:])
        let function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", shape)], block: block)
        let input = (0..<count).map { Float(($0 * 37) % 1_001) * 0.012 - 6 }
        let run = try PlannedRun(function, input: input, shape: shape, threads: threads)
        let step = try #require(run.plan.steps.first { $0.kind == "gelu" })
        #expect(step.split == (threads > 1 ? "\(threads) blocks" : nil))
        let got = try run.floats("g")
        let worst = zip(got, input).map { value, x in
            let x = Double(x), want = 0.5 * x * (1 + tanh((2 / Double.pi).squareRoot() * (x + 0.044715 * x * x * x)))
            return abs(Double(value) - want) / max(1, abs(want))
        }.max() ?? .infinity
        #expect(worst <= 1e-6, "\(threads) threads: worst difference \(worst)")
    }
}
