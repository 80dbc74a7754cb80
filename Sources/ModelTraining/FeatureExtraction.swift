import Dispatch
import Foundation
import ImageDecoding
import ModelFeatures
import SystemIO

/// Feature vectors already computed, one small file each under
/// `DIRECTORY/features/<network digest>/`, named by the image's content hash
/// and the augmentation. A file whose size is wrong is ignored (recomputed).
public struct FeatureCache: Sendable {
    public let directory: String

    /// The cache under `root` (`$MODELC_CACHE`, as the other caches) for one network.
    public init(root: String, network: FeatureNetwork) {
        directory = root + "/features/" + network.digest.prefix(32)
    }

    func path(contentHash: String, tag: String) -> String {
        directory + "/" + contentHash.prefix(2) + "/" + contentHash + (tag.isEmpty ? "" : "." + tag) + ".f32"
    }

    func load(contentHash: String, tag: String, count: Int) -> [Float]? {
        guard let data = FileManager.default.contents(atPath: path(contentHash: contentHash, tag: tag)),
              data.count == count * 4 else { return nil }
        return data.withUnsafeBytes { raw in
            (0..<count).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
        }
    }

    /// Stores a vector (best effort: a cache that cannot be written is only slower).
    func store(_ values: [Float], contentHash: String, tag: String) {
        let file = path(contentHash: contentHash, tag: tag)
        try? FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var data = Data(capacity: values.count * 4)
        for value in values { withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
        try? data.write(to: URL(fileURLWithPath: file), options: .atomic)
    }
}

/// One image to turn into features: the original and the augmented copies wanted.
public struct ImageJob: Sendable, Equatable {
    public var path: String
    public var label: Int
    public var augmentations: [Augmentation]

    public init(path: String, label: Int, augmentations: [Augmentation] = []) {
        self.path = path
        self.label = label
        self.augmentations = augmentations
    }
}

/// The features of a batch of images, in the jobs' order.
public struct ExtractedFeatures: Sendable {
    /// Per job: the original's vector, then one per augmentation; `nil` when the image was skipped.
    public var vectors: [[[Float]]?]
    /// Images that could not be read or decoded: path and reason.
    public var skipped: [(path: String, reason: String)]
    /// Vectors read from the cache, and computed.
    public var cacheHits: Int
    public var computed: Int
    public var seconds: Double
}

/// Computes feature vectors of image files with a `FeatureNetwork`, in
/// parallel, through a `FeatureCache`.
public struct FeatureExtractor: Sendable {
    public let network: FeatureNetwork
    public let cache: FeatureCache?
    public let seed: UInt64
    public let threads: Int

    public init(network: FeatureNetwork, cache: FeatureCache?, seed: UInt64,
                threads: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.network = network
        self.cache = cache
        self.seed = seed
        self.threads = max(1, threads)
    }

    /// The features of every job; `progress(done, total)` is called as images finish (from any thread).
    public func extract(_ jobs: [ImageJob], progress: @Sendable (Int, Int) -> Void = { _, _ in }) -> ExtractedFeatures {
        let start = DispatchTime.now().uptimeNanoseconds
        let results = Locked([Result<(vectors: [[Float]], hits: Int), ImageFailure>?](repeating: nil, count: jobs.count))
        let next = Locked(0)
        let finished = Locked(0)
        DispatchQueue.concurrentPerform(iterations: min(threads, max(jobs.count, 1))) { _ in
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < jobs.count else { return }
                let result = features(jobs[index])
                results.withLock { $0[index] = result }
                let done = finished.withLock { value -> Int in
                    value += 1
                    return value
                }
                progress(done, jobs.count)
            }
        }
        var extracted = ExtractedFeatures(vectors: [], skipped: [], cacheHits: 0, computed: 0, seconds: 0)
        for (job, result) in zip(jobs, results.withLock { $0 }) {
            switch result {
            case .success(let value)?:
                extracted.vectors.append(value.vectors)
                extracted.cacheHits += value.hits
                extracted.computed += value.vectors.count - value.hits
            case .failure(let failure)?:
                extracted.vectors.append(nil)
                extracted.skipped.append((job.path, failure.reason))
            case nil:
                extracted.vectors.append(nil)
                extracted.skipped.append((job.path, "not processed"))
            }
        }
        extracted.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return extracted
    }

    struct ImageFailure: Error {
        var reason: String
    }

    private func features(_ job: ImageJob) -> Result<(vectors: [[Float]], hits: Int), ImageFailure> {
        let bytes: [UInt8]
        do {
            let file = try MappedFile(path: job.path)
            bytes = withExtendedLifetime(file) { Array(file.bytes) }
        } catch {
            return .failure(ImageFailure(reason: "cannot read the file"))
        }
        let hash = SHA256Digest.of(bytes).description
        let tags = [""] + job.augmentations.map { $0.cacheTag(seed: seed) }
        var vectors = tags.map { cache?.load(contentHash: hash, tag: $0, count: network.featureCount) }
        let hits = vectors.count { $0 != nil }
        if hits == vectors.count { return .success((vectors.compactMap { $0 }, hits)) }

        let decoder = ImageDecoder(pixelFormat: network.pixelFormat)
        let fitting = ImageFitting(width: Int(network.imageType.width), height: Int(network.imageType.height), cropAndScale: .centerCrop)
        let image: PixelBuffer
        do {
            image = try decoder.decode(bytes: bytes, name: job.path, fitting: fitting)
        } catch {
            return .failure(ImageFailure(reason: Self.reason(error)))
        }
        for (index, tag) in tags.enumerated() where vectors[index] == nil {
            let input = index == 0 ? image : job.augmentations[index - 1].apply(to: image, seed: seed, contentHash: hash)
            do {
                let values = try network.features(of: input)
                cache?.store(values, contentHash: hash, tag: tag)
                vectors[index] = values
            } catch {
                return .failure(ImageFailure(reason: error.description))
            }
        }
        return .success((vectors.compactMap { $0 }, hits))
    }

    /// The decoder's message without the path (the report names the file).
    static func reason(_ error: ImageError) -> String {
        switch error {
        case .unreadable(_, let reason): "cannot read the image: \(reason)"
        case .unsupportedFormat: "not an image in a format modelc decodes"
        case .damaged(_, let reason): "damaged image: \(reason)"
        default: error.description
        }
    }
}
