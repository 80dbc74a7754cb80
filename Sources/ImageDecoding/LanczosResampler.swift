import Foundation
import SystemIO

/// Resamples 8-bit images with the Lanczos 3 kernel, separably (columns,
/// then rows): a real-valued source window to a whole number of pixels.
/// Shrinking widens the kernel by the scale factor (antialiased, as
/// Pillow's `LANCZOS` and Core Image's Lanczos scale); enlarging
/// interpolates with plain Lanczos 3.
///
/// Output pixel `i` of `n` covers source `start + i · length / n` to
/// `start + (i + 1) · length / n` (pixel edges at integers), so the window
/// is reproduced exactly: a linear ramp comes out as the ramp at each
/// mapped pixel centre. Samples beyond the image's edges repeat the edge
/// pixel; samples beyond the window but inside the image are the image's.
struct LanczosResampler {
    /// The source pixels each output pixel of one axis reads, and how much.
    struct Taps: Sendable {
        /// Per output pixel: the first source index read.
        var first: [Int]
        /// Taps per output pixel (the same for all; unused ones weigh 0, and
        /// none reaches past the image).
        var count: Int
        /// `first.count × count` weights, each row summing to 1.
        var weights: [Float]
        /// The source pixels read at all: `lowest..<highest` (the first of
        /// each output pixel up to its last of non-zero weight).
        var lowest: Int
        var highest: Int
    }

    /// Taps made for recent sizes: a run of images of one size computes its
    /// kernels once. Forgotten wholesale when it holds 64.
    private static let recent = Locked<[TapsKey: Taps]>([:])

    private struct TapsKey: Hashable {
        var start: Double
        var length: Double
        var output: Int
        var size: Int
    }

    /// `taps(start:length:output:size:)`, from the recent ones when it can.
    static func cachedTaps(start: Double, length: Double, output: Int, size: Int) -> Taps {
        let key = TapsKey(start: start, length: length, output: output, size: size)
        if let known = recent.withLock({ $0[key] }) { return known }
        let made = taps(start: start, length: length, output: output, size: size)
        recent.withLock { recent in
            if recent.count >= 64 { recent.removeAll() }
            recent[key] = made
        }
        return made
    }

    /// The taps for resampling the `length` source pixels from `start` (both
    /// real-valued) of an axis of `size` pixels to `output` pixels.
    static func taps(start: Double, length: Double, output: Int, size: Int) -> Taps {
        let scale = length / Double(output)
        let widening = max(1, scale)
        let support = 3 * widening
        let count = min(size, Int((2 * support).rounded(.up)) + 2)
        var first = [Int](repeating: 0, count: output)
        var weights = [Float](repeating: 0, count: output * count)
        var (lowest, highest) = (size, 0)
        var row = [Double](repeating: 0, count: count)
        for index in 0..<output {
            let centre = start + (Double(index) + 0.5) * scale
            let reach = Int((centre - support - 0.5).rounded(.down))
            // The first tap lies in the image, and all taps fit after it.
            let firstIndex = min(max(0, reach), size - count)
            first[index] = firstIndex
            lowest = min(lowest, firstIndex)
            for tap in row.indices { row[tap] = 0 }
            for source in reach...(reach + Int((2 * support).rounded(.up)) + 1) {
                let weight = lanczos3((Double(source) + 0.5 - centre) / widening)
                guard weight != 0 else { continue }
                // Beyond the edges: the edge pixel again.
                let clamped = min(max(source, 0), size - 1)
                row[clamped - firstIndex] += weight
            }
            let sum = row.reduce(0, +)
            for tap in 0..<count where row[tap] != 0 {
                weights[index * count + tap] = Float(row[tap] / sum)
                highest = max(highest, firstIndex + tap + 1)
            }
        }
        return Taps(first: first, count: count, weights: weights, lowest: min(lowest, highest), highest: highest)
    }

    static func lanczos3(_ x: Double) -> Double {
        if x == 0 { return 1 }
        guard abs(x) < 3 else { return 0 }
        let pix = Double.pi * x
        return 3 * sin(pix) * sin(pix / 3) / (pix * pix)
    }

