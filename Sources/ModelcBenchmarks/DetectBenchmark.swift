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
        _ = try timed(files, threads: threads) { path in
            _ = try ImageRequestHandler(file: path).perform(request).recognizedObjects
        }
        let decodeSeconds = try timed(files, threads: threads) { path in
            _ = try ImageDecoder(pixelFormat: .gray).decode(file: path, fitting: fitting)
        }
        let totalSeconds = try timed(files, threads: threads) { path in
            _ = try ImageRequestHandler(file: path).perform(request).recognizedObjects
        }
        print("images \(files.count)")
        print("decode_s \(decodeSeconds)")
        print("total_s \(totalSeconds)")
    }

    /// Wall seconds to run `work` on every file, `threads` at a time.
    private static func timed(_ files: [String], threads: Int, _ work: @escaping @Sendable (String) throws -> Void) throws -> Double {
        let next = Locked(0)
        let failure = Locked<(any Error)?>(nil)
        let start = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            while true {
                let index = next.withLock { next in
                    defer { next += 1 }
                    return next
                }
                guard index < files.count else { return }
                do { try work(files[index]) } catch { failure.withLock { $0 = $0 ?? error } }
            }
        }
        let seconds = (ContinuousClock.now - start).inSeconds
        if let error = failure.withLock({ $0 }) { throw error }
        return seconds
    }
}
