import Dispatch
import Foundation
import ImageDecoding
import ImageRequests
import ModelRuntime
import SystemIO

/// Image classification end to end, as `modelc classify` does it: each image
/// decoded, cropped and scaled, then run, `threads` images at a time (each
/// prediction on one thread). Prints `key value` lines: the wall time of
/// decoding alone and of the whole work, and the model's open time.
enum ClassifyBenchmark {
    static func run(bundle: String, images directory: String, threads: Int) throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".jpg") }.sorted().map { directory + "/" + $0 }
        let opening = ContinuousClock.now
        let model = try ImageModel(model: Model(contentsOf: bundle, configuration: ModelConfiguration(threads: 1)))
        let openSeconds = (ContinuousClock.now - opening).inSeconds
        let request = ImageRequest(model: model)
        let fitting = ImageFitting(width: Int(model.imageType.width), height: Int(model.imageType.height))

        // Decoding, orientation, crop and scale alone.
        let decodeSeconds = try FileTiming.timed(files, threads: threads) { path in
            _ = try ImageDecoder(pixelFormat: .rgb).decode(file: path, fitting: fitting)
        }
        // The whole request: decode, fit, predict, observations sorted.
        let totalSeconds = try FileTiming.timed(files, threads: threads) { path in
            _ = try ImageRequestHandler(file: path).perform(request).classifications.prefix(5)
        }
        print("images \(files.count)")
        print("open_s \(openSeconds)")
        print("decode_s \(decodeSeconds)")
        print("total_s \(totalSeconds)")
    }
}
