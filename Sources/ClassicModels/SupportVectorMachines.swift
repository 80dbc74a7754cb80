import Foundation
import ModelFeatures
import ModelSpec

/// An SVM kernel.
enum Kernel: Sendable {
    case linear
    case rbf(gamma: Double)
    case polynomial(degree: Int, gamma: Double, c: Double)
    case sigmoid(gamma: Double, c: Double)

    init(_ kernel: SupportVectorKernel?, model: String) throws(RuntimeError) {
        switch kernel {
        case nil: throw .invalidParameters(model: model, detail: "no kernel")
        case .linear?: self = .linear
        case .rbf(let gamma)?: self = .rbf(gamma: gamma)
        case .polynomial(let degree, let gamma, let c)?: self = .polynomial(degree: degree, gamma: gamma, c: c)
        case .sigmoid(let gamma, let c)?: self = .sigmoid(gamma: gamma, c: c)
        case .unset?: throw .invalidParameters(model: model, detail: "no kernel type set")
        }
    }

    /// K(support vector, x).
    @inline(__always)
    func callAsFunction(_ vector: UnsafeBufferPointer<Double>, _ x: [Double]) -> Double {
        switch self {
        case .linear: return Self.dot(vector, x)
        case .rbf(let gamma): return exp(-gamma * LinearAlgebra.squaredDistance(vector, x))
        case .polynomial(let degree, let gamma, let c): return Self.power(gamma * Self.dot(vector, x) + c, degree)
        case .sigmoid(let gamma, let c): return tanh(gamma * Self.dot(vector, x) + c)
        }
    }

    @inline(__always)
    private static func dot(_ a: UnsafeBufferPointer<Double>, _ b: [Double]) -> Double {
        b.withUnsafeBufferPointer { b in
            var sum = 0.0
            for index in 0..<min(a.count, b.count) { sum += a[index] * b[index] }
            return sum
        }
    }

    /// `base` to an integer power by squaring, as libsvm computes it.
    static func power(_ base: Double, _ exponent: Int) -> Double {
        var result = 1.0, factor = base, remaining = exponent
        while remaining > 0 {
            if remaining & 1 == 1 { result *= factor }
            factor *= factor
            remaining >>= 1
        }
        return result
    }
}

/// The support vectors, dense, one row after another (sparse ones are expanded
/// once, at preparation).
struct SupportVectors: Sendable {
    let values: [Double]
    let count: Int
    let dimension: Int

    init(_ vectors: SupportVectorSet?, model: String) throws(RuntimeError) {
        switch vectors {
        case .dense(let rows)?:
            let dimension = rows.first?.count ?? 0
            if let bad = rows.firstIndex(where: { $0.count != dimension }) {
                throw .invalidParameters(model: model, detail: "support vector \(bad) has \(rows[bad].count) values, vector 0 has \(dimension)")
            }
            self.values = rows.flatMap { $0 }
            self.count = rows.count
            self.dimension = dimension
        case .sparse(let sparse)?:
            // libsvm's sparse indices start at 1.
            let rows = sparse.map { vector in vector.map { (Int($0.index), $0.value) } }
            let dimension = rows.flatMap { $0.map(\.0) }.max() ?? 0
            if rows.contains(where: { $0.contains { $0.0 < 1 } }) {
                throw .invalidParameters(model: model, detail: "a sparse support vector has an index below 1")
            }
            var values = [Double](repeating: 0, count: rows.count * dimension)
            for (row, nodes) in rows.enumerated() {
                for (index, value) in nodes { values[row * dimension + index - 1] = value }
            }
            self.values = values
            self.count = rows.count
            self.dimension = dimension
        case nil:
            throw .invalidParameters(model: model, detail: "no support vectors")
        }
    }

    /// K(vᵢ, x) for every support vector i. `x` shorter than the vectors is
    /// padded with zeros (sparse models may have trailing zero features).
    func kernelValues(_ kernel: Kernel, _ x: [Double]) -> [Double] {
        let x = x.count >= dimension ? x : x + [Double](repeating: 0, count: dimension - x.count)
        return values.withUnsafeBufferPointer { all in
            (0..<count).map { row in
                kernel(UnsafeBufferPointer(rebasing: all[(row * dimension)..<((row + 1) * dimension)]), x)
            }
        }
    }
}

