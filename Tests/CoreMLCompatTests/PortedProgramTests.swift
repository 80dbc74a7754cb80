// An iOS program's model code, ported: the imports changed, nothing else.
// It downloads a model, compiles it with MLModel.compileModel(at:), keeps
// the compiled model, wraps it for Vision, and classifies camera frames and
// photos: the top three labels, and the confidence for one label.
import CoreMLCompat // was: import CoreML; import Vision
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class ImageChecker {
    enum CheckError: Error { case noModel, labelNotFound(String) }

    private(set) var mlModel: VNCoreMLModel?
    private let storage: URL

    init(storage: URL) {
        self.storage = storage
    }

    /// Downloads the model at `remote`, then sets Vision up with it.
    func download(_ remote: URL, completion: @escaping @Sendable (URL?, (any Error)?) -> Void) {
        let task = URLSession.shared.downloadTask(with: remote) { location, _, error in
            guard let location else { return completion(nil, error) }
            let url = location.deletingLastPathComponent().appendingPathComponent(remote.lastPathComponent)
            do {
                try? FileManager.default.removeItem(at: url)
                try FileManager.default.moveItem(at: location, to: url)
            } catch {
                return completion(nil, error)
            }
            completion(url, nil)
        }
        task.resume()
    }

    func setupVision(url: URL) throws {
        let compiledUrl = try MLModel.compileModel(at: url)
        let fileManager = FileManager.default
        let permanentUrl = storage.appendingPathComponent(compiledUrl.lastPathComponent)
        if fileManager.fileExists(atPath: permanentUrl.path) {
            _ = try fileManager.replaceItemAt(permanentUrl, withItemAt: compiledUrl)
        } else {
            try fileManager.copyItem(at: compiledUrl, to: permanentUrl)
        }
        let model = try MLModel(contentsOf: permanentUrl)
        mlModel = try VNCoreMLModel(for: model)
    }

    /// The three most likely labels for a camera frame.
    func analyze(pixelBuffer: CVPixelBuffer) throws -> [(String, Float)] {
        guard let mlModel else { throw CheckError.noModel }
        var top: [(String, Float)] = []
        let request = VNCoreMLRequest(model: mlModel) { request, _ in
            guard let results = request.results as? [VNClassificationObservation] else { return }
            for r in results.prefix(3) {
                top.append((r.identifier, r.confidence))
            }
        }
        let handler = VNImageRequestHandler(cvPixelBuffer: pixelBuffer, options: [:])
        try handler.perform([request])
        return top
    }

    /// The model's confidence that the photo at `url` is `label`.
    func confidence(of label: String, photo url: URL) throws -> Float {
        guard let mlModel else { throw CheckError.noModel }
        var found: Result<Float, any Error> = .failure(CheckError.labelNotFound(label))
        let request = VNCoreMLRequest(model: mlModel, completionHandler: { request, error in
            if let error {
                found = .failure(error)
                return
            }
            for observation in request.results as? [VNClassificationObservation] ?? [] where observation.identifier == label {
                found = .success(observation.confidence)
                return
            }
        })
        request.imageCropAndScaleOption = .centerCrop
        let handler = VNImageRequestHandler(url: url, options: [:])
        try handler.perform([request])
        return try found.get()
    }
}

// Seed 000's face → emotion pipeline ("unang hanapin ang mga mukha, pagkatapos
// ay i-classify ang bawat mukha"), ported. Changed: the imports; the model is
// opened from a file instead of Xcode's generated `EmotionClassifier()`
// class, and `guard let … = try VNCoreMLModel(…) else { return }` (which
// Swift refuses: the initializer does not return an optional) is a `let`.
// The loop over `faceRequest.results` is the seed's, line for line.
final class EmotionReader {
    private let handler: VNImageRequestHandler
    private let emotionModel: VNCoreMLModel

    init(image: URL, emotionClassifier: URL) throws {
        handler = VNImageRequestHandler(url: image, options: [:])
        emotionModel = try VNCoreMLModel(for: MLModel(contentsOf: emotionClassifier))
    }

    /// Each face's box and the emotion classifier's labels for it.
    func read() throws -> [(CGRect, [VNClassificationObservation])] {
        var found: [(CGRect, [VNClassificationObservation])] = []

        // 1. Detection ng mukha
        let faceRequest = VNDetectFaceRectanglesRequest()

        // 2. Klasipikasyon ng emosyon sa pamamagitan ng Core ML
        let emotionRequest = VNCoreMLRequest(model: emotionModel)
        try handler.perform([faceRequest, emotionRequest])

        // 3. Itakda ang regionOfInterest para sa bawat mukha
        for face in faceRequest.results as? [VNFaceObservation] ?? [] {
            emotionRequest.regionOfInterest = face.boundingBox
            try handler.perform([emotionRequest])
            // Iproseso ang resulta ng klasipikasyon ng emosyon
            found.append((face.boundingBox, emotionRequest.results as? [VNClassificationObservation] ?? []))
        }
        return found
    }
}
