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
        // Every (output, input) pair's kernel, tap by tap in row-major order, keeping the read taps.
        let planes = geometry.weightShape[0] * geometry.weightShape[1]
        let kept = result.weightShape[2...].reduce(1, *), full = kernel.reduce(1, *)
        var cut = [Float]()
        cut.reserveCapacity(planes * kept)
        var tap = [Int](repeating: 0, count: kernel.count)
        for plane in 0..<planes {
            for index in 0..<kept {
                var rest = index, offset = 0
                for axis in stride(from: kernel.count - 1, through: 0, by: -1) {
                    tap[axis] = taps[axis].lowerBound + rest % taps[axis].count
                    rest /= taps[axis].count
                }
                for axis in kernel.indices { offset = offset * kernel[axis] + tap[axis] }
                cut.append(weights[plane * full + offset])
            }
        }
        return (result, cut)
    }
}