    /// An 8-bit image resampled with `across` and `down` (made for its
    /// whole size): `pixels` starts at its pixel (`across.lowest`,
    /// `down.lowest`) and holds the rows and columns the taps read, rows
    /// `stride` bytes apart, `bands` interleaved bytes per pixel. When
    /// `alpha`, the last band is alpha and the others are premultiplied by
    /// it meanwhile. Returns `down.first.count` rows of `across.first.count`
    /// pixels, packed.
    ///
    /// Columns first: each output row is a weighted sum of whole source rows
    /// (a loop over contiguous floats, which the compiler vectorizes); then
    /// each of those rows is brought to the output width, the bands of a
    /// pixel summed side by side.
    static func resample(_ pixels: UnsafeBufferPointer<UInt8>, stride: Int, bands: Int, alpha: Bool,
                         across: Taps, down: Taps) -> [UInt8] {
        let (outputWidth, outputHeight) = (across.first.count, down.first.count)
        let columns = (across.highest - across.lowest) * bands
        var resampledDown = [Float](repeating: 0, count: outputHeight * columns)
        resampledDown.withUnsafeMutableBufferPointer { resampledDown in
            guard alpha else {
                return accumulate(pixels, stride: stride, columns: columns, down: down, into: resampledDown)
            }
            let rows = down.highest - down.lowest
            var premultiplied = [Float](repeating: 0, count: rows * columns)
            for row in 0..<rows {
                for pixel in Swift.stride(from: 0, to: columns, by: bands) {
                    let index = row * stride + pixel
                    let opacity = Float(pixels[index + bands - 1])
                    for band in 0..<(bands - 1) {
                        premultiplied[row * columns + pixel + band] = Float(pixels[index + band]) * opacity / 255
                    }
                    premultiplied[row * columns + pixel + bands - 1] = opacity
                }
            }
            premultiplied.withUnsafeBufferPointer {
                accumulate($0, stride: columns, columns: columns, down: down, into: resampledDown)
            }
        }
        let rowLength = outputWidth * bands
        var output = [UInt8](repeating: 0, count: outputHeight * rowLength)
        output.withUnsafeMutableBufferPointer { output in
            resampledDown.withUnsafeBufferPointer { resampledDown in
                across.weights.withUnsafeBufferPointer { weights in
                    for y in 0..<outputHeight {
                        let line = y * columns
                        for x in 0..<outputWidth {
                            let first = across.first[x] - across.lowest
                            let taps = max(0, min(across.count, across.highest - across.first[x]))
                            let kernel = UnsafeBufferPointer(rebasing: weights[(x * across.count)..<(x * across.count + taps)])
                            let start = line + first * bands
                            let source = UnsafeBufferPointer(rebasing: resampledDown[start..<(start + taps * bands)])
                            let out = y * rowLength + x * bands
                            if alpha {
                                var sums = [Float](repeating: 0, count: bands)
                                for tap in 0..<taps {
                                    for band in 0..<bands { sums[band] += kernel[tap] * source[bands &* tap &+ band] }
                                }
                                let opacity = sums[bands - 1]
                                for band in 0..<(bands - 1) {
                                    output[out + band] = opacity > 0 ? byte(sums[band] * 255 / opacity) : 0
                                }
                                output[out + bands - 1] = byte(opacity)
                            } else if bands == 3 {
                                var (red, green, blue): (Float, Float, Float) = (0, 0, 0)
                                for tap in 0..<taps {
                                    let weight = kernel[tap]
                                    red += weight * source[3 &* tap]
                                    green += weight * source[3 &* tap &+ 1]
                                    blue += weight * source[3 &* tap &+ 2]
                                }
                                output[out] = byte(red)
                                output[out + 1] = byte(green)
                                output[out + 2] = byte(blue)
                            } else if bands == 1 {
                                // Four partial sums: the additions overlap instead of waiting on each other.
                                var sums: (Float, Float, Float, Float) = (0, 0, 0, 0)
                                var tap = 0
                                while tap &+ 4 <= taps {
                                    sums.0 += kernel[tap] * source[tap]
                                    sums.1 += kernel[tap &+ 1] * source[tap &+ 1]
                                    sums.2 += kernel[tap &+ 2] * source[tap &+ 2]
                                    sums.3 += kernel[tap &+ 3] * source[tap &+ 3]
                                    tap &+= 4
                                }
                                while tap < taps {
                                    sums.0 += kernel[tap] * source[tap]
                                    tap &+= 1
                                }
                                output[out] = byte((sums.0 + sums.1) + (sums.2 + sums.3))
                            } else {
                                for band in 0..<bands {
                                    var sum: Float = 0
                                    for tap in 0..<taps {
                                        sum += kernel[tap] * source[bands &* tap &+ band]
                                    }
                                    output[out + band] = byte(sum)
                                }
                            }
                        }
                    }
                }
            }
        }
        return output
    }

    /// The down pass: each output row the weighted sum of the source rows
    /// its taps read (`source` starts at row `down.lowest`).
    private static func accumulate<Sample: ResampledSample>(
        _ source: UnsafeBufferPointer<Sample>, stride: Int, columns: Int, down: Taps,
        into resampled: UnsafeMutableBufferPointer<Float>
    ) {
        down.weights.withUnsafeBufferPointer { weights in
            for y in 0..<down.first.count {
                let first = down.first[y]
                let out = y * columns
                for tap in 0..<max(0, min(down.count, down.highest - first)) {
                    let weight = weights[y * down.count + tap]
                    guard weight != 0 else { continue }
                    let line = (first + tap - down.lowest) * stride
                    // Rebased buffers and a plain index: a loop the compiler vectorizes.
                    let row = UnsafeBufferPointer(rebasing: source[line..<(line + columns)])
                    let target = UnsafeMutableBufferPointer(rebasing: resampled[out..<(out + columns)])
                    for column in 0..<columns {
                        target[column] += weight * row[column].resampledValue
                    }
                }
            }
        }
    }

    /// A sum rounded to the nearest byte value.
    @inline(__always)
    private static func byte(_ value: Float) -> UInt8 {
        let rounded = value + 0.5
        return rounded <= 0 ? 0 : rounded >= 255 ? 255 : UInt8(rounded)
    }
}

/// What the down pass reads: bytes, or premultiplied floats.
protocol ResampledSample {
    var resampledValue: Float { get }
}

extension UInt8: ResampledSample {
    @inline(__always) var resampledValue: Float { Float(self) }
}

extension Float: ResampledSample {
    @inline(__always) var resampledValue: Float { self }
}
