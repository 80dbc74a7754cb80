import Foundation
import ModelFeatures
import ModelRuntime

/// One image classifier run the way an application runs it: opened from its
/// bundle, then predictions on one RGB image through the public API (input
/// checks, preprocessing and the probability dictionary included).
///
/// Prints `key value` lines for Scripts/bench.sh: `latency_ms` (median of
/// `runs` predictions after 5 warm-up ones), `first_ms` (opening the bundle
/// and the first prediction), and resident memory before opening
/// (`baseline_rss_kb`, so the caller can tell the model's share of the peak),
/// after opening (`opened_rss_kb`) and after the first prediction
/// (`predicted_rss_kb`: operators, packed weights and the arena made).
enum NetworkBenchmark {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(bundle: String, image path: String, threads: Int, runs: Int, probabilities: String?) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
        let side = Int(Double(data.count / 3).squareRoot())
        guard side * side * 3 == data.count,
              let pixels = PixelBuffer(width: side, height: side, pixelFormat: .rgb, bytes: [UInt8](data)) else {
            throw Failure(description: "\(path): \(data.count) bytes are not a square RGB image")
        }
        let baseline = residentKilobytes()

        let start = DispatchTime.now().uptimeNanoseconds
        let model = try Model(contentsOf: bundle, configuration: ModelConfiguration(threads: threads))
        let opened = residentKilobytes()
        guard let input = model.summary.inputs.first?.name else { throw Failure(description: "\(bundle) has no input") }
        let inputs: [String: FeatureValue] = [input: .image(pixels)]
        let outputs = try model.prediction(from: inputs)
        let first = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let predicted = residentKilobytes()

        for _ in 0..<5 { _ = try model.prediction(from: inputs) }
        let latency = try median(runs: runs) { _ = try model.prediction(from: inputs) }

        if let probabilities {
            // The class probabilities in the model's label order, as float32.
            guard case .int64s(let byLabel)? = outputs.values.lazy.compactMap(\.dictionaryValue).first else {
                throw Failure(description: "\(bundle) gives no int64-labelled probabilities")
            }
            let values = model.classLabels.compactMap { Int64($0).flatMap { byLabel[$0] }.map(Float.init) }
            let bytes = values.withUnsafeBufferPointer { Data(buffer: $0) }
            guard FileManager.default.createFile(atPath: probabilities, contents: bytes) else {
                throw Failure(description: "cannot write \(probabilities)")
            }
        }
        print("engine modelc")
        print("threads \(threads)")
        print(String(format: "latency_ms %.3f", latency * 1000))
        print(String(format: "first_ms %.3f", first * 1000))
        print("baseline_rss_kb \(baseline)")
        print("opened_rss_kb \(opened)")
        print("predicted_rss_kb \(predicted)")
    }

    /// VmRSS of this process, in kilobytes (0 where /proc is missing).
    static func residentKilobytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}
