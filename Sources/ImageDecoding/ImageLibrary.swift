import CVips

/// Process-wide settings of the image library, libvips.
public enum ImageLibrary {
    /// The libvips version this process runs with (`8.14.1`), loading libvips
    /// if needed; empty when it cannot be loaded.
    public static var version: String {
        modelc_vips_version_string().map { String(cString: $0) } ?? ""
    }

    /// How many threads libvips uses to compute one image.
    ///
    /// One by default (or `VIPS_CONCURRENCY` from the environment): callers
    /// that handle many images run them in parallel themselves, and a model
    /// input is too small to gain from more. Applies to the whole process.
    public static func threadsPerImage() throws(ImageError) -> Int {
        try Vips.ensureStarted()
        return Int(modelc_vips_concurrency_get())
    }

    /// Sets `threadsPerImage()` for the whole process (at least 1).
    public static func setThreadsPerImage(_ count: Int) throws(ImageError) {
        try Vips.ensureStarted()
        modelc_vips_concurrency_set(Int32(clamping: max(1, count)))
    }
}
