import Dispatch
import ImageDecoding
import ModelFeatures

/// Performs image requests on one image (Vision's `VNImageRequestHandler`):
/// a file, encoded bytes, or a pixel buffer such as a camera frame.
///
/// Performing several requests decodes the image once. A value type, safe
/// to use from many threads.
public struct ImageRequestHandler: Sendable {
    /// Where the image comes from.
    public enum Source: Sendable {
        case file(String)
        /// An encoded image (JPEG, PNG, …); `name` stands for it in errors.
        case bytes([UInt8], name: String)
        /// Pixels in memory, in any of `PixelBuffer`'s layouts.
        case pixelBuffer(PixelBuffer)
    }

    public let source: Source
    /// How to turn the image upright; `nil`: the file's EXIF orientation
    /// (for a pixel buffer, as it is).
    public let orientation: ImageOrientation?

    public init(file path: String, orientation: ImageOrientation? = nil) {
        source = .file(path)
        self.orientation = orientation
    }

    public init(bytes: [UInt8], name: String = "image data", orientation: ImageOrientation? = nil) {
        source = .bytes(bytes, name: name)
        self.orientation = orientation
    }

    public init(pixelBuffer: PixelBuffer, orientation: ImageOrientation? = nil) {
        source = .pixelBuffer(pixelBuffer)
        self.orientation = orientation
    }

    /// What names the image in messages.
    public var name: String {
        switch source {
        case .file(let path): path
        case .bytes(_, let name): name
        case .pixelBuffer: "pixel buffer"
        }
    }

    /// Performs `requests` on the calling thread, one result per request in
    /// order. Every model must be held, not come through a cache.
    ///
    /// - Throws: the first failure: the image (`.image`), or a model
    ///   (`.model`, `.cachedModelNeedsAsync`).
    public func perform(_ requests: [ImageRequest]) throws(ImageRequestError) -> [ImageRequestResult] {
        let images = try preparedImages(for: requests)
        var results: [ImageRequestResult] = []
        for (request, image) in zip(requests, images) {
            let outputs = try request.model.prediction(from: request.model.inputs(with: image.image))
            results.append(request.result(from: outputs, image: image))
        }
        return results
    }

    /// Performs `requests` (the image decoded off the caller's task), one
    /// result per request in order; models that come through a cache are
    /// leased for their prediction.
    ///
    /// - Throws: as the synchronous `perform`, never `.cachedModelNeedsAsync`.
    public func perform(_ requests: [ImageRequest]) async throws(ImageRequestError) -> [ImageRequestResult] {
        let images = try await Self.offTask { () throws(ImageRequestError) in try preparedImages(for: requests) }
        var results: [ImageRequestResult] = []
        for (request, image) in zip(requests, images) {
            let outputs = try await request.model.prediction(from: request.model.inputs(with: image.image))
            results.append(request.result(from: outputs, image: image))
        }
        return results
    }

    /// Performs one request on the calling thread.
    public func perform(_ request: ImageRequest) throws(ImageRequestError) -> ImageRequestResult {
        try perform([request])[0]
    }

    /// Performs one request.
    public func perform(_ request: ImageRequest) async throws(ImageRequestError) -> ImageRequestResult {
        try await perform([request])[0]
    }

    // MARK: - The image, once for every request

    /// The model input image of each request. One request, or requests that
    /// all want the same fixed fitting, decode straight to it (JPEGs shrink
    /// while decoding); otherwise the image is decoded upright once and
    /// each distinct fitting is made from that.
    func preparedImages(for requests: [ImageRequest]) throws(ImageRequestError) -> [FittedImage] {
        for request in requests where !request.regionOfInterest.isValid {
            throw .image(.invalidRegionOfInterest(request.regionOfInterest))
        }
        let fixed = requests.map { request in request.fixedFitting.map { Preparation(fitting: $0, pixelFormat: request.pixelFormat) } }
        do throws(ImageError) {
            if case .pixelBuffer(let buffer) = source {
                return try prepare(requests, fixed: fixed, upright: buffer, orientation: orientation ?? .up)
            }
            if let first = fixed.first, let only = first, fixed.allSatisfy({ $0 == only }) {
                let image = try decode(ImageDecoder(pixelFormat: only.pixelFormat), fitting: only.fitting)
                return Array(repeating: image, count: requests.count)
            }
            let upright = try decode(ImageDecoder(pixelFormat: .rgb), fitting: nil).image
            return try prepare(requests, fixed: fixed, upright: upright, orientation: .up)
        } catch {
            throw .image(error)
        }
    }

    /// What one request needs of the image.
    private struct Preparation: Equatable {
        var fitting: ImageFitting
        var pixelFormat: PixelBuffer.PixelFormat
    }

    private func decode(_ decoder: ImageDecoder, fitting: ImageFitting?) throws(ImageError) -> FittedImage {
        switch source {
        case .file(let path):
            return try decoder.decodeFitted(file: path, orientation: orientation, fitting: fitting)
        case .bytes(let bytes, let name):
            return try bytes.withUnsafeBytes { buffer in
                Result { () throws(ImageError) -> FittedImage in
                    try decoder.decodeFitted(bytes: buffer, name: name, orientation: orientation, fitting: fitting)
                }
            }.get()
        case .pixelBuffer(let buffer):
            let turned = orientation ?? .up
            let (width, height) = turned.swapsWidthAndHeight ? (buffer.height, buffer.width) : (buffer.width, buffer.height)
            return FittedImage(image: try decoder.fit(buffer, orientation: turned, fitting: fitting), fitting: fitting,
                               sourceWidth: width, sourceHeight: height, uprightWidth: width, uprightHeight: height)
        }
    }

    /// Each request's image made from pixels in memory, each distinct
    /// preparation once.
    private func prepare(_ requests: [ImageRequest], fixed: [Preparation?], upright buffer: PixelBuffer,
                         orientation: ImageOrientation) throws(ImageError) -> [FittedImage] {
        let (width, height) = orientation.swapsWidthAndHeight ? (buffer.height, buffer.width) : (buffer.width, buffer.height)
        var made: [(Preparation, FittedImage)] = []
        var images: [FittedImage] = []
        for (request, known) in zip(requests, fixed) {
            let preparation = known ?? Preparation(fitting: request.fitting(imageWidth: width, imageHeight: height),
                                                   pixelFormat: request.pixelFormat)
            if let done = made.first(where: { $0.0 == preparation }) {
                images.append(done.1)
                continue
            }
            let pixels = try ImageDecoder(pixelFormat: preparation.pixelFormat)
                .fit(buffer, orientation: orientation, fitting: preparation.fitting)
            let image = FittedImage(image: pixels, fitting: preparation.fitting, sourceWidth: width, sourceHeight: height,
                                    uprightWidth: width, uprightHeight: height)
            made.append((preparation, image))
            images.append(image)
        }
        return images
    }

    /// Runs CPU-bound work on a Dispatch thread so that the cooperative pool stays free.
    private static func offTask<T: Sendable>(_ work: @escaping @Sendable () throws(ImageRequestError) -> T) async throws(ImageRequestError) -> T {
        let result: Result<T, ImageRequestError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { () throws(ImageRequestError) -> T in try work() })
            }
        }
        return try result.get()
    }
}
