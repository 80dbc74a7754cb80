import Foundation
import ModelFeatures
import ModelRuntime

/// One transformer ML program on the tensor engine, predicting the way an application
/// does: opened from its package, inputs parsed from JSON, then
/// predictions through the public API.
///
/// Prints `key value` lines for Scripts/bench-transformers.sh: `latency_ms`
/// (median of `runs` predictions after 3 warm-up ones), `cpu_ms` (the mean CPU
/// time of those predictions, every thread counted), `first_ms` (opening
/// and the first prediction) and `peak_rss_kb` (the process's high-water
/// resident memory, VmHWM). Inputs `{"prefill": …, "step": …}` time one
/// step of a stateful decoder: a state made and filled by the prefill,
/// then the step predicted on it (`prediction(from:using:)`) each time. With `outputFile`, writes the first output
/// of the first prediction there as little-endian float32 so the caller can
/// compare it with onnxruntime's.
enum TransformerBenchmark {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(model path: String, inputs file: String, threads: Int, runs: Int, outputFile: String?) throws {
        guard let data = FileManager.default.contents(atPath: file) else { throw Failure(description: "cannot read \(file)") }
        let object = try JSONSerialization.jsonObject(with: data)

        let start = DispatchTime.now().uptimeNanoseconds
        let model = try Model(contentsOf: path, configuration: ModelConfiguration(threads: threads))
        // A stateful decoder step: {"prefill": inputs, "step": inputs}; the prefill fills the state once,
        // then every timed prediction is the same step on it.
        let state: ModelState?
        let inputs: [String: FeatureValue]
        if let steps = object as? [String: Any], let prefill = steps["prefill"], let step = steps["step"] {
            guard let made = model.makeState() else { throw Failure(description: "\(path) has no state") }
            _ = try model.prediction(from: try PredictionInputs(model: model).parse(object: prefill), using: made)
            state = made
            inputs = try PredictionInputs(model: model).parse(object: step)
        } else {
            state = nil
            inputs = try PredictionInputs(model: model).parse(object: object)
        }
        let predict: () throws -> [String: FeatureValue] = {
            if let state { return try model.prediction(from: inputs, using: state) }
            return try model.prediction(from: inputs)
        }
        let outputs = try predict()
        let first = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9

        if let outputFile {
            guard let name = model.summary.outputs.first?.name, let array = outputs[name]?.multiArrayValue else {
                throw Failure(description: "\(path) gives no multi-array output")
            }
            let bytes = array.floats.withUnsafeBufferPointer { Data(buffer: $0) }
            guard FileManager.default.createFile(atPath: outputFile, contents: bytes) else {
                throw Failure(description: "cannot write \(outputFile)")
            }
        }
        for _ in 0..<3 { _ = try predict() }
        let cpuBefore = processorSeconds()
        let latency = try median(runs: runs) { _ = try predict() }
        let cpu = (processorSeconds() - cpuBefore) / Double(max(runs, 1))

        print("engine modelc-tensor")
        print("threads \(threads)")
        print(String(format: "latency_ms %.3f", latency * 1000))
        print(String(format: "first_ms %.3f", first * 1000))
        print(String(format: "cpu_ms %.3f", cpu * 1000))
        print("peak_rss_kb \(peakResidentKilobytes())")
    }

    /// CPU time (user and system, every thread) this process has used, in seconds: the mean per
    /// prediction is what a loaded machine's wall-clock latency cannot show.
    static func processorSeconds() -> Double {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// VmHWM (peak resident memory) of this process, in kilobytes (0 where
    /// /proc is missing); the same number as getrusage's ru_maxrss.
    static func peakResidentKilobytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}
