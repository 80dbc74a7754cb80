import Foundation

/// The logistic function, 1 / (1 + e^-x), computed without overflow.
@inline(__always) func sigmoid(_ x: Double) -> Double {
    x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x))
}

/// The standard normal distribution function Φ(x).
@inline(__always) func normalCDF(_ x: Double) -> Double {
    0.5 * erfc(-x / 2.0.squareRoot())
}

/// The softmax of `values`, shifted by the maximum for stability.
func softmax(_ values: [Double]) -> [Double] {
    guard let largest = values.max() else { return [] }
    let exps = values.map { exp($0 - largest) }
    let sum = exps.reduce(0, +)
    return exps.map { $0 / sum }
}
