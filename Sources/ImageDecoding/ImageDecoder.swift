import CVips
import ModelFeatures
import SystemIO

/// Decodes image files into 8-bit pixel buffers and fits them to a size the
/// way Vision does (orientation, region of interest, crop and scale).
///
/// Formats: whatever the installed libvips reads — JPEG, PNG, WebP, TIFF,
/// GIF and HEIF with Debian's packages. 16-bit and palette images become
/// 8-bit sRGB; images with an ICC profile other than sRGB are not converted.
///
/// libvips decodes, turns upright and converts colours; fitting is our own
/// `LanczosResampler` on the exact geometry (`ImageFitting.geometry`): the
/// real-valued source window scaled to the target, Lanczos 3 widened by
/// the scale when shrinking (antialiased). JPEGs larger than the target are
/// scaled down while they are decoded (shrink-on-load, ½ to ⅛, in the DCT
/// domain, itself a low-pass) as far as the target's resolution is still
/// left, as Pillow's draft mode does. Plain upright JPEGs fitted to a size
/// skip libvips: libjpeg decodes them at that factor
/// (`decodeJPEGDirectly`).
///
/// A value type, safe to use from many threads at once.
public struct ImageDecoder: Sendable, Equatable {
    /// The layout of the pixels returned.
    public var pixelFormat: PixelBuffer.PixelFormat
    /// Return grayscale images as `.gray` whatever `pixelFormat` asks for.
    public var keepsGrayscale: Bool
    /// Flatten transparency onto `background` even for 4-channel formats
    /// (whose alpha is then 255). `.rgb` and `.gray` always flatten.
    public var flattensAlpha: Bool
    /// What transparent pixels are flattened onto: black, as Vision's
    /// premultiplied buffers do, unless chosen otherwise.
    public var background: Color

    /// An 8-bit RGB colour.
    public struct Color: Sendable, Equatable {
        public var red: UInt8
        public var green: UInt8
        public var blue: UInt8

        public init(red: UInt8, green: UInt8, blue: UInt8) {
            self.red = red
            self.green = green
            self.blue = blue
        }

        public static let black = Color(red: 0, green: 0, blue: 0)
        public static let white = Color(red: 255, green: 255, blue: 255)

        /// The colour's gray level (Rec. 709 weights).
        var gray: Double { (0.2126 * Double(red) + 0.7152 * Double(green) + 0.0722 * Double(blue)).rounded() }
    }

    public init(pixelFormat: PixelBuffer.PixelFormat = .rgb, keepsGrayscale: Bool = false,
                flattensAlpha: Bool = false, background: Color = .black) {
        self.pixelFormat = pixelFormat
        self.keepsGrayscale = keepsGrayscale
        self.flattensAlpha = flattensAlpha
        self.background = background
    }

    /// Decodes the image file at `path`.
    ///
    /// - Parameters:
    ///   - orientation: how to turn the image upright; `nil` uses its EXIF
    ///     orientation (none: `.up`).
    ///   - fitting: the size to bring the upright image to and how; `nil`
    ///     keeps its size.
    /// - Throws: `ImageError` naming `path`: unreadable, not an image, damaged;
    ///   or an invalid `fitting`.
    public func decode(file path: String, orientation: ImageOrientation? = nil,
                       fitting: ImageFitting? = nil) throws(ImageError) -> PixelBuffer {
        try decodeFitted(file: path, orientation: orientation, fitting: fitting).image
    }

