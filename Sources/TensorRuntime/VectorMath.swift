import CVectorMath

/// Elementwise functions where oneDNN's kernel is slow, written in C as
/// loops the compiler vectorizes (`Sources/CVectorMath`). oneDNN 2.6's AVX2
/// `gelu_tanh` (and `tanh`) took 0.63–0.73 ms for 64 × 3,072 values on one
/// thread, the same function with Swift's `SIMD8<Float>` 0.53–0.63 ms (its
/// clamps and selects were not vectorized), the C loop 0.16 ms.
enum VectorMath {
    /// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, GELU's tanh
    /// approximation, in place over `count` values, computed as
    /// `x / (1 + e^(−2u))` (`0.5 (1 + tanh u)` is the logistic function of `2u`).
    static func geluTanh(_ values: UnsafeMutablePointer<Float>, count: Int) {
        modelc_gelu_tanh(values, count)
    }

    /// `x / (1 + e^(−x))`, SiLU, in place over `count` values.
    static func silu(_ values: UnsafeMutablePointer<Float>, count: Int) {
        modelc_silu(values, count)
    }

    /// Softmax of each of `rows` rows of `columns` values, in place (a masked column weighs exactly 0, a fully masked row is NaN).
    static func softmaxRows(_ values: UnsafeMutablePointer<Float>, rows: Int, columns: Int) {
        modelc_softmax_rows(values, rows, columns)
    }
}
