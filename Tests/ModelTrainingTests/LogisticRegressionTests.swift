import FixtureSupport
import Foundation
import ModelTraining
import Testing

@Suite struct LogisticRegressionTests {
    /// Three Gaussian blobs in `width` dimensions.
    static func blobs(count: Int, width: Int, seed: UInt64) -> LogisticRegression.Rows {
        var random = SplitMix(seed: seed)
        func unit() -> Double { Double(random.next() >> 11) * 0x1.0p-53 }
        var rows = LogisticRegression.Rows(width: width)
        for index in 0..<count {
            let label = index % 3
            let row = (0..<width).map { column -> Float in
                let center = column == label ? 3.0 : 0.0
                return Float(center + (unit() - 0.5) * 2 + 10)  // an offset the standardization removes
            }
            rows.append(row, label: label)
        }
        return rows
    }

    @Test func separatesBlobsAndIsDeterministic() {
        let training = Self.blobs(count: 300, width: 5, seed: 1)
        let validation = Self.blobs(count: 90, width: 5, seed: 2)
        let regression = LogisticRegression(l2: 0.001, maxIterations: 200)
        var iterations: [LogisticRegression.Iteration] = []
        let fit = regression.fit(training, classes: 3, validation: validation) { iterations.append($0) }
        #expect(fit.iterations == iterations.count)
        #expect(iterations.last?.validationAccuracy == 1)
        #expect(iterations.last?.trainingAccuracy == 1)
        #expect(zip(iterations, iterations.dropFirst()).allSatisfy { $1.loss <= $0.loss })
        #expect(regression.fit(training, classes: 3) == fit)
    }

    /// The validation loss each iteration reports is the mean cross-entropy
    /// of the validation rows, here recomputed in double from the final
    /// weights (log-sum-exp written out, not the fit's own code path).
    @Test func validationLossIsTheValidationCrossEntropy() throws {
        let training = Self.blobs(count: 120, width: 4, seed: 5)
        let validation = Self.blobs(count: 60, width: 4, seed: 6)
        var iterations: [LogisticRegression.Iteration] = []
        let fit = LogisticRegression(l2: 0.01, maxIterations: 15).fit(training, classes: 3, validation: validation) { iterations.append($0) }
        let last = try #require(iterations.last)
        var total = 0.0
        for row in 0..<validation.count {
            let x = validation.values[(row * 4)..<((row + 1) * 4)].map(Double.init)
            let z = (0..<3).map { c in fit.offsets[c] + zip(fit.weights[c], x).reduce(0) { $0 + $1.0 * $1.1 } }
            let top = z.max() ?? 0
            total -= z[validation.labels[row]] - top - log(z.reduce(0) { $0 + exp($1 - top) })
        }
        let expected = total / Double(validation.count)
        let reported = try #require(last.validationLoss)
        #expect(abs(reported - expected) <= 1e-9 * max(1, expected), "\(reported) vs \(expected)")
        #expect(iterations.allSatisfy { $0.validationLoss != nil })
        // The probabilities sum to 1 and their argmax is the prediction.
        let row = validation.values[0..<4]
        let probabilities = fit.probabilities(row)
        #expect(abs(probabilities.reduce(0, +) - 1) < 1e-12)
        #expect(probabilities.indices.max { probabilities[$0] < probabilities[$1] } == fit.predict(row))
        // Without validation rows there is no validation loss.
        var plain: [LogisticRegression.Iteration] = []
        _ = LogisticRegression(l2: 0.01, maxIterations: 3).fit(training, classes: 3) { plain.append($0) }
        #expect(plain.allSatisfy { $0.validationLoss == nil && $0.validationAccuracy == nil })
    }

    @Test func aStrongerPenaltyGivesSmallerWeights() {
        let training = Self.blobs(count: 120, width: 4, seed: 3)
        let weak = LogisticRegression(l2: 0.0001, maxIterations: 300).fit(training, classes: 3)
        let strong = LogisticRegression(l2: 1, maxIterations: 300).fit(training, classes: 3)
        func norm(_ fit: LogisticRegression.Fit) -> Double { fit.weights.joined().reduce(0) { $0 + $1 * $1 } }
        #expect(norm(strong) < norm(weak))
        #expect(strong.loss > weak.loss)
    }
}
