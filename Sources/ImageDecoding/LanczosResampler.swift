import Foundation
import Synchronization

/// Shrinks 8-bit images with the Lanczos 3 kernel widened by the scale
/// factor (antialiased, as libvips' `vips_resize` and Pillow's `LANCZOS`
/// shrink), separably: rows, then columns.
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
    static func shrink(_ pixels: UnsafeBufferPointer<UInt8>, stride: Int, bands: Int, area: PixelArea,
                       outputWidth: Int, outputHeight: Int) -> [UInt8] {
        // Rows: area.height rows of outputWidth pixels, as floats.
        let across = cachedTaps(offset: area.left, length: area.width, output: outputWidth)
        var rows = [Float](repeating: 0, count: area.height * outputWidth * bands)
        rows.withUnsafeMutableBufferPointer { rows in
            across.weights.withUnsafeBufferPointer { weights in
                for y in 0..<area.height {
                    let line = (area.top + y) * stride
                    let out = y * outputWidth * bands
                    for x in 0..<outputWidth {
                        let first = across.first[x]
                        let taps = min(across.count, area.left + area.width - first)
                        for band in 0..<bands {
                            var sum: Float = 0
                            var source = line + first * bands + band
                            for tap in 0..<taps {
                                sum += weights[x * across.count + tap] * Float(pixels[source])
                                source += bands
                            }
                            rows[out + x * bands + band] = sum
                        }
                    }
                }
            }
        }
        // Columns: the rows brought to outputHeight.
        let down = cachedTaps(offset: 0, length: area.height, output: outputHeight)
        let rowLength = outputWidth * bands
        var output = [UInt8](repeating: 0, count: outputHeight * rowLength)
        output.withUnsafeMutableBufferPointer { output in
            rows.withUnsafeBufferPointer { rows in
                down.weights.withUnsafeBufferPointer { weights in
                    for y in 0..<outputHeight {
                        let first = down.first[y]
                        let taps = min(down.count, area.height - first)
                        for column in 0..<rowLength {
                            var sum: Float = 0
                            var source = first * rowLength + column
                            for tap in 0..<taps {
                                sum += weights[y * down.count + tap] * rows[source]
                                source += rowLength
                            }
                            let rounded = sum + 0.5
                            output[y * rowLength + column] = rounded <= 0 ? 0 : rounded >= 255 ? 255 : UInt8(rounded)
                        }
                    }
                }
            }
        }
        return output
    }
}
