#ifndef MODELC_CVIPS_SHIM_H
#define MODELC_CVIPS_SHIM_H
#include <vips/vips.h>

/* VIPS_INIT is a macro (it checks the ABI version, then calls vips_init);
   Swift does not import it. */
static inline int modelc_vips_init(const char *argv0) {
    return VIPS_INIT(argv0);
}

/* Most libvips operations are variadic (optional arguments as name/value
   pairs ending in NULL); Swift cannot call them. Each wrapper below fixes
   the optional arguments one call needs. Loaders stop at the first error or
   truncation (fail_on) rather than fill the rest of the image with grey. */
static inline VipsImage *modelc_vips_load_file(const char *path) {
    return vips_image_new_from_file(path, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
static inline VipsImage *modelc_vips_load_buffer(const void *data, size_t size) {
    return vips_image_new_from_buffer(data, size, "", "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
/* JPEG shrink-on-load: the decoder scales by 1/shrink (1, 2, 4 or 8) in the DCT domain. */
static inline int modelc_vips_jpegload_file(const char *path, VipsImage **out, int shrink) {
    return vips_jpegload(path, out, "shrink", shrink, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
static inline int modelc_vips_jpegload_buffer(const void *data, size_t size, VipsImage **out, int shrink) {
    return vips_jpegload_buffer((void *)data, size, out, "shrink", shrink, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
static inline int modelc_vips_resize(VipsImage *in, VipsImage **out, double hscale, double vscale, VipsKernel kernel) {
    return vips_resize(in, out, hscale, "vscale", vscale, "kernel", kernel, NULL);
}
/* Enlarges by (hscale, vscale) ≥ 1 with the bicubic interpolator to exactly width × height, pixel
 * centres mapped to pixel centres on both axes: output x samples input (x + 0.5) / hscale - 0.5. */
static inline int modelc_vips_enlarge(VipsImage *in, VipsImage **out, double hscale, double vscale, int width, int height) {
    VipsInterpolate *bicubic = vips_interpolate_new("bicubic");
    if (!bicubic) return -1;
    VipsArrayInt *area = vips_array_int_newv(4, 0, 0, width, height);
    int result = vips_affine(in, out, hscale, 0.0, 0.0, vscale, "interpolate", bicubic,
                             "idx", 0.5, "idy", 0.5, "odx", -0.5, "ody", -0.5, "oarea", area,
                             "extend", VIPS_EXTEND_COPY, NULL);
    vips_area_unref(VIPS_AREA(area));
    g_object_unref(bicubic);
    return result;
}
static inline int modelc_vips_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_extract_area(in, out, left, top, width, height, NULL);
}
static inline int modelc_vips_extract_band(VipsImage *in, VipsImage **out, int band, int n) {
    return vips_extract_band(in, out, band, "n", n, NULL);
}
/* Places the image at (x, y) on a width × height canvas of `background` (one value per band). */
static inline int modelc_vips_embed(VipsImage *in, VipsImage **out, int x, int y, int width, int height,
                                    const double *background, int bands) {
    VipsArrayDouble *array = vips_array_double_new(background, bands);
    int result = vips_embed(in, out, x, y, width, height,
                            "extend", VIPS_EXTEND_BACKGROUND, "background", array, NULL);
    vips_area_unref(VIPS_AREA(array));
    return result;
}
/* Extends the edges by copying the outermost pixels. */
static inline int modelc_vips_embed_copy(VipsImage *in, VipsImage **out, int x, int y, int width, int height) {
    return vips_embed(in, out, x, y, width, height, "extend", VIPS_EXTEND_COPY, NULL);
}
static inline int modelc_vips_rot(VipsImage *in, VipsImage **out, VipsAngle angle) {
    return vips_rot(in, out, angle, NULL);
}
static inline int modelc_vips_flip(VipsImage *in, VipsImage **out, VipsDirection direction) {
    return vips_flip(in, out, direction, NULL);
}
static inline int modelc_vips_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_colourspace(in, out, space, NULL);
}
static inline int modelc_vips_cast_uchar(VipsImage *in, VipsImage **out) {
    return vips_cast(in, out, VIPS_FORMAT_UCHAR, NULL);
}
static inline int modelc_vips_flatten(VipsImage *in, VipsImage **out, const double *background, int bands) {
    VipsArrayDouble *array = vips_array_double_new(background, bands);
    int result = vips_flatten(in, out, "background", array, NULL);
    vips_area_unref(VIPS_AREA(array));
    return result;
}
static inline int modelc_vips_premultiply(VipsImage *in, VipsImage **out) {
    return vips_premultiply(in, out, NULL);
}
static inline int modelc_vips_unpremultiply(VipsImage *in, VipsImage **out) {
    return vips_unpremultiply(in, out, NULL);
}
static inline int modelc_vips_bandjoin_const1(VipsImage *in, VipsImage **out, double value) {
    return vips_bandjoin_const1(in, out, value, NULL);
}
/* Marks how the bands are to be read (sRGB, B_W, …) without touching the pixels. */
static inline int modelc_vips_copy_interpretation(VipsImage *in, VipsImage **out, VipsInterpretation interpretation) {
    return vips_copy(in, out, "interpretation", interpretation, NULL);
}
/* Encodes an image in the format named by `suffix` with its options (".png",
   ".jpg[Q=90]", ".webp[lossless]"); the tests make their images with it.
   The buffer is g_malloc'd. */
static inline int modelc_vips_write_to_buffer(VipsImage *in, const char *suffix, void **buffer, size_t *size) {
    return vips_image_write_to_buffer(in, suffix, buffer, size, NULL);
}
static inline void modelc_vips_unref(VipsImage *image) {
    g_object_unref(image);
}
#endif
