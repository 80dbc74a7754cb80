import Foundation
import ModelFeatures
import ModelSpec

/// A generalized linear regressor: `transform(W·x + offset)` per target.
struct GLMRegressorEngine: PredictionEngine {
    let interface: ModelInterface
    let weights: [[Double]]
    let offsets: [Double]
    let transform: LinkFunction

    init(_ glm: GLMRegressorParameters, interface: ModelInterface) throws(RuntimeError) {
        self.interface = interface
        weights = glm.weights
        offsets = glm.offsets
        transform = glm.transform
        try LinearAlgebra.checkRows(weights, offsets: offsets, model: interface.kind)
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        try interface.require(x, count: weights.first?.count ?? 0)
        let values = zip(weights, offsets).map { row, offset -> Double in
            let score = LinearAlgebra.dot(row, x) + offset
            switch transform {
            case .none: return score
            case .logit: return sigmoid(score)
            case .probit: return normalCDF(score)
            }
        }
        guard let name = interface.primaryOutput else { return [:] }
        return [name: values.count == 1 ? .double(values[0]) : .multiArray(MultiArray(values, shape: [values.count]))]
    }
}

/// A generalized linear classifier: logistic or probit scores, one row for
/// a binary model (the first class is the reference), or one row per class
/// normalized to sum to one (one-vs-rest).
struct GLMClassifierEngine: PredictionEngine {
    let interface: ModelInterface
    let weights: [[Double]]
    let offsets: [Double]
    let probit: Bool
    let labels: ClassLabels

    init(_ glm: GLMClassifierParameters, interface: ModelInterface) throws(RuntimeError) {
        self.interface = interface
        weights = glm.weights
        offsets = glm.offsets
        probit = glm.transform == .probit
        labels = glm.classLabels ?? .strings([])
        try LinearAlgebra.checkRows(weights, offsets: offsets, model: interface.kind)
        let binary = weights.count == 1 && labels.count == 2
        guard binary || weights.count == labels.count else {
            throw .invalidParameters(model: interface.kind,
                                     detail: "\(weights.count) weight rows for \(labels.count) class labels")
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        try interface.require(x, count: weights.first?.count ?? 0)
        let scores = zip(weights, offsets).map { row, offset in
            let score = LinearAlgebra.dot(row, x) + offset
            return probit ? normalCDF(score) : sigmoid(score)
        }
        let probabilities: [Double]
        if scores.count == 1 {
            probabilities = [1 - scores[0], scores[0]]
        } else {
            let sum = scores.reduce(0, +)
            probabilities = sum > 0 ? scores.map { $0 / sum } : scores.map { _ in 1 / Double(scores.count) }
        }
        return interface.classifierOutputs(labels: labels, probabilities: probabilities)
    }
}

/// Small dense helpers shared by the linear models, SVMs and neighbours.
enum LinearAlgebra {
    @inline(__always)
    static func dot(_ a: [Double], _ b: [Double]) -> Double {
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                var sum = 0.0
                for index in 0..<min(a.count, b.count) { sum += a[index] * b[index] }
                return sum
            }
        }
    }

    @inline(__always)
    static func squaredDistance(_ a: UnsafeBufferPointer<Double>, _ b: [Double]) -> Double {
        b.withUnsafeBufferPointer { b in
            var sum = 0.0
            for index in 0..<min(a.count, b.count) {
                let difference = a[index] - b[index]
                sum += difference * difference
            }
            return sum
        }
    }

    /// Rows of one length, one offset per row.
    static func checkRows(_ rows: [[Double]], offsets: [Double], model: String) throws(RuntimeError) {
        guard let width = rows.first?.count, !rows.isEmpty else {
            throw .invalidParameters(model: model, detail: "no weights")
        }
        if let bad = rows.firstIndex(where: { $0.count != width }) {
            throw .invalidParameters(model: model, detail: "weight row \(bad) has \(rows[bad].count) values, row 0 has \(width)")
        }
        guard offsets.count == rows.count else {
            throw .invalidParameters(model: model, detail: "\(offsets.count) offsets for \(rows.count) weight rows")
        }
    }
}
