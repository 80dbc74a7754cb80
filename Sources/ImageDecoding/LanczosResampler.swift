import Foundation
import Synchronization

/// Shrinks 8-bit images with the Lanczos 3 kernel widened by the scale
/// factor (antialiased, as libvips' `vips_resize` and Pillow's `LANCZOS`
/// shrink), separably: columns, then rows. Used by the direct JPEG path
/// (`ImageDecoder+JPEG.swift`); everything else is resampled by libvips.
///
/// Pixel centres line up: output pixel `i` of `n` covers source pixels
/// `offset + i · length / n` to `offset + (i + 1) · length / n`, so a
/// shrunk image keeps its geometry to a small fraction of a pixel. Samples
/// beyond the edges repeat the edge pixel. Enlarging is not done here.
struct LanczosResampler {
    /// The source pixels each output pixel of one axis reads, and how much.
    struct Taps: Sendable {
        /// Per output pixel: the first source index read.
        var first: [Int]
        /// Taps per output pixel (the same for all; unused ones weigh 0).
        var count: Int
        /// `first.count × count` weights, each row summing to 1.
        var weights: [Float]
    }

    /// Taps made for recent sizes: a run of images of one size computes its
    /// kernels once. Forgotten wholesale when it holds 64.
    private static let recent = Mutex<[TapsKey: Taps]>([:])

    private struct TapsKey: Hashable {
        var offset: Int
        var length: Int
        var output: Int
    }

    /// `taps(offset:length:output:)`, from the recent ones when it can.
    static func cachedTaps(offset: Int, length: Int, output: Int) -> Taps {
        let key = TapsKey(offset: offset, length: length, output: output)
        if let known = recent.withLock({ $0[key] }) { return known }
        let made = taps(offset: offset, length: length, output: output)
        recent.withLock { recent in
            if recent.count >= 64 { recent.removeAll() }
            recent[key] = made
        }
        return made
    }

    /// The taps for shrinking `length` source pixels starting at `offset`
    /// to `output` pixels; `output ≤ length`.
    static func taps(offset: Int, length: Int, output: Int) -> Taps {
        let scale = Double(length) / Double(output)
        let support = 3 * scale
        let count = Int((2 * support).rounded(.up)) + 2
        var first = [Int](repeating: 0, count: output)
        var weights = [Float](repeating: 0, count: output * count)
        for index in 0..<output {
            let centre = Double(offset) + (Double(index) + 0.5) * scale
            let start = Int((centre - support - 0.5).rounded(.down))
            let firstIndex = max(offset, start)
            first[index] = firstIndex
            var row = [Double](repeating: 0, count: count)
            for tap in 0..<count {
                let source = start + tap
                let weight = lanczos3((Double(source) + 0.5 - centre) / scale)
                guard weight != 0 else { continue }
                // Beyond the edges: the edge pixel again.
                let clamped = min(max(source, offset), offset + length - 1)
                row[min(clamped - firstIndex, count - 1)] += weight
            }
            let sum = row.reduce(0, +)
            for tap in 0..<count { weights[index * count + tap] = Float(row[tap] / sum) }
        }
        return Taps(first: first, count: count, weights: weights)
    }

    static func lanczos3(_ x: Double) -> Double {
        if x == 0 { return 1 }
        guard abs(x) < 3 else { return 0 }
        let pix = Double.pi * x
        return 3 * sin(pix) * sin(pix / 3) / (pix * pix)
    }

    /// The area (`left`, `top`, `width` × `height` of a `stride`-wide image
    /// of `bands` interleaved bytes per pixel) shrunk to `outputWidth` ×
    /// `outputHeight` (each at most the area's), rows packed.
    ///
    /// Columns first: each output row is a weighted sum of whole source rows
    /// (a loop over contiguous floats, which the compiler vectorizes); then
    /// each of those rows is brought to `outputWidth`, the bands of a pixel
    /// summed side by side.
    static func shrink(_ pixels: UnsafeBufferPointer<UInt8>, stride: Int, bands: Int, area: PixelArea,
                       outputWidth: Int, outputHeight: Int) -> [UInt8] {
        let down = cachedTaps(offset: area.top, length: area.height, output: outputHeight)
        let across = cachedTaps(offset: area.left, length: area.width, output: outputWidth)
        let columns = area.width * bands
        var shrunkDown = [Float](repeating: 0, count: outputHeight * columns)
        shrunkDown.withUnsafeMutableBufferPointer { shrunkDown in
            down.weights.withUnsafeBufferPointer { weights in
                for y in 0..<outputHeight {
                    let first = down.first[y]
                    let out = y * columns
                    for tap in 0..<min(down.count, area.top + area.height - first) {
                        let weight = weights[y * down.count + tap]
                        guard weight != 0 else { continue }
                        let line = (first + tap) * stride + area.left * bands
                        // Rebased buffers and a plain index: a loop the compiler vectorizes.
                        let source = UnsafeBufferPointer(rebasing: pixels[line..<(line + columns)])
                        let target = UnsafeMutableBufferPointer(rebasing: shrunkDown[out..<(out + columns)])
                        for column in 0..<columns {
                            target[column] += weight * Float(source[column])
                        }
                    }
                }
            }
        }
        let rowLength = outputWidth * bands
        var output = [UInt8](repeating: 0, count: outputHeight * rowLength)
        output.withUnsafeMutableBufferPointer { output in
            shrunkDown.withUnsafeBufferPointer { shrunkDown in
                across.weights.withUnsafeBufferPointer { weights in
                    for y in 0..<outputHeight {
                        let line = y * columns
                        for x in 0..<outputWidth {
                            let first = across.first[x] - area.left
                            let taps = min(across.count, area.width - first)
                            let kernel = UnsafeBufferPointer(rebasing: weights[(x * across.count)..<(x * across.count + taps)])
                            let start = line + first * bands
                            let source = UnsafeBufferPointer(rebasing: shrunkDown[start..<(start + taps * bands)])
                            let out = y * rowLength + x * bands
                            if bands == 3 {
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

    /// A sum rounded to the nearest byte value.
    @inline(__always)
    private static func byte(_ value: Float) -> UInt8 {
        let rounded = value + 0.5
        return rounded <= 0 ? 0 : rounded >= 255 ? 255 : UInt8(rounded)
    }
}
