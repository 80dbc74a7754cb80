import Foundation
import ModelFeatures
import ModelRuntime

/// The tensor engine on the models of parity case files (Fixtures/Parity, ML
/// programs and neural networks alike): the median latency of `runs`
/// predictions of the first case on `threads` threads, after three warm-up
/// ones. Prints `name tensor_ms` lines (`-` where the model does not run).
enum ProgramBenchmark {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(runs: Int, threads: Int, cases: [String]) throws {
        print("program tensor_ms")
        for file in cases {
            guard let data = FileManager.default.contents(atPath: file),
                  let document = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let modelName = document["model"] as? String, let first = (document["cases"] as? [[String: Any]])?.first,
                  let inputs = first["inputs"] else {
                throw Failure(description: "\(file) is not a parity case file")
            }
            let path = (file as NSString).deletingLastPathComponent + "/" + modelName
            func latency() -> Double? {
                guard let model = try? Model(contentsOf: path, configuration: ModelConfiguration(threads: threads)),
                      let parsed = try? PredictionInputs(model: model).parse(object: inputs),
                      (try? model.prediction(from: parsed)) != nil else { return nil }
                for _ in 0..<3 { _ = try? model.prediction(from: parsed) }
                return median(runs: runs) { _ = try? model.prediction(from: parsed) }
            }
            let text = latency().map { String(format: "%.3f", $0 * 1000) } ?? "-"
            print("\((modelName as NSString).deletingPathExtension) \(text)")
        }
    }
}
