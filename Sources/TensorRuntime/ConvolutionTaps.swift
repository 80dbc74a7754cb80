/// Kernel taps a convolution never reads the image with. A dilated
/// convolution on a small image reads most of its taps from the padding:
/// DeepLabV3's atrous 3 × 3 convolutions at rates 24 and 36 on a 14 × 14
/// feature map read the image only with their centre tap, so each is a
/// 1 × 1 convolution of the same output (oneDNN ran them as image-to-column
/// products over all nine taps on an AVX2 machine, about 20 ms each). The
/// taps every output reads as zero padding are dropped at plan time, with
/// their weights; what is computed does not change.
enum ConvolutionTaps {
    /// For each spatial axis, the smallest range of taps holding every tap
    /// `k` with which some output position `o` reads inside the image
    /// (`o·stride − padBefore + k·dilation` in `0..<size`); empty when no tap
    /// does. (With a stride longer than the image a tap in the range may read
    /// only padding too; it is kept.)
    static func readTaps(_ geometry: DNNLConvolution.Geometry) -> [Range<Int>] {
        geometry.strides.indices.map { axis in
            let size = geometry.input[axis + 2], outputs = geometry.output[axis + 2]
            let stride = geometry.strides[axis], dilation = geometry.dilations[axis], pad = geometry.padBefore[axis]
            let taps = (0..<geometry.weightShape[axis + 2]).filter { tap in
                // The first output reading at or after the image's start, then whether it is still inside.
                let start = tap * dilation - pad
                let first = start >= 0 ? 0 : (-start + stride - 1) / stride
                return first < outputs && start + first * stride < size
            }
            guard let low = taps.first, let high = taps.last else { return 0..<0 }
            return low..<(high + 1)
        }
    }

    /// `geometry` without the taps no output reads the image with, and
    /// `weights` (`[O, I per group, kernel…]`, row-major) cut to the taps
    /// kept; `nil` when every tap is read, when no tap is, or when the
    /// smaller kernel would need negative padding.
    static func trimmed(_ geometry: DNNLConvolution.Geometry, weights: [Float]) -> (geometry: DNNLConvolution.Geometry, weights: [Float])? {
        let taps = readTaps(geometry)
        let kernel = Array(geometry.weightShape[2...])
        guard taps.allSatisfy({ !$0.isEmpty }), zip(taps, kernel).contains(where: { $0.count < $1 }) else { return nil }
        var result = geometry
        for axis in taps.indices {
            result.weightShape[axis + 2] = taps[axis].count
            result.padBefore[axis] -= taps[axis].lowerBound * geometry.dilations[axis]
        }
        guard result.padBefore.allSatisfy({ $0 >= 0 }), result.padAfter(transposed: false).allSatisfy({ $0 >= 0 }) else { return nil }
        return (result, cut(weights, shape: geometry.weightShape, taps: taps))
    }

    /// `weights` of `shape` (`[O, I per group, kernel…]`, row-major) cut to
    /// `taps` along each kernel axis.
    static func cut(_ weights: [Float], shape: [Int], taps: [Range<Int>]) -> [Float] {
        let kernel = Array(shape[2...])
        let planes = shape[0] * shape[1]
        let kept = taps.reduce(1) { $0 * $1.count }, full = kernel.reduce(1, *)
        var result = [Float]()
        result.reserveCapacity(planes * kept)
        var tap = [Int](repeating: 0, count: kernel.count)
        for plane in 0..<planes {
            // Each (output, input) pair's kernel, the kept taps in row-major order.
            for index in 0..<kept {
                var rest = index, offset = 0
                for axis in stride(from: kernel.count - 1, through: 0, by: -1) {
                    tap[axis] = taps[axis].lowerBound + rest % taps[axis].count
                    rest /= taps[axis].count
                }
                for axis in kernel.indices { offset = offset * kernel[axis] + tap[axis] }
                result.append(weights[plane * full + offset])
            }
        }
        return result
    }
}

extension ConvolutionTaps {
    /// One channels-last image's output rows split where the kernel rows
    /// reading the image change, each region a smaller convolution of only
    /// the kernel rows (and columns) its rows read the image with, over the
    /// input rows they read, with its own weights; `nil` unless that skips at least
    /// `regionSaving` of the multiply-adds. DeepLabV3's rate-12 atrous 3 × 3
    /// convolution on a 14 × 14 map reads the image with its top kernel row
    /// only from output rows 12–13 and its bottom row only from rows 0–1: as
    /// rows 0–1 (kernel rows 1–2), 2–11 (row 1) and 12–13 (rows 0–1) it does
    /// 43 % of the multiply-adds.
    static func rowRegions(_ geometry: DNNLConvolution.Geometry, weights: [Float])
        -> [(block: ConvolutionOperations.Block, weights: [Float])]? {
        guard geometry.channelsLast, geometry.input[0] == 1, geometry.output.count >= 3 else { return nil }
        let height = geometry.input[2], rows = geometry.output[2], kernelRows = geometry.weightShape[2]
        let stride = geometry.strides[0], dilation = geometry.dilations[0], pad = geometry.padBefore[0]
        // The kernel rows each output row reads the image with.
        let taps = (0..<rows).map { row in
            (0..<kernelRows).filter { tap in (0..<height).contains(row * stride - pad + tap * dilation) }
        }
        guard !taps.contains(where: \.isEmpty) else { return nil }
        var bounds = [0]
        for row in 1..<rows where taps[row] != taps[row - 1] { bounds.append(row) }
        bounds.append(rows)
        let work = taps.reduce(0) { $0 + ($1.last! - $1.first! + 1) }
        guard bounds.count > 2, Double(work) <= (1 - regionSaving) * Double(rows * kernelRows) else { return nil }
        // Floats per row of the channels-last image (the geometry is in MIL order, [N, C, H, W…]).
        let inRow = geometry.input[1...].reduce(1, *) / height, outRow = geometry.output[1...].reduce(1, *) / rows
        var kernelTaps = geometry.weightShape[2...].map { 0..<$0 }
        var regions: [(block: ConvolutionOperations.Block, weights: [Float])] = []
        for (first, end) in zip(bounds, bounds.dropFirst()) {
            // Every row of the region reads the image with kernel rows low…high and nothing else, so the region
            // is a convolution of those kernel rows over input rows first·s − pad + low·d … (end − 1)·s − pad + high·d.
            guard let low = taps[first].first, let high = taps[first].last, taps[first].count == high - low + 1 else { return nil }
            let top = first * stride - pad + low * dilation, bottom = (end - 1) * stride - pad + high * dilation
            var block = geometry
            block.input[2] = bottom - top + 1
            block.output[2] = end - first
            block.weightShape[2] = high - low + 1
            block.padBefore[0] = 0
            kernelTaps[0] = low..<(high + 1)
            let rowsCut = cut(weights, shape: geometry.weightShape, taps: kernelTaps)
            // Then any columns only padding is read with.
            let (trimmedBlock, values) = trimmed(block, weights: rowsCut) ?? (block, rowsCut)
            regions.append((ConvolutionOperations.Block(geometry: trimmedBlock, input: top * inRow, output: first * outRow, channels: nil), values))
        }
        return regions
    }

    /// The share of multiply-adds row regions must skip to be used.
    static let regionSaving = 0.4
}
