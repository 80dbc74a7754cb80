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

    @Test func aStrongerPenaltyGivesSmallerWeights() {
        let training = Self.blobs(count: 120, width: 4, seed: 3)
        let weak = LogisticRegression(l2: 0.0001, maxIterations: 300).fit(training, classes: 3)
        let strong = LogisticRegression(l2: 1, maxIterations: 300).fit(training, classes: 3)
        func norm(_ fit: LogisticRegression.Fit) -> Double { fit.weights.joined().reduce(0) { $0 + $1 * $1 } }
        #expect(norm(strong) < norm(weak))
        #expect(strong.loss > weak.loss)
    }
}
