import Dispatch
import ModelFeatures
import ModelSpec
import SystemIO

extension Model {
    /// Rows below which a columnar batch is not split between threads.
    static let rowsPerWorker = 512

    /// The outputs of a batch given as columns: every input a multi-array
    /// whose first axis is the row (rows × the input's shape; a double or
    /// int64 input as a vector of rows). Outputs come back the same way:
    /// numbers and multi-arrays stacked along a first row axis, a classifier's
    /// probabilities as rows × classes in `classLabels` order, labels and
    /// strings one per row.
    ///
    /// Models whose engine reads one vector of numbers (tree ensembles, SVM
    /// classifiers) evaluate the rows straight from the columns, without a
    /// dictionary per row; the others are predicted row by row. Either way the
    /// rows are shared among `configuration.threads` threads, in order.
    ///
    /// - Throws: `RuntimeError` naming the input at fault (missing, of the
    ///   wrong shape, columns of different lengths), or the first row's error.
    public func predictions(columns: [String: MultiArray]) throws(RuntimeError) -> [String: FeatureColumn] {
        let rows = try rowCount(columns)
        for description in summary.inputs {
            guard let column = columns[description.name] else {
                if description.isOptional { continue }
                throw .missingInput(feature: description.name, expected: "a column of " + description.type.expectation)
            }
            try checkRowShape(column, of: description)
        }
        if let columnar = engine as? any ColumnarPredictionEngine {
            return try columnarPredictions(columnar, columns: columns, rows: rows)
        }
        return try rowPredictions(columns: columns, rows: rows)
    }

    private func rowCount(_ columns: [String: MultiArray]) throws(RuntimeError) -> Int {
        var rows: Int?
        for (name, column) in columns.sorted(by: { $0.key < $1.key }) {
            guard let count = column.shape.first else {
                throw .wrongShape(feature: name, expected: "an array whose first axis is the row", got: column.shape)
            }
            if let rows, rows != count {
                throw .invalidValue(feature: name, detail: "\(count) rows, other columns have \(rows)")
            }
            rows = count
        }
        guard let rows else { throw .invalidValue(feature: "columns", detail: "no columns given") }
        return rows
    }

    private func checkRowShape(_ column: MultiArray, of description: FeatureDescription) throws(RuntimeError) {
        let rowShape = Array(column.shape.dropFirst())
        switch description.type {
        case .double, .int64:
            guard rowShape.isEmpty || rowShape == [1] else {
                throw .wrongShape(feature: description.name, expected: "rows (one number per row)", got: column.shape)
            }
        case .multiArray(let type):
            guard type.accepts(shape: rowShape) else {
                throw .wrongShape(feature: description.name, expected: "rows × " + type.shapeExpectation, got: column.shape)
            }
        default:
            throw .wrongType(feature: description.name, expected: description.type.expectation,
                             got: "a column of numbers (columns carry numbers only; predict the rows one by one)")
        }
    }

    /// The rows as one matrix of doubles, read by the engine in parallel.
    private func columnarPredictions(_ engine: any ColumnarPredictionEngine, columns: [String: MultiArray],
                                     rows: Int) throws(RuntimeError) -> [String: FeatureColumn] {
        let used = summary.inputs.compactMap { description in columns[description.name] }
        let matrix: MultiArray
        if used.count == 1, let only = used.first {
            matrix = only.converted(to: .float64)
        } else {
            let widths = used.map { rows == 0 ? 0 : $0.count / rows }
            let width = widths.reduce(0, +)
            var gathered = MultiArray(shape: [rows, width], dataType: .float64)
            gathered.withUnsafeMutableBytes { raw in
                let target = raw.bindMemory(to: Double.self)
                var offset = 0
                for (column, columnWidth) in zip(used, widths) {
                    let values = column.doubles
                    for row in 0..<rows {
                        for index in 0..<columnWidth { target[row * width + offset + index] = values[row * columnWidth + index] }
                    }
                    offset += columnWidth
                }
            }
            matrix = gathered
        }
        let stride = rows == 0 ? 0 : matrix.count / rows
        let workers = max(1, min(configuration.threads, rows / Self.rowsPerWorker))
        let chunk = (rows + workers - 1) / max(workers, 1)
        let parts = Locked([Result<[String: FeatureColumn], RuntimeError>?](repeating: nil, count: workers))
        matrix.withUnsafeBytes { raw in
            // Read only, by every worker, while `matrix` lives.
            nonisolated(unsafe) let all = raw.bindMemory(to: Double.self)
            DispatchQueue.concurrentPerform(iterations: workers) { worker in
                let start = min(rows, worker * chunk)
                let end = min(rows, start + chunk)
                let slice = UnsafeBufferPointer(rebasing: all[(start * stride)..<(end * stride)])
                let result = Result { () throws(RuntimeError) in try engine.predictions(rows: slice, count: end - start, stride: stride) }
                parts.withLock { $0[worker] = result }
            }
        }
        var outputs: [[String: FeatureColumn]] = []
        for part in parts.withLock({ $0 }) {
            guard let part else { throw .invalidValue(feature: "batch", detail: "not computed") }
            outputs.append(try part.get())
        }
        return try joined(outputs)
    }

