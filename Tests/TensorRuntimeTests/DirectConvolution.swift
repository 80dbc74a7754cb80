/// A 2-D convolution computed directly in float64, the reference the
/// convolution tests compare the engine's kernels with.
enum DirectConvolution {
    /// `input` `[N, C, H, W]` convolved with `weight` `[O, C, k, k]` plus
    /// `bias` (`O` values), at `stride`, the image padded by `padTop` rows
    /// and `padLeft` columns before it (and as many after as the output size
    /// needs); the result `[N, O, outHeight, outWidth]`.
    static func float64(_ input: [Double], batch: Int, channels: Int, height: Int, width: Int, weight: [Float], bias: [Float], kernel: Int,
                        stride: Int = 1, padTop: Int, padLeft: Int, outHeight: Int, outWidth: Int) -> [Double] {
        let outputs = bias.count
        var result = [Double](repeating: 0, count: batch * outputs * outHeight * outWidth)
        for n in 0..<batch {
            for o in 0..<outputs {
                for y in 0..<outHeight {
                    for x in 0..<outWidth {
                        var sum = Double(bias[o])
                        for c in 0..<channels {
                            for i in 0..<kernel {
                                let row = y * stride - padTop + i
                                guard row >= 0, row < height else { continue }
                                for j in 0..<kernel {
                                    let column = x * stride - padLeft + j
                                    guard column >= 0, column < width else { continue }
                                    sum += input[((n * channels + c) * height + row) * width + column]
                                        * Double(weight[((o * channels + c) * kernel + i) * kernel + j])
                                }
                            }
                        }
                        result[((n * outputs + o) * outHeight + y) * outWidth + x] = sum
                    }
                }
            }
        }
        return result
    }
}