/// Support-vector regression: Σ αᵢ K(vᵢ, x) − ρ.
struct SupportVectorRegressorEngine: PredictionEngine {
    let interface: ModelInterface
    let kernel: Kernel
    let vectors: SupportVectors
    let alpha: [Double]
    let rho: Double

    init(_ svr: SupportVectorRegressorParameters, interface: ModelInterface) throws(RuntimeError) {
        self.interface = interface
        kernel = try Kernel(svr.kernel, model: interface.kind)
        vectors = try SupportVectors(svr.supportVectors, model: interface.kind)
        alpha = svr.coefficients
        rho = svr.rho
        guard alpha.count == vectors.count else {
            throw .invalidParameters(model: interface.kind, detail: "\(alpha.count) coefficients for \(vectors.count) support vectors")
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        let values = vectors.kernelValues(kernel, x)
        let value = LinearAlgebra.dot(alpha, values) - rho
        guard let name = interface.primaryOutput else { return [:] }
        return [name: .double(value)]
    }
}

/// Support-vector classification, one-vs-one as libsvm computes it: a
/// decision per pair of classes, votes for the label, and (when the model has
/// probA/probB) pairwise probabilities coupled into class probabilities.
struct SupportVectorClassifierEngine: PredictionEngine {
    let interface: ModelInterface
    let kernel: Kernel
    let vectors: SupportVectors
    /// coefficients[j][i]: support vector i's coefficient against class j (libsvm's sv_coef).
    let coefficients: [[Double]]
    let rho: [Double]
    let probA: [Double]
    let probB: [Double]
    let labels: ClassLabels
    /// Where each class's support vectors start, and how many it has.
    let starts: [Int]
    let counts: [Int]

    init(_ svc: SupportVectorClassifierParameters, interface: ModelInterface) throws(RuntimeError) {
        let model = interface.kind
        self.interface = interface
        kernel = try Kernel(svc.kernel, model: model)
        vectors = try SupportVectors(svc.supportVectors, model: model)
        coefficients = svc.coefficients
        rho = svc.rho
        probA = svc.probA
        probB = svc.probB
        labels = svc.classLabels ?? .strings([])
        counts = svc.numberOfSupportVectorsPerClass.map(Int.init)
        var starts: [Int] = []
        var total = 0
        for count in counts { starts.append(total); total += count }
        self.starts = starts

        let classes = labels.count
        let pairs = classes * (classes - 1) / 2
        guard classes >= 2, counts.count == classes else {
            throw .invalidParameters(model: model, detail: "\(counts.count) support-vector counts for \(classes) class labels")
        }
        guard total == vectors.count, counts.allSatisfy({ $0 >= 0 }) else {
            throw .invalidParameters(model: model, detail: "the classes' support-vector counts add up to \(total), the model has \(vectors.count)")
        }
        guard coefficients.count == classes - 1, coefficients.allSatisfy({ $0.count == vectors.count }) else {
            throw .invalidParameters(model: model, detail: "expected \(classes - 1) coefficient rows of \(vectors.count) values")
        }
        guard rho.count == pairs else {
            throw .invalidParameters(model: model, detail: "\(rho.count) rho values for \(pairs) pairs of classes")
        }
        guard probA.isEmpty || (probA.count == pairs && probB.count == pairs) else {
            throw .invalidParameters(model: model, detail: "probA/probB need \(pairs) values each")
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        let kernelValues = vectors.kernelValues(kernel, x)
        let classes = labels.count
        var votes = [Int](repeating: 0, count: classes)
        var decisions: [Double] = []
        decisions.reserveCapacity(rho.count)
        var pair = 0
        for i in 0..<classes {
            for j in (i + 1)..<classes {
                var sum = 0.0
                for k in 0..<counts[i] { sum += coefficients[j - 1][starts[i] + k] * kernelValues[starts[i] + k] }
                for k in 0..<counts[j] { sum += coefficients[i][starts[j] + k] * kernelValues[starts[j] + k] }
                let decision = sum - rho[pair]
                decisions.append(decision)
                votes[decision > 0 ? i : j] += 1
                pair += 1
            }
        }
        var winner = 0
        for index in votes.indices where votes[index] > votes[winner] { winner = index }
        guard !probA.isEmpty else {
            // Without probability estimates, the "probabilities" are the
            // vote shares, as they are all a decision-only model knows.
            let total = Double(votes.reduce(0, +))
            return interface.classifierOutputs(labels: labels, winner: winner,
                                               probabilities: votes.map { Double($0) / max(total, 1) })
        }
        let probabilities = PairwiseCoupling.probabilities(decisions: decisions, probA: probA, probB: probB, classes: classes)
        return interface.classifierOutputs(labels: labels, probabilities: probabilities)
    }
}

/// libsvm's probability estimates: Platt's sigmoid per pair of classes, then
/// the pairwise-coupling method of Wu, Lin and Weng (2004, method 2) to get
/// class probabilities that sum to one.
enum PairwiseCoupling {
    private static let minimumProbability = 1e-7