    /// Rows predicted one by one (on every thread), their outputs stacked into columns.
    private func rowPredictions(columns: [String: MultiArray], rows: Int) throws(RuntimeError) -> [String: FeatureColumn] {
        var batch = [[String: FeatureValue]](repeating: [:], count: rows)
        for description in summary.inputs {
            guard let column = columns[description.name] else { continue }
            let rowShape = Array(column.shape.dropFirst())
            let width = rows == 0 ? 0 : column.count / rows
            column.withUnsafeBytes { raw in
                let size = column.dataType.size
                for row in 0..<rows {
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[(row * width * size)..<((row + 1) * width * size)])
                    let array = MultiArray(copying: bytes, shape: rowShape, strides: MultiArray.rowMajorStrides(rowShape),
                                           dataType: column.dataType)
                    switch description.type {
                    case .double: batch[row][description.name] = .double(array[0])
                    case .int64: batch[row][description.name] = .int64(Int64(array[0]))
                    default: batch[row][description.name] = .multiArray(array)
                    }
                }
            }
        }
        var results: [[String: FeatureValue]] = []
        results.reserveCapacity(rows)
        for result in predictions(from: batch) { results.append(try result.get()) }
        var outputs: [String: FeatureColumn] = [:]
        for description in summary.outputs {
            let values = results.compactMap { $0[description.name] }
            guard values.count == rows else { continue }
            outputs[description.name] = try column(of: values, name: description.name)
        }
        return outputs
    }

    /// One output's values of every row as a column.
    private func column(of values: [FeatureValue], name: String) throws(RuntimeError) -> FeatureColumn {
        func unstackable(_ value: FeatureValue) -> RuntimeError {
            .invalidValue(feature: name, detail: "\(value.kindText) has no column form; predict the rows one by one")
        }
        guard let first = values.first else { return .array(MultiArray(shape: [0], dataType: .float64)) }
        switch first {
        case .double:
            return .array(MultiArray(values.map { $0.doubleValue ?? .nan }, shape: [values.count]))
        case .int64:
            var numbers: [Int64] = []
            for value in values {
                guard case .int64(let number) = value else { throw unstackable(value) }
                numbers.append(number)
            }
            return .int64s(numbers)
        case .string:
            var strings: [String] = []
            for value in values {
                guard case .string(let string) = value else { throw unstackable(value) }
                strings.append(string)
            }
            return .strings(strings)
        case .multiArray(let head):
            var parts: [FeatureColumn] = []
            for value in values {
                guard case .multiArray(let array) = value, let stacked = array.reshaped([1] + array.shape) else { throw unstackable(value) }
                parts.append(.array(stacked))
            }
            guard let joined = FeatureColumn.joined(parts) else {
                throw .invalidValue(feature: name, detail: "rows of different shapes or types (row 0: \(FeatureValue.multiArray(head).kindText))")
            }
            return joined
        case .dictionary(let dictionary):
            let keys: [String] = classLabels.isEmpty ? Self.keys(dictionary) : classLabels
            var probabilities = [Double](repeating: 0, count: values.count * keys.count)
            for (row, value) in values.enumerated() {
                guard case .dictionary(let entries) = value else { throw unstackable(value) }
                for (index, key) in keys.enumerated() {
                    switch entries {
                    case .strings(let map): probabilities[row * keys.count + index] = map[key] ?? 0
                    case .int64s(let map): probabilities[row * keys.count + index] = Int64(key).flatMap { map[$0] } ?? 0
                    }
                }
            }
            return .array(MultiArray(probabilities, shape: [values.count, keys.count]))
        default:
            throw unstackable(first)
        }
    }

    private static func keys(_ dictionary: FeatureDictionary) -> [String] {
        switch dictionary {
        case .strings(let map): map.keys.sorted()
        case .int64s(let map): map.keys.sorted().map(String.init)
        }
    }

    private func joined(_ parts: [[String: FeatureColumn]]) throws(RuntimeError) -> [String: FeatureColumn] {
        guard let first = parts.first else { return [:] }
        var outputs: [String: FeatureColumn] = [:]
        for name in first.keys {
            let columns = parts.compactMap { $0[name] }
            guard columns.count == parts.count, let joined = FeatureColumn.joined(columns) else {
                throw .invalidValue(feature: name, detail: "the rows' outputs do not join into one column")
            }
            outputs[name] = conform(joined, to: summary.outputs.first { $0.name == name })
        }
        return outputs
    }

    /// A column of a multi-array output in the element type the model declares.
    private func conform(_ column: FeatureColumn, to description: FeatureDescription?) -> FeatureColumn {
        guard case .array(let array) = column, case .multiArray(let type)? = description?.type,
              let declared = MultiArray.DataType(schemaName: type.dataType), declared != array.dataType
        else { return column }
        return .array(array.converted(to: declared))
    }
}
