/// A fitting's geometry applied to decoded pixels, by both decoding paths:
/// the libvips one and the direct JPEG one.
extension FittingGeometry {
    /// The taps that bring the source window to the content rectangle, for
    /// an upright image decoded at `width` × `height`, `1 / shrink` of its
    /// upright size (JPEG shrink-on-load: decoded pixel `j` covers upright
    /// pixels `shrink · j` to `shrink · (j + 1)`).
    func taps(decodedWidth width: Int, decodedHeight height: Int,
              shrink: Int) -> (across: LanczosResampler.Taps, down: LanczosResampler.Taps) {
        let factor = Double(shrink)
        return (LanczosResampler.cachedTaps(start: windowX / factor, length: windowWidth / factor, output: contentWidth, size: width),
                LanczosResampler.cachedTaps(start: windowY / factor, length: windowHeight / factor, output: contentHeight, size: height))
    }

    /// The target's pixels: the window resampled into the content rectangle,
    /// on black (opaque when `alpha`) around it. `pixels` holds what the
    /// taps read, as `LanczosResampler.resample` takes it.
    func fitted(_ pixels: UnsafeBufferPointer<UInt8>, stride: Int, bands: Int, alpha: Bool,
                taps: (across: LanczosResampler.Taps, down: LanczosResampler.Taps),
                targetWidth: Int, targetHeight: Int) -> [UInt8] {
        let content = LanczosResampler.resample(pixels, stride: stride, bands: bands, alpha: alpha,
                                                across: taps.across, down: taps.down)
        if contentWidth == targetWidth, contentHeight == targetHeight { return content }
        var output = [UInt8](repeating: 0, count: targetWidth * targetHeight * bands)
        if alpha {
            for index in Swift.stride(from: bands - 1, to: output.count, by: bands) { output[index] = 255 }
        }
        let count = contentWidth * bands
        for y in 0..<contentHeight {
            let to = ((y + contentTop) * targetWidth + contentLeft) * bands
            output.replaceSubrange(to..<(to + count), with: content[(y * count)..<((y + 1) * count)])
        }
        return output
    }
}
