import CVips
import ModelFeatures

/// A box to draw on an image, with its label.
public struct DrawnBox: Sendable, Equatable {
    /// Where, normalized, origin at the lower left of the upright image.
    public var rect: NormalizedRect
    /// The text written above the box; empty for none.
    public var label: String
    public var color: ImageDecoder.Color

    public init(rect: NormalizedRect, label: String, color: ImageDecoder.Color) {
        self.rect = rect
        self.label = label
        self.color = color
    }

    /// A colour per index, distinct for the first ten and easy to see on photos.
    public static func color(_ index: Int) -> ImageDecoder.Color {
        let palette: [(UInt8, UInt8, UInt8)] = [
            (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
            (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
        ]
        let (red, green, blue) = palette[((index % palette.count) + palette.count) % palette.count]
        return ImageDecoder.Color(red: red, green: green, blue: blue)
    }
}

/// Draws boxes and labels over images (libvips' drawing and text operations)
/// and encodes the result, for people who would rather look than read.
public enum ImageDrawing {
    /// The encoded image (PNG, or JPEG when `format` is `.jpeg`) of `image`
    /// (RGB or gray, upright) with `boxes` drawn over it and, when given,
    /// `overlay` (RGB, any size: stretched over `overlayRegion`, normalized
    /// with the origin at the lower left, parts past the image cut off)
    /// blended in at `opacity`.
    ///
    /// - Throws: `ImageError.damaged` naming `name` when libvips fails.
    public static func draw(_ boxes: [DrawnBox], on image: PixelBuffer, overlay: PixelBuffer? = nil,
                            overlayRegion: NormalizedRect = .full, opacity: Double = 0.5,
                            format: EncodedFormat, name: String) throws(ImageError) -> [UInt8] {
        try Vips.ensureStarted()
        var rgb = try ImageDecoder(pixelFormat: .rgb).fit(image)
        if let overlay {
            let area = overlayRegion.topLeftPixels(width: rgb.width, height: rgb.height)
            let left = Int(area.x.rounded()), top = Int(area.y.rounded())
            let width = max(1, Int(area.width.rounded())), height = max(1, Int(area.height.rounded()))
            // Nearest neighbour: a mask's classes stay crisp.
            var blended = rgb.bytes
            for y in max(0, top)..<min(rgb.height, top + height) {
                let sourceY = min(overlay.height - 1, (y - top) * overlay.height / height)
                for x in max(0, left)..<min(rgb.width, left + width) {
                    let sourceX = min(overlay.width - 1, (x - left) * overlay.width / width)
                    let source = sourceY * overlay.bytesPerRow + sourceX * overlay.pixelFormat.bytesPerPixel
                    let (red, green, blue) = overlay.pixelFormat.rgbOffsets
                    let colour = [overlay.bytes[source + red], overlay.bytes[source + green], overlay.bytes[source + blue]]
                    for channel in 0..<3 {
                        let index = (y * rgb.width + x) * 3 + channel
                        let mixed = (1 - opacity) * Double(blended[index]) + opacity * Double(colour[channel])
                        blended[index] = UInt8(max(0, min(255, mixed.rounded())))
                    }
                }
            }
            if let made = PixelBuffer(width: rgb.width, height: rgb.height, pixelFormat: .rgb, bytes: blended) { rgb = made }
        }
        let width = rgb.width, height = rgb.height
        do throws(VipsFailure) {
            let memory = rgb.bytes.withUnsafeBytes { bytes in
                modelc_vips_new_from_memory_copy(bytes.baseAddress, bytes.count, Int32(width), Int32(height), 3, VIPS_FORMAT_UCHAR)
            }
            guard let memory else { throw VipsFailure(message: Vips.takeError()) }
            let canvas = VipsImageHandle(memory)
            let thickness = max(2, min(width, height) / 150)
            let dpi = Int32(max(48, min(width, height) / 5))
            for box in boxes {
                try draw(box, on: canvas, width: width, height: height, thickness: thickness, dpi: dpi)
            }
            var buffer: UnsafeMutableRawPointer?
            var size = 0
            guard modelc_vips_write_to_buffer(canvas.pointer, format.suffix, &buffer, &size) == 0, let buffer else {
                throw VipsFailure(message: Vips.takeError())
            }
            defer { modelc_vips_free(buffer) }
            return [UInt8](UnsafeRawBufferPointer(start: buffer, count: size))
        } catch {
            throw .damaged(file: name, reason: error.message)
        }
    }

    /// An encoded image format to write.
    public enum EncodedFormat: String, Sendable {
        case png, jpeg

        /// The format for a file named `path`: JPEG for .jpg/.jpeg, else PNG.
        public init(path: String) {
            let lowered = path.lowercased()
            self = lowered.hasSuffix(".jpg") || lowered.hasSuffix(".jpeg") ? .jpeg : .png
        }

        var suffix: String { self == .jpeg ? ".jpg[Q=90]" : ".png" }
        /// The file name extension, with its dot.
        public var fileExtension: String { self == .jpeg ? ".jpg" : ".png" }
    }

    /// Encodes `image` as PNG.
    ///
    /// - Throws: `ImageError.damaged` naming `name` when libvips fails.
    public static func png(_ image: PixelBuffer, name: String) throws(ImageError) -> [UInt8] {
        try draw([], on: image, format: .png, name: name)
    }

    private static func draw(_ box: DrawnBox, on canvas: VipsImageHandle, width: Int, height: Int,
                             thickness: Int, dpi: Int32) throws(VipsFailure) {
        let pixels = box.rect.topLeftPixels(width: width, height: height)
        let left = max(0, min(width - 1, Int(pixels.x.rounded())))
        let top = max(0, min(height - 1, Int(pixels.y.rounded())))
        let right = max(left + 1, min(width, Int((pixels.x + pixels.width).rounded())))
        let bottom = max(top + 1, min(height, Int((pixels.y + pixels.height).rounded())))
        var ink = [Double(box.color.red), Double(box.color.green), Double(box.color.blue)]
        for inset in 0..<thickness where right - left > 2 * inset && bottom - top > 2 * inset {
            guard modelc_vips_draw_rect(canvas.pointer, &ink, 3, Int32(left + inset), Int32(top + inset),
                                        Int32(right - left - 2 * inset), Int32(bottom - top - 2 * inset), 0) == 0
            else { throw VipsFailure(message: Vips.takeError()) }
        }
        guard !box.label.isEmpty else { return }
        let escaped = box.label.map { character -> String in
            switch character {
            case "&": "&amp;"
            case "<": "&lt;"
            case ">": "&gt;"
            default: String(character)
            }
        }.joined()
        guard let made = modelc_vips_text(escaped, dpi) else {
            // No text rendering (libvips built without Pango): the boxes alone.
            _ = Vips.takeError()
            return
        }
        let mask = VipsImageHandle(made)
        let padding = 2
        let labelWidth = mask.width + 2 * padding, labelHeight = mask.height + 2 * padding
        let labelLeft = min(left, max(0, width - labelWidth))
        let labelTop = top >= labelHeight ? top - labelHeight : min(top, max(0, height - labelHeight))
        guard modelc_vips_draw_rect(canvas.pointer, &ink, 3, Int32(labelLeft), Int32(labelTop),
                                    Int32(labelWidth), Int32(labelHeight), 1) == 0
        else { throw VipsFailure(message: Vips.takeError()) }
        let brightness = 0.299 * ink[0] + 0.587 * ink[1] + 0.114 * ink[2]
        var textInk = brightness > 140 ? [0.0, 0.0, 0.0] : [255.0, 255.0, 255.0]
        guard modelc_vips_draw_mask(canvas.pointer, &textInk, 3, mask.pointer, Int32(labelLeft + padding),
                                    Int32(labelTop + padding)) == 0
        else { throw VipsFailure(message: Vips.takeError()) }
    }
}