    /// Decodes an image held in memory; `name` stands for it in errors.
    ///
    /// - Throws: `ImageError` naming `name`, as `decode(file:)`.
    public func decode(bytes: [UInt8], name: String, orientation: ImageOrientation? = nil,
                       fitting: ImageFitting? = nil) throws(ImageError) -> PixelBuffer {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(ImageError) -> PixelBuffer in
                try decode(bytes: buffer, name: name, orientation: orientation, fitting: fitting)
            }
        }.get()
    }

    /// Decodes an image held in memory; the bytes are only read during the call.
    ///
    /// - Throws: `ImageError` naming `name`, as `decode(file:)`.
    public func decode(bytes: UnsafeRawBufferPointer, name: String, orientation: ImageOrientation? = nil,
                       fitting: ImageFitting? = nil) throws(ImageError) -> PixelBuffer {
        try decodeFitted(bytes: bytes, name: name, orientation: orientation, fitting: fitting).image
    }

    /// Decodes the image file at `path` as `decode(file:)` does, and says
    /// what the image was fitted from (to map the fitted image's coordinates back).
    ///
    /// - Throws: as `decode(file:)`.
    public func decodeFitted(file path: String, orientation: ImageOrientation? = nil,
                             fitting: ImageFitting? = nil) throws(ImageError) -> FittedImage {
        try fitting?.validate()
        let file: MappedFile
        do {
            file = try MappedFile(path: path)
        } catch {
            switch error {
            case .system(let failure): throw .unreadable(file: path, reason: failure.reason)
            case .notRegularFile: throw .unreadable(file: path, reason: "not a regular file")
            }
        }
        return try withExtendedLifetime(file) { () throws(ImageError) -> FittedImage in
            try decodeFitted(bytes: file.bytes, name: path, orientation: orientation, fitting: fitting)
        }
    }

    /// Decodes an image held in memory as `decode(bytes:)` does, and says
    /// what the image was fitted from.
    ///
    /// - Throws: as `decode(file:)`.
    public func decodeFitted(bytes: UnsafeRawBufferPointer, name: String, orientation: ImageOrientation? = nil,
                             fitting: ImageFitting? = nil) throws(ImageError) -> FittedImage {
        try fitting?.validate()
        // Plain JPEGs fitted to a model's input (the common case) are decoded
        // by libjpeg directly, without starting libvips.
        let isJPEG = bytes.starts(with: [0xFF, 0xD8, 0xFF])
        if isJPEG, let fitting, let fitted = try decodeJPEGDirectly(bytes: bytes, orientation: orientation, fitting: fitting) {
            return fitted
        }
        try Vips.ensureStarted()
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            throw .damaged(file: name, reason: "the file is empty")
        }
        // Other JPEGs go straight to their loader, which reads the header
        // only until pixels are asked for; other formats are sniffed.
        if !isJPEG, modelc_vips_find_load_buffer(base, bytes.count) == nil {
            _ = Vips.takeError()
            throw .unsupportedFormat(file: name)
        }
        do throws(VipsFailure) {
            var loaded: OpaquePointer?
            if isJPEG {
                if modelc_vips_jpegload_buffer(base, bytes.count, &loaded, 1) != 0 { loaded = nil }
            } else {
                loaded = modelc_vips_load_buffer(base, bytes.count)
            }
            guard let loaded else { throw VipsFailure(message: Vips.takeError()) }
            var image = VipsImageHandle(loaded)
            let upright = orientation ?? image.storedOrientation ?? .up
            let uprightSize = upright.swapsWidthAndHeight ? (image.height, image.width) : (image.width, image.height)
            var shrink = 1
            if let fitting, isJPEG {
                shrink = Self.loadShrink(for: fitting, storedWidth: image.width, storedHeight: image.height,
                                         orientation: upright)
                if shrink > 1 {
                    var output: OpaquePointer?
                    guard modelc_vips_jpegload_buffer(base, bytes.count, &output, Int32(shrink)) == 0, let output else {
                        throw VipsFailure(message: Vips.takeError())
                    }
                    image = VipsImageHandle(output)
                }
            }
            return try process(image, orientation: upright, fitting: fitting, uprightSize: uprightSize, shrink: shrink)
        } catch {
            throw .damaged(file: name, reason: error.message)
        }
    }

    /// Turns and fits an image already in memory (a camera frame), as
    /// `decode(file:)` does a decoded file. Alpha is read from the alpha byte
    /// of 4-channel formats.
    ///
    /// - Throws: `ImageError` for an invalid `fitting` or a libvips failure
    ///   (named `"pixel buffer"`).
    public func fit(_ buffer: PixelBuffer, orientation: ImageOrientation = .up,
                    fitting: ImageFitting? = nil) throws(ImageError) -> PixelBuffer {
        try Vips.ensureStarted()
        try fitting?.validate()
        let (packed, bands) = Self.packed(buffer)
        let interpretation = bands <= 2 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB
        do throws(VipsFailure) {
            let copy = packed.withUnsafeBytes { memory in
                memory.baseAddress.flatMap {
                    modelc_vips_new_from_memory_copy($0, memory.count, Int32(buffer.width), Int32(buffer.height),
                                                    Int32(bands), VIPS_FORMAT_UCHAR)
                }
            }
            guard let copy else { throw VipsFailure(message: Vips.takeError()) }
            let image = try VipsImageHandle(copy).applying { modelc_vips_copy_interpretation($0, $1, interpretation) }
            let upright = orientation.swapsWidthAndHeight ? (buffer.height, buffer.width) : (buffer.width, buffer.height)
            return try process(image, orientation: orientation, fitting: fitting, uprightSize: upright, shrink: 1).image
        } catch {
            throw .damaged(file: "pixel buffer", reason: error.message)
        }
    }

    /// The JPEG shrink-on-load factor (1, 2, 4 or 8) for a fitting: the
    /// largest that leaves at least the resolution the fitting needs.
    static func loadShrink(for fitting: ImageFitting, storedWidth: Int, storedHeight: Int,
                           orientation: ImageOrientation) -> Int {
        let (width, height) = orientation.swapsWidthAndHeight ? (storedHeight, storedWidth) : (storedWidth, storedHeight)
        let scale = fitting.requiredScale(width: width, height: height)
        var shrink = 1
        while shrink < 8, scale * Double(shrink * 2) <= 1 { shrink *= 2 }
        return shrink
    }

    // MARK: - The pipeline

    /// Orientation, colour, region of interest, crop and scale, then the
    /// pixels. `loaded` is 1 / `shrink` of the upright image's size
    /// (`uprightSize`), which the fitting's geometry is in.
    private func process(_ loaded: VipsImageHandle, orientation: ImageOrientation, fitting: ImageFitting?,
                         uprightSize: (width: Int, height: Int), shrink: Int) throws(VipsFailure) -> FittedImage {
        var image = try Self.oriented(loaded, orientation)
        let source = (image.width, image.height)
        let gray = pixelFormat == .gray || (keepsGrayscale && Self.isGray(image))
        let keepsAlpha = !gray && pixelFormat.bytesPerPixel == 4 && !flattensAlpha
        image = try colour(image, gray: gray, keepsAlpha: keepsAlpha)
        let (bands, hasAlpha) = (image.bands, image.hasAlpha)
        var bytes: [UInt8]
        var (width, height) = source
        if let fitting {
            bytes = try Self.fitted(image, fitting, uprightSize: uprightSize, shrink: shrink)
            (width, height) = (fitting.width, fitting.height)
        } else {
            bytes = try image.writtenToMemory()
        }
        var outputBands = bands
        if !gray, pixelFormat.bytesPerPixel == 4, !hasAlpha {
            bytes = Self.opaque(bytes, bands: bands)
            outputBands += 1
        }
        let pixels = Self.pixelBuffer(bytes, width: width, height: height, bands: outputBands,
                                      format: gray ? .gray : pixelFormat)
        return FittedImage(image: pixels, fitting: fitting, sourceWidth: source.0, sourceHeight: source.1,
                           uprightWidth: uprightSize.width, uprightHeight: uprightSize.height)
    }

    /// `bands`-band pixels with an alpha band of 255 after each.
    private static func opaque(_ bytes: [UInt8], bands: Int) -> [UInt8] {
        var output = [UInt8](repeating: 255, count: bytes.count / bands * (bands + 1))
        var to = 0
        for from in stride(from: 0, to: bytes.count, by: bands) {
            for band in 0..<bands { output[to + band] = bytes[from + band] }
            to += bands + 1
        }
        return output
    }

    private static func isGray(_ image: VipsImageHandle) -> Bool {
        image.interpretation == VIPS_INTERPRETATION_B_W || image.interpretation == VIPS_INTERPRETATION_GREY16
            || (image.interpretation == VIPS_INTERPRETATION_MULTIBAND && image.bands <= 2)
    }

    private static func oriented(_ image: VipsImageHandle, _ orientation: ImageOrientation) throws(VipsFailure) -> VipsImageHandle {
        func rotated(_ image: VipsImageHandle, _ angle: VipsAngle) throws(VipsFailure) -> VipsImageHandle {
            try image.applying { modelc_vips_rot($0, $1, angle) }
        }
        func mirrored(_ image: VipsImageHandle, _ direction: VipsDirection) throws(VipsFailure) -> VipsImageHandle {
            try image.applying { modelc_vips_flip($0, $1, direction) }
        }
        switch orientation {
        case .up: return image
        case .upMirrored: return try mirrored(image, VIPS_DIRECTION_HORIZONTAL)
        case .down: return try rotated(image, VIPS_ANGLE_D180)
        case .downMirrored: return try mirrored(image, VIPS_DIRECTION_VERTICAL)
        case .leftMirrored: return try mirrored(rotated(image, VIPS_ANGLE_D90), VIPS_DIRECTION_HORIZONTAL)
        case .right: return try rotated(image, VIPS_ANGLE_D90)
        case .rightMirrored: return try mirrored(rotated(image, VIPS_ANGLE_D270), VIPS_DIRECTION_HORIZONTAL)
        case .left: return try rotated(image, VIPS_ANGLE_D270)
        }
    }

    /// 8-bit sRGB (or grayscale) with alpha kept or flattened onto the background.
    private func colour(_ input: VipsImageHandle, gray: Bool, keepsAlpha: Bool) throws(VipsFailure) -> VipsImageHandle {
        var image = input
        if modelc_vips_colourspace_issupported(image.pointer) != 0 {
            let space = gray ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB
            image = try image.applying { modelc_vips_colourspace($0, $1, space) }
        } else {
            // No known colour space (a multiband TIFF, say): read the first bands as gray or RGB.
            let wanted = image.bands >= 3 ? 3 : 1
            if image.bands > wanted {
                image = try image.applying { modelc_vips_extract_band($0, $1, 0, Int32(wanted)) }
            }
            let assumed = wanted == 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W
            let space = gray ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB
            image = try image.applying { modelc_vips_copy_interpretation($0, $1, assumed) }
                .applying { modelc_vips_colourspace($0, $1, space) }
        }
        let colourBands = gray ? 1 : 3
        if image.hasAlpha, !keepsAlpha {
            var values = gray ? [background.gray] : [Double(background.red), Double(background.green), Double(background.blue)]
            image = try image.applying { modelc_vips_flatten($0, $1, &values, Int32(values.count)) }
        }
        let bands = colourBands + (keepsAlpha && image.hasAlpha ? 1 : 0)
        if image.bands > bands {
            image = try image.applying { modelc_vips_extract_band($0, $1, 0, Int32(bands)) }
        }
        if image.format != VIPS_FORMAT_UCHAR {
            image = try image.applying { modelc_vips_cast_uchar($0, $1) }
        }
        return image
    }

    /// The fitting applied to an upright 8-bit image, `1 / shrink` of
    /// `uprightSize`: the rows and columns the resampler reads are computed,
    /// then resampled by `LanczosResampler` (alpha premultiplied meanwhile).
    private static func fitted(_ image: VipsImageHandle, _ fitting: ImageFitting,
                               uprightSize: (width: Int, height: Int), shrink: Int) throws(VipsFailure) -> [UInt8] {
        let geometry = fitting.geometry(width: uprightSize.width, height: uprightSize.height)
        let taps = geometry.taps(decodedWidth: image.width, decodedHeight: image.height, shrink: shrink)
        var read = image
        let (left, top) = (taps.across.lowest, taps.down.lowest)
        let (width, height) = (taps.across.highest - left, taps.down.highest - top)
        if (left, top, width, height) != (0, 0, image.width, image.height) {
            read = try image.applying { modelc_vips_extract_area($0, $1, Int32(left), Int32(top), Int32(width), Int32(height)) }
        }
        let (bands, alpha) = (read.bands, read.hasAlpha)
        return try read.withPixels { pixels in
            geometry.fitted(pixels, stride: width * bands, bands: bands, alpha: alpha, taps: taps,
                            targetWidth: fitting.width, targetHeight: fitting.height)
        }
    }

    // MARK: - Pixel buffers in and out

    /// The pixels packed as gray (1 band), RGB (3) or RGBA (4), rows without padding.
    private static func packed(_ buffer: PixelBuffer) -> (bytes: [UInt8], bands: Int) {
        let format = buffer.pixelFormat
        let bands = format == .gray ? 1 : format.bytesPerPixel
        let (red, green, blue) = format.rgbOffsets
        let alpha = format == .argb ? 0 : 3
        var bytes = [UInt8](repeating: 0, count: buffer.width * buffer.height * bands)
        var index = 0
        for row in 0..<buffer.height {
            var source = row * buffer.bytesPerRow
            for _ in 0..<buffer.width {
                if bands == 1 {
                    bytes[index] = buffer.bytes[source]
                } else {
                    bytes[index] = buffer.bytes[source + red]
                    bytes[index + 1] = buffer.bytes[source + green]
                    bytes[index + 2] = buffer.bytes[source + blue]
                    if bands == 4 { bytes[index + 3] = buffer.bytes[source + alpha] }
                }
                index += bands
                source += format.bytesPerPixel
            }
        }
        return (bytes, bands)
    }

    /// Gray, RGB or RGBA bytes from libvips laid out as `format`.
    private static func pixelBuffer(_ bytes: [UInt8], width: Int, height: Int, bands: Int,
                                    format: PixelBuffer.PixelFormat) -> PixelBuffer {
        var output = bytes
        if format == .bgra || format == .argb {
            let (red, green, blue) = format.rgbOffsets
            let alpha = format == .argb ? 0 : 3
            var index = 0
            while index + 3 < output.count {
                output[index + red] = bytes[index]
                output[index + green] = bytes[index + 1]
                output[index + blue] = bytes[index + 2]
                output[index + alpha] = bytes[index + 3]
                index += 4
            }
        }
        // The sizes agree by construction: libvips wrote height rows of width × bands bytes.
        guard bands == format.bytesPerPixel,
              let buffer = PixelBuffer(width: width, height: height, pixelFormat: format, bytes: output)
        else { preconditionFailure("libvips returned \(bands) bands for \(format) at \(width)×\(height)") }
        return buffer
    }
}
