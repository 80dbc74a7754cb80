import Testing
@testable import TensorRuntime

/// `cast` to fp16 rounds without the conversion library calls for normal
/// values: it must round exactly as `Float16` does, everywhere.
@Suite("Rounding to fp16")
struct HalfRoundingTests {
    @Test("equals Float(Float16(x)) across fp16's range, its edges and ties")
    func matchesFloat16() {
        var values: [Float] = [0, -0, 1, -1, 65504, 65519, 65520, -65520, 0x1p-14, 0x1p-15, 0x1p-24, .infinity, -.infinity, 1e-8, 70000]
        // Every fp32 pattern around fp16's rounding points (ties included) in several binades.
        for exponent: UInt32 in [103, 110, 112, 113, 127, 130, 142, 143] {
            for mantissa in stride(from: UInt32(0), to: 1 << 23, by: 4093) {
                for sign: UInt32 in [0, 1] { values.append(Float(bitPattern: sign << 31 | exponent << 23 | mantissa)) }
            }
            for low: UInt32 in [0xFFF, 0x1000, 0x1001, 0x2FFF, 0x3000, 0x3001] { values.append(Float(bitPattern: exponent << 23 | low)) }
        }
        for value in values {
            #expect(ElementwiseOperations.roundedToHalf(value) == Float(Float16(value)), "\(value)")
        }
        #expect(ElementwiseOperations.roundedToHalf(.nan).isNaN)
    }
}