    static func probabilities(decisions: [Double], probA: [Double], probB: [Double], classes: Int) -> [Double] {
        var r = [[Double]](repeating: [Double](repeating: 0, count: classes), count: classes)
        var pair = 0
        for i in 0..<classes {
            for j in (i + 1)..<classes {
                let p = min(max(plattSigmoid(decisions[pair], probA[pair], probB[pair]), minimumProbability), 1 - minimumProbability)
                r[i][j] = p
                r[j][i] = 1 - p
                pair += 1
            }
        }
        if classes == 2 { return [r[0][1], r[1][0]] }
        return couple(r, classes: classes)
    }

    /// P(first class of the pair) for a decision value.
    private static func plattSigmoid(_ decision: Double, _ a: Double, _ b: Double) -> Double {
        let f = decision * a + b
        return f >= 0 ? exp(-f) / (1 + exp(-f)) : 1 / (1 + exp(f))
    }

    /// Solves min ½ pᵀQp subject to Σp = 1 by the fixed-point iteration the
    /// method defines, stopping when every component's optimality gap is
    /// below 0.005 / k (at most max(100, k) sweeps).
    private static func couple(_ r: [[Double]], classes k: Int) -> [Double] {
        var q = [[Double]](repeating: [Double](repeating: 0, count: k), count: k)
        for t in 0..<k {
            for j in 0..<k where j != t {
                q[t][t] += r[j][t] * r[j][t]
                q[t][j] = -r[j][t] * r[t][j]
            }
        }
        var p = [Double](repeating: 1 / Double(k), count: k)
        var qp = [Double](repeating: 0, count: k)
        let tolerance = 0.005 / Double(k)
        for _ in 0..<max(100, k) {
            var pqp = 0.0
            for t in 0..<k {
                qp[t] = 0
                for j in 0..<k { qp[t] += q[t][j] * p[j] }
                pqp += p[t] * qp[t]
            }
            var largestGap = 0.0
            for t in 0..<k { largestGap = max(largestGap, abs(qp[t] - pqp)) }
            if largestGap < tolerance { break }
            for t in 0..<k {
                let step = (-qp[t] + pqp) / q[t][t]
                p[t] += step
                pqp = (pqp + step * (step * q[t][t] + 2 * qp[t])) / ((1 + step) * (1 + step))
                for j in 0..<k {
                    qp[j] = (qp[j] + step * q[t][j]) / (1 + step)
                    p[j] /= 1 + step
                }
            }
        }
        return p
    }
}

extension SupportVectors {
    /// Rows whose kernel values are computed together: the support vectors
    /// are read once per block, and the loops over the block's rows vectorize.
    static let blockRows = 32

