import CLBFGS
import COpenBLAS
import Foundation

/// Multinomial logistic regression with an L2 penalty, fitted by L-BFGS
/// (liblbfgs).
///
/// The objective is the mean cross-entropy of the training rows plus
/// `λ/2 · ‖W‖²` (the intercepts are not penalized): scikit-learn's
/// `LogisticRegression(C:)` with `C = 1 / (λ · rows)`. Features are
/// standardized for the fit (zero mean, unit variance over the training rows);
/// the returned weights apply to the raw features. Starting from zero weights,
/// the fit is deterministic: the same rows give the same bits.
public struct LogisticRegression: Sendable {
    /// What one L-BFGS iteration reached.
    public struct Iteration: Sendable, Equatable {
        public var number: Int
        /// The objective (mean cross-entropy plus the penalty).
        public var loss: Double
        public var trainingAccuracy: Double
        /// `nil` without validation rows.
        public var validationAccuracy: Double?
        /// The mean cross-entropy of the validation rows (no penalty); `nil`
        /// without validation rows.
        public var validationLoss: Double?

        public init(number: Int, loss: Double, trainingAccuracy: Double, validationAccuracy: Double? = nil,
                    validationLoss: Double? = nil) {
            self.number = number
            self.loss = loss
            self.trainingAccuracy = trainingAccuracy
            self.validationAccuracy = validationAccuracy
            self.validationLoss = validationLoss
        }
    }

    /// Rows of features: `count` rows of `width` values, row after row.
    public struct Rows: Sendable {
        public var values: [Float]
        public var labels: [Int]
        public let width: Int

        public init(width: Int, values: [Float] = [], labels: [Int] = []) {
            self.width = width
            self.values = values
            self.labels = labels
        }

        public var count: Int { labels.count }

        public mutating func append(_ row: [Float], label: Int) {
            precondition(row.count == width, "a row of \(row.count) values in rows of \(width)")
            values += row
            labels.append(label)
        }
    }

    public var l2: Double
    public var maxIterations: Int

    public init(l2: Double, maxIterations: Int) {
        self.l2 = l2
        self.maxIterations = maxIterations
    }

    /// The fitted model: per class a weight row over the raw features and an offset.
    public struct Fit: Sendable, Equatable {
        public var weights: [[Double]]
        public var offsets: [Double]
        public var iterations: Int
        public var loss: Double
        /// liblbfgs's stopping reason.
        public var status: String

        /// The class scores (logits) of one row.
        public func scores(_ row: ArraySlice<Float>) -> [Double] {
            zip(weights, offsets).map { weight, offset in
                var sum = offset
                for (w, x) in zip(weight, row) { sum += w * Double(x) }
                return sum
            }
        }

        /// The class probabilities of one row (softmax of the scores).
        public func probabilities(_ row: ArraySlice<Float>) -> [Double] {
            let s = scores(row)
            let top = s.max() ?? 0
            let exponentials = s.map { exp($0 - top) }
            let sum = exponentials.reduce(0, +)
            return exponentials.map { $0 / sum }
        }

        /// The most probable class of one row (the first on a tie).
        public func predict(_ row: ArraySlice<Float>) -> Int {
            let s = scores(row)
            return s.indices.max { s[$0] < s[$1] || (s[$0] == s[$1] && $0 > $1) } ?? 0
        }
    }

    /// Fits `classes` classes to `training`; `progress` is told each iteration
    /// (with the accuracy on `validation` when given).
    public func fit(_ training: Rows, classes: Int, validation: Rows? = nil,
                    progress: (Iteration) -> Void = { _ in }) -> Fit {
        withoutActuallyEscaping(progress) { progress in
            let problem = Problem(training: training, classes: classes, l2: l2, validation: validation, progress: progress)
            return withExtendedLifetime(problem) { problem.solve(maxIterations: maxIterations) }
        }
    }
}

/// The state liblbfgs calls back into: standardized training rows and scratch buffers.
private final class Problem {
    let rows: Int
    let width: Int
    let classes: Int
    let l2: Double
    /// Standardized features, rows × width.
    var x: [Double]
    var mean: [Double]
    var scale: [Double]
    let labels: [Int]
    let validation: LogisticRegression.Rows?
    let progress: (LogisticRegression.Iteration) -> Void
    var logits: [Double]
    var residual: [Double]
    var lastAccuracy = 0.0
    var iterations = 0
    var lastLoss = 0.0

    init(training: LogisticRegression.Rows, classes: Int, l2: Double, validation: LogisticRegression.Rows?,
         progress: @escaping (LogisticRegression.Iteration) -> Void) {
        rows = training.count
        width = training.width
        self.classes = classes
        self.l2 = l2
        labels = training.labels
        self.validation = validation
        self.progress = progress
        mean = [Double](repeating: 0, count: width)
        scale = [Double](repeating: 1, count: width)
        x = training.values.map(Double.init)
        for row in 0..<rows {
            for column in 0..<width { mean[column] += x[row * width + column] }
        }
        let count = Double(max(rows, 1))
        for column in 0..<width { mean[column] /= count }
        var variance = [Double](repeating: 0, count: width)
        for row in 0..<rows {
            for column in 0..<width {
                let d = x[row * width + column] - mean[column]
                variance[column] += d * d
            }
        }
        for column in 0..<width {
            let deviation = (variance[column] / count).squareRoot()
            scale[column] = deviation > 1e-12 ? deviation : 1
        }
        for row in 0..<rows {
            for column in 0..<width { x[row * width + column] = (x[row * width + column] - mean[column]) / scale[column] }
        }
        logits = [Double](repeating: 0, count: rows * classes)
        residual = [Double](repeating: 0, count: rows * classes)
    }

    var parameterCount: Int { classes * width + classes }

