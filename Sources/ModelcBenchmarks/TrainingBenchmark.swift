import Foundation
import ModelTraining

/// `ModelcBenchmarks training BASE DATA_DIR WORK_DIR L2 MAX_ITERATIONS`: trains
/// an image classifier as `modelc train` does, with an empty feature cache,
/// and prints `key value` lines: the feature extraction's time (and a second
/// run's, from the cache), the fit's (best of 3), iterations and accuracies.
/// Writes the feature rows as NumPy files into WORK_DIR for scikit-learn.
enum TrainingBenchmark {
    static func run(base: String, data: String, work: String, l2: Double, maxIterations: Int) throws {
        let cache = work + "/cache"
        try? FileManager.default.removeItem(atPath: cache)
        let options = TrainingOptions(basePath: base, maxIterations: maxIterations, l2: l2, seed: 0, cacheRoot: cache)
        let trained = try ImageClassifierTrainer.train(dataDirectory: data, options: options)
        let again = try ImageClassifierTrainer.train(dataDirectory: data, options: options)
        let report = trained.report
        var best = Double.infinity
        var fit: LogisticRegression.Fit?
        for _ in 0..<3 {
            let start = DispatchTime.now().uptimeNanoseconds
            fit = LogisticRegression(l2: l2, maxIterations: maxIterations)
                .fit(trained.trainingRows, classes: report.labels.count, validation: trained.validationRows)
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        print("images \(report.training.count + (report.validation?.count ?? 0))")
        print("features \(report.featureCount)")
        print("extraction_seconds \(report.extraction.seconds)")
        print("cached_extraction_seconds \(again.report.extraction.seconds)")
        print("fit_seconds \(best)")
        print("iterations \(fit?.iterations ?? 0)")
        print("loss \(fit?.loss ?? 0)")
        print("training_accuracy \(report.training.accuracy)")
        print("validation_accuracy \(report.validation?.accuracy ?? 0)")
        try writeNumPy(trained.trainingRows.values, shape: [trained.trainingRows.count, trained.trainingRows.width], to: work + "/train.npy")
        try writeNumPy(trained.trainingRows.labels, to: work + "/train-labels.npy")
        try writeNumPy(trained.validationRows.values, shape: [trained.validationRows.count, trained.validationRows.width], to: work + "/validation.npy")
        try writeNumPy(trained.validationRows.labels, to: work + "/validation-labels.npy")
    }

    static func writeNumPy(_ values: [Float], shape: [Int], to path: String) throws {
        var body = Data(capacity: values.count * 4)
        for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { body.append(contentsOf: $0) } }
        try write(header: "<f4", shape: shape, body: body, to: path)
    }

    static func writeNumPy(_ labels: [Int], to path: String) throws {
        var body = Data(capacity: labels.count * 8)
        for label in labels { withUnsafeBytes(of: Int64(label).littleEndian) { body.append(contentsOf: $0) } }
        try write(header: "<i8", shape: [labels.count], body: body, to: path)
    }

    /// NumPy's format 1.0: magic, a header dictionary padded to 64 bytes, the values.
    private static func write(header type: String, shape: [Int], body: Data, to path: String) throws {
        let dimensions = shape.count == 1 ? "(\(shape[0]),)" : "(" + shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(type)', 'fortran_order': False, 'shape': \(dimensions), }"
        let unpadded = 10 + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - unpadded % 64) % 64) + "\n"
        var file = Data([0x93]) + Data("NUMPY".utf8) + Data([1, 0])
        let length = UInt16(header.utf8.count)
        file.append(contentsOf: [UInt8(length & 0xFF), UInt8(length >> 8)])
        file.append(Data(header.utf8))
        file.append(body)
        try file.write(to: URL(fileURLWithPath: path))
    }
}
