import Foundation
import ImageDecoding
import ModelFeatures

/// Transformed copies of training images, as Create ML's augmentation
/// options: each kind adds one copy of every training image.
///
/// Random parameters come from a generator seeded by the training seed, the
/// image's content hash and the kind, so a copy is the same in every run.
public enum Augmentation: String, Sendable, CaseIterable, Comparable {
    /// Mirrored left to right.
    case flip
    /// A random region of 70–95 % of the sides, scaled back to full size.
    case crop
    /// Turned by a random angle within ±20°, the border repeated.
    case rotate
    /// A 3×3 box blur, applied once or twice.
    case blur
    /// Brighter or darker by up to one stop.
    case exposure
    /// Gaussian noise, standard deviation 8 levels.
    case noise

    public static func < (a: Augmentation, b: Augmentation) -> Bool {
        allCases.firstIndex(of: a) ?? 0 < allCases.firstIndex(of: b) ?? 0
    }

    /// Parses `flip,crop,…`.
    ///
    /// - Throws: `TrainingError.invalidOption` naming an unknown kind.
    public static func parse(_ list: String) throws(TrainingError) -> [Augmentation] {
        var kinds: [Augmentation] = []
        for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let kind = Augmentation(rawValue: name) else {
                throw .invalidOption(name: "augment", reason: "unknown kind \"\(name)\" (expected \(allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            if !kinds.contains(kind) { kinds.append(kind) }
        }
        return kinds.sorted()
    }

    /// What the copy's features are cached under: the kind, and the seed when it is random.
    func cacheTag(seed: UInt64) -> String {
        self == .flip ? rawValue : "\(rawValue)-\(seed)"
    }

    /// The transformed copy of `image` (already at the network's input size).
    func apply(to image: PixelBuffer, seed: UInt64, contentHash: String) -> PixelBuffer {
        var random = SplitMix64(seed: seed ^ stableHash(contentHash + "/" + rawValue))
        let width = image.width, height = image.height, channels = image.pixelFormat.bytesPerPixel
        let source = Pixels(image)
        var output = [UInt8](repeating: 0, count: width * height * channels)
        switch self {
        case .flip:
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<channels { output[(y * width + x) * channels + c] = source[width - 1 - x, y, c] }
                }
            }
        case .crop:
            let fraction = 0.70 + 0.25 * random.unit()
            let cropWidth = Double(width) * fraction, cropHeight = Double(height) * fraction
            let left = random.unit() * (Double(width) - cropWidth), top = random.unit() * (Double(height) - cropHeight)
            for y in 0..<height {
                for x in 0..<width {
                    let sx = left + (Double(x) + 0.5) * cropWidth / Double(width) - 0.5
                    let sy = top + (Double(y) + 0.5) * cropHeight / Double(height) - 0.5
                    for c in 0..<channels { output[(y * width + x) * channels + c] = source.bilinear(sx, sy, c) }
                }
            }
        case .rotate:
            let angle = (random.unit() * 2 - 1) * 20 * Double.pi / 180
            let cosine = cos(angle), sine = sin(angle)
            let cx = Double(width - 1) / 2, cy = Double(height - 1) / 2
            for y in 0..<height {
                for x in 0..<width {
                    let dx = Double(x) - cx, dy = Double(y) - cy
                    let sx = cx + cosine * dx + sine * dy, sy = cy - sine * dx + cosine * dy
                    for c in 0..<channels { output[(y * width + x) * channels + c] = source.bilinear(sx, sy, c) }
                }
            }
        case .blur:
            var current = source
            let passes = 1 + Int(random.next() % 2)
            for _ in 0..<passes {
                for y in 0..<height {
                    for x in 0..<width {
                        for c in 0..<channels {
                            var sum = 0
                            for oy in -1...1 {
                                for ox in -1...1 { sum += Int(current[x + ox, y + oy, c]) }
                            }
                            output[(y * width + x) * channels + c] = UInt8((sum + 4) / 9)
                        }
                    }
                }
                current = Pixels(width: width, height: height, channels: channels, bytes: output)
            }
        case .exposure:
            let gain = pow(2, random.unit() * 2 - 1)
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<channels { output[(y * width + x) * channels + c] = clamped(Double(source[x, y, c]) * gain) }
                }
            }
        case .noise:
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<channels { output[(y * width + x) * channels + c] = clamped(Double(source[x, y, c]) + 8 * random.gaussian()) }
                }
            }
        }
        guard let result = PixelBuffer(width: width, height: height, pixelFormat: image.pixelFormat, bytes: output) else {
            preconditionFailure("the copy has the image's size")
        }
        return result
    }
}

private func clamped(_ value: Double) -> UInt8 {
    UInt8(max(0, min(255, value.rounded())))
}

/// Packed pixels read with coordinates clamped to the border.
private struct Pixels {
    let width: Int
    let height: Int
    let channels: Int
    let bytes: [UInt8]

    init(width: Int, height: Int, channels: Int, bytes: [UInt8]) {
        self.width = width
        self.height = height
        self.channels = channels
        self.bytes = bytes
    }

    init(_ image: PixelBuffer) {
        width = image.width
        height = image.height
        channels = image.pixelFormat.bytesPerPixel
        let rowBytes = width * channels
        var packed = [UInt8]()
        packed.reserveCapacity(rowBytes * height)
        for y in 0..<height { packed += image.bytes[(y * image.bytesPerRow)..<(y * image.bytesPerRow + rowBytes)] }
        bytes = packed
    }

    subscript(x: Int, y: Int, c: Int) -> UInt8 {
        let cx = min(max(x, 0), width - 1), cy = min(max(y, 0), height - 1)
        return bytes[(cy * width + cx) * channels + c]
    }

    func bilinear(_ x: Double, _ y: Double, _ c: Int) -> UInt8 {
        let x0 = Int(x.rounded(.down)), y0 = Int(y.rounded(.down))
        let fx = x - Double(x0), fy = y - Double(y0)
        let top = Double(self[x0, y0, c]) * (1 - fx) + Double(self[x0 + 1, y0, c]) * fx
        let bottom = Double(self[x0, y0 + 1, c]) * (1 - fx) + Double(self[x0 + 1, y0 + 1, c]) * fx
        return clamped(top * (1 - fy) + bottom * fy)
    }
}

/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64):
/// the same numbers on every platform.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// Standard normal (Box–Muller).
    mutating func gaussian() -> Double {
        let u = max(unit(), 0x1.0p-53)
        return (-2 * log(u)).squareRoot() * cos(2 * Double.pi * unit())
    }
}

/// FNV-1a of the UTF-8 bytes: a hash that, unlike `Hasher`, is the same in every process.
func stableHash(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01B3
    }
    return hash
}