    /// The objective at `w` and its gradient into `g`.
    func evaluate(_ w: UnsafePointer<Double>, _ g: UnsafeMutablePointer<Double>) -> Double {
        let n = Int32(rows), d = Int32(width), k = Int32(classes)
        // logits = X · Wᵀ
        x.withUnsafeBufferPointer { xs in
            logits.withUnsafeMutableBufferPointer { z in
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, d, 1, xs.baseAddress, d, w, d, 0, z.baseAddress, k)
            }
        }
        let bias = w + classes * width
        var loss = 0.0
        var correct = 0
        for row in 0..<rows {
            var best = -Double.infinity, bestClass = 0
            for c in 0..<classes {
                let z = logits[row * classes + c] + bias[c]
                logits[row * classes + c] = z
                if z > best { best = z; bestClass = c }
            }
            if bestClass == labels[row] { correct += 1 }
            var sum = 0.0
            for c in 0..<classes { sum += exp(logits[row * classes + c] - best) }
            let logSum = best + log(sum)
            loss += logSum - logits[row * classes + labels[row]]
            for c in 0..<classes {
                residual[row * classes + c] = exp(logits[row * classes + c] - logSum) - (c == labels[row] ? 1 : 0)
            }
        }
        let inverse = 1 / Double(max(rows, 1))
        // G = Rᵀ · X / n + λ W
        for index in 0..<(classes * width) { g[index] = l2 * w[index] }
        residual.withUnsafeBufferPointer { r in
            x.withUnsafeBufferPointer { xs in
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, d, n, inverse, r.baseAddress, k, xs.baseAddress, d, 1, g, d)
            }
        }
        var penalty = 0.0
        for index in 0..<(classes * width) { penalty += w[index] * w[index] }
        for c in 0..<classes {
            var sum = 0.0
            for row in 0..<rows { sum += residual[row * classes + c] }
            g[classes * width + c] = sum * inverse
        }
        lastAccuracy = Double(correct) * inverse
        return loss * inverse + 0.5 * l2 * penalty
    }

    /// The fit in raw-feature terms.
    func unstandardized(_ w: UnsafePointer<Double>) -> (weights: [[Double]], offsets: [Double]) {
        var weights: [[Double]] = []
        var offsets: [Double] = []
        for c in 0..<classes {
            var row = [Double](repeating: 0, count: width)
            var offset = w[classes * width + c]
            for column in 0..<width {
                row[column] = w[c * width + column] / scale[column]
                offset -= row[column] * mean[column]
            }
            weights.append(row)
            offsets.append(offset)
        }
        return (weights, offsets)
    }

    func reportProgress(_ w: UnsafePointer<Double>, loss: Double, iteration: Int) {
        iterations = iteration
        lastLoss = loss
        var validationAccuracy: Double?
        var validationLoss: Double?
        if let validation, validation.count > 0 {
            let fit = unstandardized(w)
            let model = LogisticRegression.Fit(weights: fit.weights, offsets: fit.offsets, iterations: iteration, loss: loss, status: "")
            var correct = 0
            var crossEntropy = 0.0
            for row in 0..<validation.count {
                let values = validation.values[(row * width)..<((row + 1) * width)]
                if model.predict(values) == validation.labels[row] { correct += 1 }
                let scores = model.scores(values)
                let top = scores.max() ?? 0
                let logSum = top + log(scores.reduce(0) { $0 + exp($1 - top) })
                crossEntropy += logSum - scores[validation.labels[row]]
            }
            validationAccuracy = Double(correct) / Double(validation.count)
            validationLoss = crossEntropy / Double(validation.count)
        }
        progress(LogisticRegression.Iteration(number: iteration, loss: loss, trainingAccuracy: lastAccuracy,
                                              validationAccuracy: validationAccuracy, validationLoss: validationLoss))
    }

    func solve(maxIterations: Int) -> LogisticRegression.Fit {
        let n = parameterCount
        guard let w = lbfgs_malloc(Int32(n)) else { fatalError("out of memory") }
        defer { lbfgs_free(w) }
        for index in 0..<n { w[index] = 0 }
        var parameters = lbfgs_parameter_t()
        lbfgs_parameter_init(&parameters)
        parameters.max_iterations = Int32(max(1, maxIterations))
        parameters.epsilon = 1e-5
        var loss = 0.0
        let instance = Unmanaged.passUnretained(self).toOpaque()
        let status = lbfgs(Int32(n), w, &loss, { instance, w, g, _, _ in
            guard let instance, let w, let g else { return 0 }
            return Unmanaged<Problem>.fromOpaque(instance).takeUnretainedValue().evaluate(w, g)
        }, { instance, w, _, fx, _, _, _, _, k, _ in
            guard let instance, let w else { return 0 }
            Unmanaged<Problem>.fromOpaque(instance).takeUnretainedValue().reportProgress(w, loss: fx, iteration: Int(k))
            return 0
        }, instance, &parameters)
        let fit = unstandardized(w)
        return LogisticRegression.Fit(weights: fit.weights, offsets: fit.offsets, iterations: iterations,
                                      loss: iterations > 0 ? lastLoss : loss, status: Self.describe(status))
    }

    static func describe(_ status: Int32) -> String {
        switch Int(status) {
        case LBFGS_SUCCESS: "converged"
        case LBFGS_ALREADY_MINIMIZED: "already minimal"
        case LBFGSERR_MAXIMUMITERATION: "maximum iterations reached"
        case LBFGSERR_ROUNDING_ERROR: "converged to rounding precision"
        case LBFGSERR_MAXIMUMLINESEARCH, LBFGSERR_MINIMUMSTEP: "stopped: the line search made no progress"
        default: "stopped (liblbfgs status \(status))"
        }
    }
}
