import Dispatch
import Foundation
import ImageDecoding
import ImageRequests
import ModelRuntime
import SystemIO

/// Object detection in process, as `modelc detect --crop-and-scale
/// scale-fill` does it: each image decoded and scaled, the detector run, its
/// boxes mapped back; `threads` images at a time. Prints `key value` lines:
/// the wall time of decoding alone and of the whole work.
enum DetectBenchmark {
    static func run(bundle: String, images directory: String, threads: Int) throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".jpg") }.sorted().map { directory + "/" + $0 }
        let model = try ImageModel(model: Model(contentsOf: bundle, configuration: ModelConfiguration(threads: 1)))
        let request = ImageRequest(model: model, cropAndScale: .scaleFill)
        let fitting = ImageFitting(width: Int(model.imageType.width), height: Int(model.imageType.height), cropAndScale: .scaleFill)
        // A first pass unmeasured: libvips started, the files in the page cache, the model's plan made.
        _ = try FileTiming.timed(files, threads: threads) { path in
            _ = try ImageRequestHandler(file: path).perform(request).recognizedObjects
        }
        let decodeSeconds = try FileTiming.timed(files, threads: threads) { path in
            _ = try ImageDecoder(pixelFormat: .gray).decode(file: path, fitting: fitting)
        }
        let totalSeconds = try FileTiming.timed(files, threads: threads) { path in
            _ = try ImageRequestHandler(file: path).perform(request).recognizedObjects
        }
        print("images \(files.count)")
        print("decode_s \(decodeSeconds)")
        print("total_s \(totalSeconds)")
    }
}
