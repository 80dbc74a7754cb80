import Foundation
import ModelFeatures
import ModelRuntime

/// The two engines on the same models (Fixtures/Parity case files, ML
/// programs and neural networks alike): the median latency of `runs`
/// predictions of the first case on `threads` threads with the layer engine
/// and with the tensor engine, and their ratio.
/// Prints `name layer_ms tensor_ms tensor/layer` lines (`-` where the layer
/// engine does not take the program).
enum ProgramBenchmark {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(runs: Int, threads: Int, cases: [String]) throws {
        print("program layer_ms tensor_ms tensor/layer")
        for file in cases {
            guard let data = FileManager.default.contents(atPath: file),
                  let document = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let modelName = document["model"] as? String, let first = (document["cases"] as? [[String: Any]])?.first,
                  let inputs = first["inputs"] else {
                throw Failure(description: "\(file) is not a parity case file")
            }
            let path = (file as NSString).deletingLastPathComponent + "/" + modelName
            func latency(_ engine: ProgramEngineChoice) -> Double? {
                guard let model = try? Model(contentsOf: path, configuration: ModelConfiguration(threads: threads, programEngine: engine)),
                      let parsed = try? PredictionInputs(model: model).parse(object: inputs),
                      (try? model.prediction(from: parsed)) != nil else { return nil }
                for _ in 0..<3 { _ = try? model.prediction(from: parsed) }
                return median(runs: runs) { _ = try? model.prediction(from: parsed) }
            }
            let layer = latency(.layer), tensor = latency(.tensor)
            func text(_ value: Double?) -> String { value.map { String(format: "%.3f", $0 * 1000) } ?? "-" }
            let ratio = layer.flatMap { l in tensor.map { String(format: "%.2f", $0 / l) } } ?? "-"
            print("\((modelName as NSString).deletingPathExtension) \(text(layer)) \(text(tensor)) \(ratio)")
        }
    }
}
