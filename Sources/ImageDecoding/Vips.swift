import CVips

#if canImport(Glibc)
import Glibc
#endif

/// libvips, started once per process on first use.
///
/// libvips is thread-safe once started. Its operation cache is turned off:
/// modelc never repeats an operation on the same image, and a cached load
/// could hand back the pixels of an earlier buffer at the same address.
enum Vips {
    /// `nil` once started; otherwise why libvips could not be started.
    private static let startup: String? = start()

    private static func start() -> String? {
        // Failures reach callers as errors naming the file; libvips' own
        // warnings on standard error would only repeat them. A caller's
        // VIPS_WARNING setting is kept.
        setenv("VIPS_WARNING", "0", 0)
        guard modelc_vips_init("modelc") == 0 else { return takeError() }
        vips_cache_set_max(0)
        vips_cache_set_max_mem(0)
        vips_cache_set_max_files(0)
        let configured = getenv("VIPS_CONCURRENCY").flatMap { Int32(String(cString: $0)) }
        vips_concurrency_set(configured.map { max(1, $0) } ?? 1)
        return nil
    }

    /// Starts libvips if this is the first call.
    ///
    /// - Throws: `ImageError.libraryUnavailable` when it cannot be started.
    static func ensureStarted() throws(ImageError) {
        if let reason = startup { throw .libraryUnavailable(reason: reason) }
    }

    /// The first line of libvips' error buffer, which is then cleared.
    ///
    /// The buffer is one per process: when two threads fail at the same moment,
    /// each may report the other's message (both still fail).
    static func takeError() -> String {
        guard let copy = vips_error_buffer_copy() else { return "unknown libvips error" }
        defer { g_free(copy) }
        let line = String(cString: copy).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? "unknown libvips error" : line
    }
}

/// A libvips operation failed; `message` is libvips' own first line.
struct VipsFailure: Error {
    let message: String
}

/// One reference to a libvips image, dropped with this object.
///
/// libvips images are lazy: operations build a pipeline and pixels are
/// computed when the result is written to memory. Each output holds a
/// reference to its input, so handles can be dropped in any order.
final class VipsImageHandle {
    let pointer: UnsafeMutablePointer<VipsImage>

    init(_ pointer: UnsafeMutablePointer<VipsImage>) {
        self.pointer = pointer
    }

    deinit {
        modelc_vips_unref(pointer)
    }

    var width: Int { Int(vips_image_get_width(pointer)) }
    var height: Int { Int(vips_image_get_height(pointer)) }
    var bands: Int { Int(vips_image_get_bands(pointer)) }
    var hasAlpha: Bool { vips_image_hasalpha(pointer) != 0 }
    var interpretation: VipsInterpretation { vips_image_get_interpretation(pointer) }
    var format: VipsBandFormat { vips_image_get_format(pointer) }

    /// The EXIF orientation recorded by the loader, if any.
    var storedOrientation: ImageOrientation? {
        guard vips_image_get_typeof(pointer, "orientation") != 0 else { return nil }
        var value: Int32 = 0
        guard vips_image_get_int(pointer, "orientation", &value) == 0 else {
            _ = Vips.takeError()
            return nil
        }
        return ImageOrientation(rawValue: UInt32(clamping: value))
    }

    /// The result of one libvips operation on this image.
    func applying(
        _ operation: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(VipsFailure) -> VipsImageHandle {
        var output: UnsafeMutablePointer<VipsImage>?
        guard operation(pointer, &output) == 0, let output else { throw VipsFailure(message: Vips.takeError()) }
        return VipsImageHandle(output)
    }

    /// Computes the pixels: `height` rows of `width × bands` bytes (8-bit images only).
    func writtenToMemory() throws(VipsFailure) -> [UInt8] {
        var size = 0
        guard let memory = vips_image_write_to_memory(pointer, &size) else {
            throw VipsFailure(message: Vips.takeError())
        }
        defer { g_free(memory) }
        return [UInt8](UnsafeRawBufferPointer(start: memory, count: size))
    }
}
