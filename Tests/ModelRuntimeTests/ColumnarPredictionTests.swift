import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// `Model.predictions(columns:)` gives, row for row, what `prediction(from:)`
/// gives: straight from the row matrix (tree ensembles, SVM classifiers) or
/// row by row (the rest), for any thread count and rows spanning workers.
@Suite struct ColumnarPredictionTests {
    static let files = ["forest_classifier_multiclass", "forest_regressor", "xgboost_classifier_binary",
                        "gradient_boosting_classifier_multiclass", "svc_rbf_multiclass", "svc_poly_multiclass_probability",
                        "nusvc_rbf_multiclass_probability", "svc_rbf_sparse_vectors", "glm_multiclass_ovr_int_labels",
                        "tree_classifier_multiclass"]

    @Test(arguments: files)
    func columnsEqualRows(file: String) throws {
        let document = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("Parity/\(file).json")))) as? [String: Any])
        let cases = try #require(document["cases"] as? [[String: Any]])
        let path = Fixtures.path("Parity/\(file).mlmodel")
        let reference = try Model(contentsOf: path, configuration: ModelConfiguration(threads: 1))
        let parser = PredictionInputs(model: reference)
        var rows: [[String: FeatureValue]] = try cases.map { try parser.parse(object: try #require($0["inputs"])) }
        // More rows than one worker's share, so that the parts are joined.
        while rows.count < 1500 { rows += rows }
        // One column per input: a vector of rows for a number, rows × width for an array
        // (xgboost's fixture has one double input per feature: they are gathered into one matrix).
        var columns: [String: MultiArray] = [:]
        for description in reference.summary.inputs {
            var values: [Double] = []
            var width = 1
            var isArray = false
            for row in rows {
                switch try #require(row[description.name], "input \(description.name)") {
                case .double(let number): values.append(number)
                case .int64(let number): values.append(Double(number))
                case .multiArray(let array):
                    values += array.doubles
                    width = array.count
                    isArray = true
                default: Issue.record("\(file): input \(description.name) is not numbers")
                }
            }
            columns[description.name] = MultiArray(values, shape: isArray ? [rows.count, width] : [rows.count])
        }
        let expected = try rows.map { try reference.prediction(from: $0) }
        for threads in [1, 2, 3] {
            let model = try Model(contentsOf: path, configuration: ModelConfiguration(threads: threads))
            let predicted = try model.predictions(columns: columns)
            for (index, want) in expected.enumerated() {
                for (output, value) in want {
                    let got = try #require(predicted[output], "output \(output)")
                    switch (value, got) {
                    case (.int64(let label), .int64s(let labels)): #expect(labels[index] == label)
                    case (.string(let label), .strings(let labels)): #expect(labels[index] == label)
                    case (.double(let number), .array(let array)): #expect(array[index] == number)
                    case (.multiArray(let row), .array(let array)):
                        for element in 0..<row.count { #expect(array[index * row.count + element] == row[element]) }
                    case (.dictionary(let probabilities), .array(let array)):
                        let labels = model.classLabels
                        for (position, label) in labels.enumerated() {
                            let want: Double? = switch probabilities {
                            case .strings(let map): map[label]
                            case .int64s(let map): Int64(label).flatMap { map[$0] }
                            }
                            #expect(array[index * labels.count + position] == want, "\(file) row \(index) \(label)")
                        }
                    default: Issue.record("\(file): output \(output) is \(got) for \(value)")
                    }
                }
            }
        }
    }

    @Test func badColumnsNameTheInput() throws {
        let model = try Model(contentsOf: Fixtures.path("Models/GLMClassifier.mlmodel"))
        #expect(throws: RuntimeError.missingInput(feature: "features", expected: "a column of a multi-array of shape 4")) {
            try model.predictions(columns: [:].merging(["other": MultiArray(shape: [2, 4], dataType: .float64)]) { a, _ in a })
        }
        #expect(throws: RuntimeError.wrongShape(feature: "features", expected: "rows × 4", got: [2, 3])) {
            try model.predictions(columns: ["features": MultiArray(shape: [2, 3], dataType: .float64)])
        }
        let empty = try model.predictions(columns: ["features": MultiArray(shape: [0, 4], dataType: .float64)])
        #expect(empty["species"]?.rows == 0)
    }
}
