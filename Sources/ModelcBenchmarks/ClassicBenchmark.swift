import Foundation
import ModelFeatures
import ModelRuntime

/// The fastest of `runs` calls of `body`, in seconds.
func fastest(runs: Int, _ body: () throws -> Void) rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<runs {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
    return best
}

/// `classic MODEL ROWS.npy [RUNS]`: batch prediction through the library on
/// one thread over every row of a 2-D .npy file (the model's one input);
/// prints the fastest run's seconds. Making the inputs is not timed.
func classic(_ arguments: ArraySlice<String>) -> Int32 {
    let values = Array(arguments)
    guard values.count >= 2 else { return 64 }
    let runs = values.count > 2 ? Int(values[2]) ?? 3 : 3
    do {
        let model = try Model(contentsOf: values[0], configuration: ModelConfiguration(threads: 1))
        guard let input = model.summary.inputs.first, case .multiArray(let declared) = input.type else {
            FileHandle.standardError.write(Data("ModelcBenchmarks: the model's first input is not a multi-array\n".utf8))
            return 65
        }
        guard let data = FileManager.default.contents(atPath: values[1]) else {
            FileHandle.standardError.write(Data("ModelcBenchmarks: cannot read \(values[1])\n".utf8))
            return 66
        }
        let rows = try NumPyArray.read(data, source: values[1], feature: input.name)
        guard rows.shape.count == 2 else { return 65 }
        let (count, width) = (rows.shape[0], rows.shape[1])
        let all = rows.doubles
        let dataType = MultiArray.DataType(schemaName: declared.dataType) ?? .float64
        let batch: [[String: FeatureValue]] = (0..<count).map { row in
            [input.name: .multiArray(MultiArray(Array(all[(row * width)..<((row + 1) * width)]), shape: [width], dataType: dataType))]
        }
        var failures = 0
        let seconds = fastest(runs: runs) {
            failures = model.predictions(from: batch).reduce(0) { total, result in
                if case .failure = result { total + 1 } else { total }
            }
        }
        guard failures == 0 else {
            FileHandle.standardError.write(Data("ModelcBenchmarks: \(failures) of \(count) predictions failed\n".utf8))
            return 1
        }
        print(String(format: "%.6f", seconds))
        return 0
    } catch {
        FileHandle.standardError.write(Data("ModelcBenchmarks: \(error)\n".utf8))
        return 1
    }
}

