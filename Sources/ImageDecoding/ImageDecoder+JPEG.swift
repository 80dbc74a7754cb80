import CJPEG
import ModelFeatures

/// The direct path for plain JPEGs: libjpeg decodes straight into memory,
/// shrinking while it decodes, and `LanczosResampler` does the rest, without
/// libvips' per-image machinery (which costs more than the decoding itself
/// on small targets such as a detector's 64×64 input).
///
/// It takes 8-bit gray or colour JPEGs read as gray (gray files only) or
/// RGB, upright as stored (no EXIF orientation, or 1, or `.up` given).
/// Everything else — other orientations, CMYK, damaged data libjpeg warns
/// about — takes the general path, with the same geometry and resampler.
extension ImageDecoder {
    /// The fitted image, or `nil` when the image is not for this path.
    func decodeJPEGDirectly(bytes: UnsafeRawBufferPointer, orientation: ImageOrientation?,
                            fitting: ImageFitting) throws(ImageError) -> FittedImage? {
        guard pixelFormat == .gray || pixelFormat == .rgb, let base = bytes.baseAddress,
              orientation == nil || orientation == .up else { return nil }
        var header = modelc_jpeg_header()
        guard modelc_jpeg_read_header(base, bytes.count, orientation == nil ? 1 : 0, &header) == Int32(MODELC_JPEG_OK),
              header.orientation <= 1 else { return nil }
        let gray = pixelFormat == .gray || (keepsGrayscale && header.components == 1)
        // Colour files read as gray go through libvips' colour conversion.
        guard !gray || header.components == 1 else { return nil }
        let (width, height) = (Int(header.width), Int(header.height))
        let shrink = Self.loadShrink(for: fitting, storedWidth: width, storedHeight: height, orientation: .up)
        let (decodedWidth, decodedHeight) = ((width + shrink - 1) / shrink, (height + shrink - 1) / shrink)
        let bands = gray ? 1 : 3
        var pixels = [UInt8](repeating: 0, count: decodedWidth * decodedHeight * bands)
        let status = pixels.withUnsafeMutableBufferPointer { buffer in
            modelc_jpeg_decode(base, bytes.count, Int32(shrink), Int32(bands), buffer.baseAddress,
                               Int32(decodedWidth), Int32(decodedHeight))
        }
        guard status == Int32(MODELC_JPEG_OK) else { return nil }
        let geometry = fitting.geometry(width: width, height: height)
        let taps = geometry.taps(decodedWidth: decodedWidth, decodedHeight: decodedHeight, shrink: shrink)
        let fitted = pixels.withUnsafeBufferPointer { decoded in
            let start = taps.down.lowest * decodedWidth * bands + taps.across.lowest * bands
            return geometry.fitted(UnsafeBufferPointer(rebasing: decoded[start...]), stride: decodedWidth * bands, bands: bands,
                                   alpha: false, taps: taps, targetWidth: fitting.width, targetHeight: fitting.height)
        }
        guard let image = PixelBuffer(width: fitting.width, height: fitting.height, pixelFormat: gray ? .gray : .rgb,
                                      bytes: fitted) else { return nil }
        return FittedImage(image: image, fitting: fitting, sourceWidth: decodedWidth, sourceHeight: decodedHeight,
                           uprightWidth: width, uprightHeight: height)
    }
}