    /// K(vᵢ, x) for every support vector i and each of `block` rows starting
    /// at `start`, into `kernelValues` as `count` × `block` (vector-major).
    /// Rows shorter than the vectors are padded with zeros, longer ones cut,
    /// as `kernelValues(_:_:)` does; the sums run in the same order, so the
    /// values are the same bits.
    func kernelValues(_ kernel: Kernel, rows: UnsafeBufferPointer<Double>, start: Int, block: Int, stride: Int,
                      transposed: UnsafeMutableBufferPointer<Double>, into kernelValues: UnsafeMutableBufferPointer<Double>) {
        for feature in 0..<dimension {
            for row in 0..<block {
                transposed[feature * block + row] = feature < stride ? rows[(start + row) * stride + feature] : 0
            }
        }
        let isDistance: Bool
        if case .rbf = kernel { isDistance = true } else { isDistance = false }
        values.withUnsafeBufferPointer { vectors in
            for vector in 0..<count {
                let out = vector * block
                for row in 0..<block { kernelValues[out + row] = 0 }
                for feature in 0..<dimension {
                    let v = vectors[vector * dimension + feature]
                    let column = feature * block
                    if isDistance {
                        for row in 0..<block {
                            let difference = v - transposed[column + row]
                            kernelValues[out + row] += difference * difference
                        }
                    } else {
                        for row in 0..<block { kernelValues[out + row] += v * transposed[column + row] }
                    }
                }
                for row in 0..<block { kernelValues[out + row] = kernel.apply(kernelValues[out + row]) }
            }
        }
    }
}

extension Kernel {
    /// The kernel's value from the squared distance (RBF) or the dot product (the others).
    @inline(__always)
    func apply(_ reduced: Double) -> Double {
        switch self {
        case .linear: reduced
        case .rbf(let gamma): exp(-gamma * reduced)
        case .polynomial(let degree, let gamma, let c): Self.power(gamma * reduced + c, degree)
        case .sigmoid(let gamma, let c): tanh(gamma * reduced + c)
        }
    }
}

extension SupportVectorClassifierEngine: ColumnarPredictionEngine {
    func predictions(rows: UnsafeBufferPointer<Double>, count rowCount: Int, stride: Int) throws(RuntimeError) -> [String: FeatureColumn] {
        let classes = labels.count
        let pairs = rho.count
        let block = SupportVectors.blockRows
        var probabilities = MultiArray(shape: [rowCount, classes], dataType: .float64)
        var winners = [Int](repeating: 0, count: rowCount)
        var transposed = [Double](repeating: 0, count: max(1, vectors.dimension * block))
        var kernelValues = [Double](repeating: 0, count: max(1, vectors.count * block))
        var decisions = [Double](repeating: 0, count: max(1, pairs * block))
        probabilities.withUnsafeMutableBytes { raw in
            let out = raw.bindMemory(to: Double.self)
            var start = 0
            while start < rowCount {
                let size = min(block, rowCount - start)
                transposed.withUnsafeMutableBufferPointer { transposed in
                    kernelValues.withUnsafeMutableBufferPointer { kernelValues in
                        vectors.kernelValues(kernel, rows: rows, start: start, block: size, stride: stride,
                                             transposed: transposed, into: kernelValues)
                    }
                }
                decide(kernelValues: kernelValues, block: size, into: &decisions)
                for row in 0..<size {
                    let rowDecisions = (0..<pairs).map { decisions[$0 * size + row] }
                    var votes = [Int](repeating: 0, count: classes)
                    var pair = 0
                    for i in 0..<classes {
                        for j in (i + 1)..<classes {
                            votes[rowDecisions[pair] > 0 ? i : j] += 1
                            pair += 1
                        }
                    }
                    let values: [Double]
                    if probA.isEmpty {
                        var winner = 0
                        for index in votes.indices where votes[index] > votes[winner] { winner = index }
                        winners[start + row] = winner
                        let total = Double(votes.reduce(0, +))
                        values = votes.map { Double($0) / max(total, 1) }
                    } else {
                        values = PairwiseCoupling.probabilities(decisions: rowDecisions, probA: probA, probB: probB, classes: classes)
                        var winner = 0
                        for index in values.indices where values[index] > values[winner] { winner = index }
                        winners[start + row] = winner
                    }
                    for index in 0..<classes { out[(start + row) * classes + index] = values[index] }
                }
                start += size
            }
        }
        return interface.classifierColumns(labels: labels, probabilities: probabilities, winners: winners)
    }

    /// Every pair's decision for each row of a block, pair-major, summed in
    /// the order `predict` sums them.
    private func decide(kernelValues: [Double], block: Int, into decisions: inout [Double]) {
        let classes = labels.count
        var pair = 0
        for i in 0..<classes {
            for j in (i + 1)..<classes {
                let out = pair * block
                for row in 0..<block { decisions[out + row] = 0 }
                for k in 0..<counts[i] {
                    let coefficient = coefficients[j - 1][starts[i] + k]
                    let values = (starts[i] + k) * block
                    for row in 0..<block { decisions[out + row] += coefficient * kernelValues[values + row] }
                }
                for k in 0..<counts[j] {
                    let coefficient = coefficients[i][starts[j] + k]
                    let values = (starts[j] + k) * block
                    for row in 0..<block { decisions[out + row] += coefficient * kernelValues[values + row] }
                }
                for row in 0..<block { decisions[out + row] -= rho[pair] }
                pair += 1
            }
        }
    }
}
