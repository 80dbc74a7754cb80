#ifndef MODELC_CVIPS_H
#define MODELC_CVIPS_H
/* libvips, opened with dlopen on first use rather than linked: commands that
   never decode an image (compile, validate, fetch, …) do not load libvips and
   the ~60 libraries it needs. Nothing here needs libvips' or GLib's headers:
   the few enumerations modelc uses are declared below with the values of
   libvips' stable ABI (soname libvips.so.42), and images are opaque pointers.

   Call modelc_vips_load() once before anything else; when it fails every
   function below fails (NULL, -1, 0) instead of crashing. */
#include <stddef.h>

typedef struct _VipsImage VipsImage;

typedef enum {
    VIPS_INTERPRETATION_ERROR = -1,
    VIPS_INTERPRETATION_MULTIBAND = 0,
    VIPS_INTERPRETATION_B_W = 1,
    VIPS_INTERPRETATION_CMYK = 15,
    VIPS_INTERPRETATION_RGB = 17,
    VIPS_INTERPRETATION_sRGB = 22,
    VIPS_INTERPRETATION_RGB16 = 25,
    VIPS_INTERPRETATION_GREY16 = 26,
    VIPS_INTERPRETATION_scRGB = 28
} VipsInterpretation;

typedef enum {
    VIPS_FORMAT_NOTSET = -1,
    VIPS_FORMAT_UCHAR = 0,
    VIPS_FORMAT_USHORT = 2,
    VIPS_FORMAT_FLOAT = 6
} VipsBandFormat;

typedef enum { VIPS_ANGLE_D0 = 0, VIPS_ANGLE_D90 = 1, VIPS_ANGLE_D180 = 2, VIPS_ANGLE_D270 = 3 } VipsAngle;
typedef enum { VIPS_DIRECTION_HORIZONTAL = 0, VIPS_DIRECTION_VERTICAL = 1 } VipsDirection;

/* Opens libvips.so.42 and looks up its entry points, once per process
   (thread-safe). NULL on success, otherwise why, naming the library. */
const char *modelc_vips_load(void);

/* vips_init after checking the ABI version (what VIPS_INIT does). */
int modelc_vips_init(const char *argv0);

void modelc_vips_cache_off(void);
int modelc_vips_concurrency_get(void);
void modelc_vips_concurrency_set(int threads);
/* Turns libvips' run-time generated vector code (liborc, or Highway from 8.15) on or off. */
void modelc_vips_vector_set_enabled(int enabled);
int modelc_vips_vector_isenabled(void);
const char *modelc_vips_version_string(void);
/* A copy of libvips' error buffer (free with modelc_vips_free), which is then cleared. */
char *modelc_vips_error_take(void);
/* g_free. */
void modelc_vips_free(void *memory);
/* g_object_unref. */
void modelc_vips_unref(VipsImage *image);

int modelc_vips_image_get_width(const VipsImage *image);
int modelc_vips_image_get_height(const VipsImage *image);
int modelc_vips_image_get_bands(const VipsImage *image);
int modelc_vips_image_hasalpha(VipsImage *image);
VipsInterpretation modelc_vips_image_get_interpretation(const VipsImage *image);
VipsBandFormat modelc_vips_image_get_format(const VipsImage *image);
/* 1 and the value in *value when the image has an integer field `name`. */
int modelc_vips_image_get_int(VipsImage *image, const char *name, int *value);
void modelc_vips_image_set_int(VipsImage *image, const char *name, int value);
int modelc_vips_colourspace_issupported(const VipsImage *image);

/* The name of the loader libvips would pick for these bytes, or NULL. */
const char *modelc_vips_find_load_buffer(const void *data, size_t size);
VipsImage *modelc_vips_new_from_memory_copy(const void *data, size_t size, int width, int height, int bands,
                                            VipsBandFormat format);
/* Computes the pixels into a g_malloc'd buffer (free with modelc_vips_free). */
void *modelc_vips_write_to_memory(VipsImage *image, size_t *size);

/* Most libvips operations are variadic (optional arguments as name/value
   pairs ending in NULL); Swift cannot call them. Each wrapper below fixes
   the optional arguments one call needs. Loaders stop at the first error or
   truncation (fail_on) rather than fill the rest of the image with grey. */
VipsImage *modelc_vips_load_file(const char *path);
VipsImage *modelc_vips_load_buffer(const void *data, size_t size);
/* JPEG shrink-on-load: the decoder scales by 1/shrink (1, 2, 4 or 8) in the DCT domain. */
int modelc_vips_jpegload_file(const char *path, VipsImage **out, int shrink);
int modelc_vips_jpegload_buffer(const void *data, size_t size, VipsImage **out, int shrink);
int modelc_vips_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height);
int modelc_vips_extract_band(VipsImage *in, VipsImage **out, int band, int n);
int modelc_vips_rot(VipsImage *in, VipsImage **out, VipsAngle angle);
int modelc_vips_flip(VipsImage *in, VipsImage **out, VipsDirection direction);
int modelc_vips_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space);
int modelc_vips_cast_uchar(VipsImage *in, VipsImage **out);
int modelc_vips_flatten(VipsImage *in, VipsImage **out, const double *background, int bands);
/* Marks how the bands are to be read (sRGB, B_W, …) without touching the pixels. */
int modelc_vips_copy_interpretation(VipsImage *in, VipsImage **out, VipsInterpretation interpretation);
/* Encodes an image in the format named by `suffix` with its options (".png",
   ".jpg[Q=90]", ".webp[lossless]"); the tests make their images with it.
   The buffer is g_malloc'd (free with modelc_vips_free). */
int modelc_vips_write_to_buffer(VipsImage *in, const char *suffix, void **buffer, size_t *size);

/* Drawing, in place, on an image held in memory (one made by
   modelc_vips_new_from_memory_copy): `ink` holds one value per band. */
int modelc_vips_draw_rect(VipsImage *image, const double *ink, int bands, int left, int top, int width, int height,
                          int fill);
/* `text` rendered (Pango markup, the default font) as a one-band 8-bit mask; NULL on failure. */
VipsImage *modelc_vips_text(const char *text, int dpi);
/* Draws `ink` through `mask` (0 keeps the image, 255 is all ink) with its top left at (x, y). */
int modelc_vips_draw_mask(VipsImage *image, const double *ink, int bands, VipsImage *mask, int x, int y);
#endif
