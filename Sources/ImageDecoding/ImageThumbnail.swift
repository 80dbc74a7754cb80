import CVips
import ModelFeatures

/// Small JPEG pictures of image files, for pages that show them inline
/// (`modelc train --report`'s mistakes).
public enum ImageThumbnail {
    /// The image at `path`, turned upright, centre-cropped and scaled to
    /// `side`×`side` pixels, as JPEG bytes of `quality` (1–100).
    ///
    /// - Throws: `ImageError` when the file cannot be read, decoded or encoded.
    public static func jpeg(file path: String, side: Int, quality: Int = 80) throws(ImageError) -> [UInt8] {
        let pixels = try ImageDecoder(pixelFormat: .rgb).decode(file: path, fitting: ImageFitting(width: side, height: side))
        return try encode(pixels, suffix: ".jpg[Q=\(max(1, min(100, quality)))]", file: path)
    }

    /// RGB pixels encoded by libvips in the format `suffix` names (`.jpg`, `.png`).
    public static func encode(_ pixels: PixelBuffer, suffix: String, file: String) throws(ImageError) -> [UInt8] {
        guard pixels.pixelFormat == .rgb else { throw .damaged(file: file, reason: "thumbnails are made from RGB pixels") }
        let rowBytes = pixels.width * 3
        var tight = [UInt8]()
        tight.reserveCapacity(rowBytes * pixels.height)
        for row in 0..<pixels.height {
            tight += pixels.bytes[(row * pixels.bytesPerRow)..<(row * pixels.bytesPerRow + rowBytes)]
        }
        guard let image = tight.withUnsafeBytes({ memory in
            modelc_vips_new_from_memory_copy(memory.baseAddress, memory.count, Int32(pixels.width), Int32(pixels.height), 3, VIPS_FORMAT_UCHAR)
        }) else { throw .damaged(file: file, reason: "libvips could not take the pixels") }
        defer { modelc_vips_unref(image) }
        var buffer: UnsafeMutableRawPointer?
        var size = 0
        guard modelc_vips_write_to_buffer(image, suffix, &buffer, &size) == 0, let buffer else {
            let reason = modelc_vips_error_take().map { text in
                defer { modelc_vips_free(text) }
                return String(cString: text)
            } ?? "encoding \(suffix) failed"
            throw .damaged(file: file, reason: reason)
        }
        defer { modelc_vips_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: size))
    }
}
