import CVips

#if canImport(Glibc)
import Glibc
#endif

/// libvips, loaded (dlopen) and started once per process on first use.
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
        if let failure = modelc_vips_load() { return String(cString: failure) }
        guard modelc_vips_init("modelc") == 0 else { return takeError() }
        modelc_vips_cache_off()
        // No run-time generated vector code. libvips 8.14 with liborc 0.4.33
        // (Debian 12) corrupts the heap when two images are decoded and
        // resized at once: Scripts/stress-vips.c, plain C calling libvips
        // alone, aborted in 8 of 100 runs with two threads, in none with one
        // or with vectors off. Without them decoding is as fast here, and
        // shrinking rounds as libvips' exact C path does.
        modelc_vips_vector_set_enabled(0)
        let configured = getenv("VIPS_CONCURRENCY").flatMap { Int32(String(cString: $0)) }
        modelc_vips_concurrency_set(configured.map { max(1, $0) } ?? 1)
        return nil
    }

    /// Starts libvips if this is the first call.
    ///
    /// - Throws: `ImageError.libraryUnavailable` when it cannot be loaded or started.
    static func ensureStarted() throws(ImageError) {
        if let reason = startup { throw .libraryUnavailable(reason: reason) }
    }

    /// Whether libvips runs its run-time generated vector code (never, once started).
    static var vectorsEnabled: Bool { modelc_vips_vector_isenabled() != 0 }

    /// The first line of libvips' error buffer, which is then cleared.
    ///
    /// The buffer is one per process: when two threads fail at the same moment,
    /// each may report the other's message (both still fail).
    static func takeError() -> String {
        guard let copy = modelc_vips_error_take() else { return "unknown libvips error" }
        defer { modelc_vips_free(copy) }
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
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        modelc_vips_unref(pointer)
    }

    var width: Int { Int(modelc_vips_image_get_width(pointer)) }
    var height: Int { Int(modelc_vips_image_get_height(pointer)) }
    var bands: Int { Int(modelc_vips_image_get_bands(pointer)) }
    var hasAlpha: Bool { modelc_vips_image_hasalpha(pointer) != 0 }
    var interpretation: VipsInterpretation { modelc_vips_image_get_interpretation(pointer) }
    var format: VipsBandFormat { modelc_vips_image_get_format(pointer) }

    /// The EXIF orientation recorded by the loader, if any.
    var storedOrientation: ImageOrientation? {
        var value: Int32 = 0
        guard modelc_vips_image_get_int(pointer, "orientation", &value) != 0 else { return nil }
        return ImageOrientation(rawValue: UInt32(clamping: value))
    }

    /// The result of one libvips operation on this image.
    func applying(
        _ operation: (OpaquePointer, UnsafeMutablePointer<OpaquePointer?>) -> Int32
    ) throws(VipsFailure) -> VipsImageHandle {
        var output: OpaquePointer?
        guard operation(pointer, &output) == 0, let output else { throw VipsFailure(message: Vips.takeError()) }
        return VipsImageHandle(output)
    }

    /// Computes the pixels and lends them to `body`: `height` rows of
    /// `width × bands` bytes (8-bit images only), valid during the call.
    func withPixels<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(VipsFailure) -> Result {
        var size = 0
        guard let memory = modelc_vips_write_to_memory(pointer, &size) else {
            throw VipsFailure(message: Vips.takeError())
        }
        defer { modelc_vips_free(memory) }
        return body(UnsafeBufferPointer(start: memory.assumingMemoryBound(to: UInt8.self), count: size))
    }

    /// Computes the pixels: `height` rows of `width × bands` bytes (8-bit images only).
    func writtenToMemory() throws(VipsFailure) -> [UInt8] {
        var size = 0
        guard let memory = modelc_vips_write_to_memory(pointer, &size) else {
            throw VipsFailure(message: Vips.takeError())
        }
        defer { modelc_vips_free(memory) }
        return [UInt8](UnsafeRawBufferPointer(start: memory, count: size))
    }
}
