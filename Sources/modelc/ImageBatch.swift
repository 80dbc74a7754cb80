import ExitCodes
import ImageRequests
import ModelFeatures
import SystemIO

/// One piece of work per image on several threads, each result printed in
/// order as soon as it and those before it are done. An image that fails is
/// named on standard error (a JSON error line with `json`) and the others go
/// on; the exit code is the first failure's.
enum ImageBatch {
    static func run<Value: Sendable>(_ images: [ImageFiles.Entry], threads: Int, json: Bool, label: String,
                                     work: @escaping @Sendable (String) throws(ImageRequestError) -> Value,
                                     text: (String, Value) -> String) -> ExitCode {
        var failures: [ImageRequestError] = []
        let progress = json ? nil : ProgressLine.forTerminal(label: label)
        OrderedParallelWork.run(count: images.count, threads: threads, window: max(1, threads) * 8) { index in
            let image = images[index]
            return Result { () throws(ImageRequestError) -> Value in
                if let problem = image.problem { throw .image(problem) }
                return try work(image.path)
            }
        } deliver: { index, result in
            let image = images[index]
            progress?.finish()
            switch result {
            case .success(let value):
                Output.print(text(image.path, value))
            case .failure(let error):
                failures.append(error)
                if json {
                    Output.print("{\"image\": \(FeatureJSON.quoted(image.path)), \"error\": \(FeatureJSON.quoted(error.description))}\n")
                } else {
                    Output.error("\(Modelc.toolName): error: \(error)\n")
                }
            }
            progress?.update(items: index + 1, of: images.count, unit: "images")
        }
        progress?.finish()
        guard let first = failures.first else { return .success }
        if images.count > 1, !json {
            Output.error("\(Modelc.toolName): \(failures.count) of \(images.count) images failed\n")
        }
        return ExitCode(first)
    }

    /// Writes what `--draw DIR` and `--output-dir DIR` ask for of one image's result.
    static func writeFiles(_ result: ImageRequestResult, image: String, draw: String?, outputs: String?) throws(ImageRequestError) {
        if let draw {
            if case .recognizedObjects = result.observations {
                try DetectCommand.draw(result, image: image, into: draw)
            } else {
                try ImageOutputs.drawMask(result, image: image, into: draw)
            }
        }
        if let outputs {
            try ImageOutputs.write(result, image: image, into: outputs)
        }
    }
}
