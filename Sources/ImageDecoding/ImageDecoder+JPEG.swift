import CJPEG
import ModelFeatures

/// The direct path for plain JPEGs: libjpeg decodes straight into memory,
/// shrinking while it decodes, and `LanczosResampler` does the rest, without
/// libvips' per-image machinery (which costs more than the decoding itself
/// on small targets such as a detector's 64×64 input).
///
/// It takes 8-bit gray or colour JPEGs read as gray (gray files only) or
/// RGB, upright as stored (no EXIF orientation, or 1, or `.up` given), that
/// are fitted to a target no larger than the decoded image on either axis.
/// Everything else — other orientations, CMYK, damaged data libjpeg warns
/// about, enlargements — takes the general path, with the same geometry.
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
        let format: PixelBuffer.PixelFormat = gray ? .gray : .rgb
        let area = fitting.regionOfInterest.pixelArea(width: decodedWidth, height: decodedHeight)
        let plan = fitting.plan(sourceWidth: area.width, sourceHeight: area.height)
        let image: PixelBuffer
        if plan.resizedWidth > area.width || plan.resizedHeight > area.height {
            guard let decoded = PixelBuffer(width: decodedWidth, height: decodedHeight, pixelFormat: format, bytes: pixels) else {
                return nil
            }
            image = try ImageDecoder(pixelFormat: format).fit(decoded, fitting: fitting)
        } else {
            let resized = pixels.withUnsafeBufferPointer { source in
                LanczosResampler.shrink(source, stride: decodedWidth * bands, bands: bands, area: area,
                                        outputWidth: plan.resizedWidth, outputHeight: plan.resizedHeight)
            }
            let placed = Self.placed(resized, plan: plan, bands: bands, width: fitting.width, height: fitting.height)
            guard let buffer = PixelBuffer(width: fitting.width, height: fitting.height, pixelFormat: format, bytes: placed) else {
                return nil
            }
            image = buffer
        }
        return FittedImage(image: image, fitting: fitting, sourceWidth: decodedWidth, sourceHeight: decodedHeight,
                           uprightWidth: width, uprightHeight: height)
    }

    /// The resized pixels cut to the target at the plan's offset (centre
    /// crop), or set on black at it (scale to fit).
    private static func placed(_ resized: [UInt8], plan: ResizePlan, bands: Int, width: Int, height: Int) -> [UInt8] {
        if plan.resizedWidth == width, plan.resizedHeight == height { return resized }
        var output = [UInt8](repeating: 0, count: width * height * bands)
        let cropping = plan.resizedWidth >= width && plan.resizedHeight >= height
        for y in 0..<min(height, plan.resizedHeight) {
            let count = min(width, plan.resizedWidth) * bands
            let (from, to) = cropping
                ? (((y + plan.offsetY) * plan.resizedWidth + plan.offsetX) * bands, y * width * bands)
                : (y * plan.resizedWidth * bands, ((y + plan.offsetY) * width + plan.offsetX) * bands)
            output.replaceSubrange(to..<(to + count), with: resized[from..<(from + count)])
        }
        return output
    }
}
