import ModelSpec

/// One output of a batch given as columns: every row's value, row after row.
///
/// Numbers and multi-arrays are one multi-array whose first axis is the row
/// (a classifier's probabilities: rows × classes, in the class labels'
/// order); labels and other strings or integers are one value per row.
public enum FeatureColumn: Sendable, Equatable {
    case array(MultiArray)
    case int64s([Int64])
    case strings([String])

    /// The number of rows.
    public var rows: Int {
        switch self {
        case .array(let array): array.shape.first ?? 0
        case .int64s(let values): values.count
        case .strings(let values): values.count
        }
    }

    /// The columns of consecutive row ranges joined into one, in order;
    /// `nil` when they are not of one kind (or arrays not of one row shape and type).
    public static func joined(_ parts: [FeatureColumn]) -> FeatureColumn? {
        guard let first = parts.first else { return nil }
        if parts.count == 1 { return first }
        switch first {
        case .int64s:
            var values: [Int64] = []
            for part in parts {
                guard case .int64s(let more) = part else { return nil }
                values += more
            }
            return .int64s(values)
        case .strings:
            var values: [String] = []
            for part in parts {
                guard case .strings(let more) = part else { return nil }
                values += more
            }
            return .strings(values)
        case .array(let head):
            var arrays: [MultiArray] = []
            for part in parts {
                guard case .array(let array) = part, array.dataType == head.dataType,
                      array.shape.dropFirst() == head.shape.dropFirst() else { return nil }
                arrays.append(array)
            }
            let rows = arrays.reduce(0) { $0 + ($1.shape.first ?? 0) }
            var joined = MultiArray(shape: [rows] + head.shape.dropFirst(), dataType: head.dataType)
            joined.withUnsafeMutableBytes { target in
                var offset = 0
                for array in arrays {
                    array.withUnsafeBytes { source in
                        UnsafeMutableRawBufferPointer(rebasing: target[offset..<(offset + source.count)]).copyMemory(from: source)
                        offset += source.count
                    }
                }
            }
            return .array(joined)
        }
    }
}

/// An engine that predicts many rows given as one matrix of doubles, without
/// a dictionary per row: the classic models whose inputs are a vector of
/// numbers (tree ensembles, SVMs, GLMs).
public protocol ColumnarPredictionEngine: PredictionEngine {
    /// The outputs of `count` rows laid out `stride` doubles apart in `rows`,
    /// each row the inputs' numbers as `ModelInterface.inputVector` gives them.
    ///
    /// - Throws: `RuntimeError` when the rows are too short for the parameters.
    func predictions(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int) throws(RuntimeError) -> [String: FeatureColumn]
}

extension ModelInterface {
    /// The predicted label of every row as a column.
    public func labelColumn(labels: ClassLabels, winners: [Int]) -> FeatureColumn {
        switch labels {
        case .strings(let names): .strings(winners.map { names[$0] })
        case .int64s(let values): .int64s(winners.map { values[$0] })
        }
    }

    /// A classifier's columns: the label with the highest probability of each
    /// row (the first on ties) and, when the model names one, the
    /// probabilities as rows × classes.
    public func classifierColumns(labels: ClassLabels, probabilities: MultiArray, winners: [Int]? = nil) -> [String: FeatureColumn] {
        let classes = labels.count
        let rows = probabilities.shape.first ?? 0
        let best: [Int] = winners ?? probabilities.withUnsafeBytes { raw in
            let values = raw.bindMemory(to: Double.self)
            return (0..<rows).map { row in
                var best = 0
                for index in 0..<classes where values[row * classes + index] > values[row * classes + best] { best = index }
                return best
            }
        }
        var columns: [String: FeatureColumn] = [:]
        if let name = predictedFeatureName ?? outputs.first?.name {
            columns[name] = labelColumn(labels: labels, winners: best)
        }
        if let name = predictedProbabilitiesName {
            columns[name] = .array(probabilities)
        }
        return columns
    }
}
