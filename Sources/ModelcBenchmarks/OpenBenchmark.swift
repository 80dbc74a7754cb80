import Foundation
import ModelLoader
import ModelSpec

/// The median wall time of `runs` calls of `body`, in seconds.
func median(runs: Int, _ body: () throws -> Void) rethrows -> Double {
    var times: [Double] = []
    for _ in 0..<runs {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
    return times.sorted()[times.count / 2]
}

/// Opening bundles of two sizes against parsing the source model.
enum OpenBenchmark {
    static func run(small: String, large: String, source: String) throws {
        let smallOpen = try median(runs: 201) { _ = try ModelBundle.open(small) }
        let largeOpen = try median(runs: 201) { _ = try ModelBundle.open(large) }
        let parse = try median(runs: 7) { _ = try ModelFile.open(source) }
        let milliseconds = { (seconds: Double) in String(format: "%8.3f ms", seconds * 1000) }
        print("open: median of in-process runs, page cache warm")
        print("  open \(size(small)) bundle           \(milliseconds(smallOpen))   (target ≤ 1 ms)")
        print("  open \(size(large)) bundle          \(milliseconds(largeOpen))")
        print("  parse \(size(source)) .mlmodel        \(milliseconds(parse))")
        print(String(format: "  large / small open           %.2f×   (target ≤ 1.5×, size-independent)", largeOpen / smallOpen))
        print(String(format: "  parse / open (large)         %.0f×   (target ≥ 100×)", parse / largeOpen))
    }

    static func size(_ path: String) -> String {
        var total: UInt64 = 0
        if let walker = FileManager.default.enumerator(atPath: path) {
            for case let file as String in walker {
                total += (try? FileManager.default.attributesOfItem(atPath: path + "/" + file)[.size] as? UInt64) ?? 0
            }
        }
        if total == 0 { total = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? UInt64) ?? 0 }
        return String(format: "%.1f MB", Double(total) / 1_048_576)
    }
}
