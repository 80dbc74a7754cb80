#include "CVips.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Values of libvips' enumerations used only here (libvips 8 ABI). */
enum { FAIL_ON_ERROR = 2 };
/* The ABI (soname major) these declarations are written against. */
enum { ABI_VERSION = 42 };

typedef VipsImage *(*NewFromFile)(const char *, ...);
typedef VipsImage *(*NewFromBuffer)(const void *, size_t, const char *, ...);
typedef int (*LoadFile)(const char *, VipsImage **, ...);
typedef int (*LoadBuffer)(void *, size_t, VipsImage **, ...);
typedef int (*Unary)(VipsImage *, VipsImage **, ...);
typedef int (*UnaryInt)(VipsImage *, VipsImage **, int, ...);
typedef int (*UnaryRect)(VipsImage *, VipsImage **, int, int, int, int, ...);
typedef int (*WriteToBuffer)(VipsImage *, const char *, void **, size_t *, ...);
typedef int (*DrawRect)(VipsImage *, double *, int, int, int, int, int, ...);
typedef int (*DrawMask)(VipsImage *, double *, int, VipsImage *, int, int, ...);
typedef int (*Text)(VipsImage **, const char *, ...);

/* libvips' entry points, looked up once by load(). */
static struct {
    int (*init)(const char *);
    int (*version)(int);
    const char *(*version_string)(void);
    void (*cache_set_max)(int);
    void (*cache_set_max_mem)(size_t);
    void (*cache_set_max_files)(int);
    int (*concurrency_get)(void);
    void (*concurrency_set)(int);
    void (*vector_set_enabled)(int);
    int (*vector_isenabled)(void);
    char *(*error_buffer_copy)(void);
    void (*error_clear)(void);
    void (*g_free)(void *);
    void (*g_object_unref)(void *);
    int (*get_width)(const VipsImage *);
    int (*get_height)(const VipsImage *);
    int (*get_bands)(const VipsImage *);
    int (*hasalpha)(VipsImage *);
    VipsInterpretation (*get_interpretation)(const VipsImage *);
    VipsBandFormat (*get_format)(const VipsImage *);
    unsigned long (*get_typeof)(const VipsImage *, const char *);
    int (*get_int)(const VipsImage *, const char *, int *);
    void (*set_int)(VipsImage *, const char *, int);
    int (*colourspace_issupported)(const VipsImage *);
    const char *(*find_load_buffer)(const void *, size_t);
    VipsImage *(*new_from_memory_copy)(const void *, size_t, int, int, int, VipsBandFormat);
    void *(*write_to_memory)(VipsImage *, size_t *);
    NewFromFile new_from_file;
    NewFromBuffer new_from_buffer;
    LoadFile jpegload;
    LoadBuffer jpegload_buffer;
    void *(*array_double_new)(const double *, int);
    void (*area_unref)(void *);
    UnaryRect extract_area;
    UnaryInt extract_band;
    UnaryInt rot;
    UnaryInt flip;
    UnaryInt colourspace;
    UnaryInt cast;
    Unary flatten;
    Unary copy;
    WriteToBuffer write_to_buffer;
    DrawRect draw_rect;
    DrawMask draw_mask;
    Text text;
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

/* Fills api from the library, or records why not. */
static void load(void) {
    /* GLib's g_free and g_object_unref are found through libvips' dependencies. */
    static const struct modelc_library_symbol symbols[] = {
        {"vips_init", (void **)&api.init},
        {"vips_version", (void **)&api.version},
        {"vips_version_string", (void **)&api.version_string},
        {"vips_cache_set_max", (void **)&api.cache_set_max},
        {"vips_cache_set_max_mem", (void **)&api.cache_set_max_mem},
        {"vips_cache_set_max_files", (void **)&api.cache_set_max_files},
        {"vips_concurrency_get", (void **)&api.concurrency_get},
        {"vips_concurrency_set", (void **)&api.concurrency_set},
        {"vips_vector_set_enabled", (void **)&api.vector_set_enabled},
        {"vips_vector_isenabled", (void **)&api.vector_isenabled},
        {"vips_error_buffer_copy", (void **)&api.error_buffer_copy},
        {"vips_error_clear", (void **)&api.error_clear},
        {"g_free", (void **)&api.g_free},
        {"g_object_unref", (void **)&api.g_object_unref},
        {"vips_image_get_width", (void **)&api.get_width},
        {"vips_image_get_height", (void **)&api.get_height},
        {"vips_image_get_bands", (void **)&api.get_bands},
        {"vips_image_hasalpha", (void **)&api.hasalpha},
        {"vips_image_get_interpretation", (void **)&api.get_interpretation},
        {"vips_image_get_format", (void **)&api.get_format},
        {"vips_image_get_typeof", (void **)&api.get_typeof},
        {"vips_image_get_int", (void **)&api.get_int},
        {"vips_image_set_int", (void **)&api.set_int},
        {"vips_colourspace_issupported", (void **)&api.colourspace_issupported},
        {"vips_foreign_find_load_buffer", (void **)&api.find_load_buffer},
        {"vips_image_new_from_memory_copy", (void **)&api.new_from_memory_copy},
        {"vips_image_write_to_memory", (void **)&api.write_to_memory},
        {"vips_image_new_from_file", (void **)&api.new_from_file},
        {"vips_image_new_from_buffer", (void **)&api.new_from_buffer},
        {"vips_jpegload", (void **)&api.jpegload},
        {"vips_jpegload_buffer", (void **)&api.jpegload_buffer},
        {"vips_array_double_new", (void **)&api.array_double_new},
        {"vips_area_unref", (void **)&api.area_unref},
        {"vips_extract_area", (void **)&api.extract_area},
        {"vips_extract_band", (void **)&api.extract_band},
        {"vips_rot", (void **)&api.rot},
        {"vips_flip", (void **)&api.flip},
        {"vips_colourspace", (void **)&api.colourspace},
        {"vips_cast", (void **)&api.cast},
        {"vips_flatten", (void **)&api.flatten},
        {"vips_copy", (void **)&api.copy},
        {"vips_image_write_to_buffer", (void **)&api.write_to_buffer},
        {"vips_draw_rect", (void **)&api.draw_rect},
        {"vips_draw_mask", (void **)&api.draw_mask},
        {"vips_text", (void **)&api.text},
    };
    if (!modelc_library_open("libvips.so.42", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure)) return;
    /* VIPS_INIT's check: the library's ABI (current - age) is the one declared here. */
    int abi = api.version(3) - api.version(5);
    if (abi != ABI_VERSION) {
        snprintf(failure, sizeof failure, "libvips.so.42: ABI version %d, modelc needs %d", abi, ABI_VERSION);
        memset(&api, 0, sizeof api);
        return;
    }
    loaded = 1;
}

const char *modelc_vips_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

/* Each wrapper fails like libvips would when the library could not be loaded.
   pthread_once also orders the reads of api after load() wrote it. */
#define NEEDS(fn, failed) do { if (modelc_vips_load()) return failed; } while (0)

int modelc_vips_init(const char *argv0) {
    NEEDS(init, -1);
    return api.init(argv0);
}

void modelc_vips_cache_off(void) {
    if (modelc_vips_load()) return;
    api.cache_set_max(0);
    api.cache_set_max_mem(0);
    api.cache_set_max_files(0);
}
int modelc_vips_concurrency_get(void) { NEEDS(concurrency_get, 0); return api.concurrency_get(); }
void modelc_vips_concurrency_set(int threads) { if (!modelc_vips_load()) api.concurrency_set(threads); }
void modelc_vips_vector_set_enabled(int enabled) { if (!modelc_vips_load()) api.vector_set_enabled(enabled); }
int modelc_vips_vector_isenabled(void) { NEEDS(vector_isenabled, 0); return api.vector_isenabled(); }
const char *modelc_vips_version_string(void) { NEEDS(version_string, NULL); return api.version_string(); }

char *modelc_vips_error_take(void) {
    NEEDS(error_buffer_copy, NULL);
    return api.error_buffer_copy();
}
void modelc_vips_free(void *memory) { if (!modelc_vips_load()) api.g_free(memory); }
void modelc_vips_unref(VipsImage *image) { if (!modelc_vips_load() && image) api.g_object_unref(image); }

int modelc_vips_image_get_width(const VipsImage *image) { NEEDS(get_width, 0); return api.get_width(image); }
int modelc_vips_image_get_height(const VipsImage *image) { NEEDS(get_height, 0); return api.get_height(image); }
int modelc_vips_image_get_bands(const VipsImage *image) { NEEDS(get_bands, 0); return api.get_bands(image); }
int modelc_vips_image_hasalpha(VipsImage *image) { NEEDS(hasalpha, 0); return api.hasalpha(image); }
VipsInterpretation modelc_vips_image_get_interpretation(const VipsImage *image) {
    NEEDS(get_interpretation, VIPS_INTERPRETATION_ERROR);
    return api.get_interpretation(image);
}
VipsBandFormat modelc_vips_image_get_format(const VipsImage *image) {
    NEEDS(get_format, VIPS_FORMAT_NOTSET);
    return api.get_format(image);
}
int modelc_vips_image_get_int(VipsImage *image, const char *name, int *value) {
    NEEDS(get_int, 0);
    if (api.get_typeof(image, name) == 0) return 0;
    if (api.get_int(image, name, value) != 0) {
        api.error_clear();
        return 0;
    }
    return 1;
}
void modelc_vips_image_set_int(VipsImage *image, const char *name, int value) {
    if (!modelc_vips_load()) api.set_int(image, name, value);
}
int modelc_vips_colourspace_issupported(const VipsImage *image) {
    NEEDS(colourspace_issupported, 0);
    return api.colourspace_issupported(image);
}
const char *modelc_vips_find_load_buffer(const void *data, size_t size) {
    NEEDS(find_load_buffer, NULL);
    return api.find_load_buffer(data, size);
}
VipsImage *modelc_vips_new_from_memory_copy(const void *data, size_t size, int width, int height, int bands,
                                            VipsBandFormat format) {
    NEEDS(new_from_memory_copy, NULL);
    return api.new_from_memory_copy(data, size, width, height, bands, format);
}
void *modelc_vips_write_to_memory(VipsImage *image, size_t *size) {
    NEEDS(write_to_memory, NULL);
    return api.write_to_memory(image, size);
}

VipsImage *modelc_vips_load_file(const char *path) {
    NEEDS(new_from_file, NULL);
    return api.new_from_file(path, "fail_on", FAIL_ON_ERROR, NULL);
}
VipsImage *modelc_vips_load_buffer(const void *data, size_t size) {
    NEEDS(new_from_buffer, NULL);
    return api.new_from_buffer(data, size, "", "fail_on", FAIL_ON_ERROR, NULL);
}
int modelc_vips_jpegload_file(const char *path, VipsImage **out, int shrink) {
    NEEDS(jpegload, -1);
    return api.jpegload(path, out, "shrink", shrink, "fail_on", FAIL_ON_ERROR, NULL);
}
int modelc_vips_jpegload_buffer(const void *data, size_t size, VipsImage **out, int shrink) {
    NEEDS(jpegload_buffer, -1);
    return api.jpegload_buffer((void *)data, size, out, "shrink", shrink, "fail_on", FAIL_ON_ERROR, NULL);
}
int modelc_vips_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    NEEDS(extract_area, -1);
    return api.extract_area(in, out, left, top, width, height, NULL);
}
int modelc_vips_extract_band(VipsImage *in, VipsImage **out, int band, int n) {
    NEEDS(extract_band, -1);
    return api.extract_band(in, out, band, "n", n, NULL);
}
int modelc_vips_rot(VipsImage *in, VipsImage **out, VipsAngle angle) {
    NEEDS(rot, -1);
    return api.rot(in, out, (int)angle, NULL);
}
int modelc_vips_flip(VipsImage *in, VipsImage **out, VipsDirection direction) {
    NEEDS(flip, -1);
    return api.flip(in, out, (int)direction, NULL);
}
int modelc_vips_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    NEEDS(colourspace, -1);
    return api.colourspace(in, out, (int)space, NULL);
}
int modelc_vips_cast_uchar(VipsImage *in, VipsImage **out) {
    NEEDS(cast, -1);
    return api.cast(in, out, (int)VIPS_FORMAT_UCHAR, NULL);
}
int modelc_vips_flatten(VipsImage *in, VipsImage **out, const double *background, int bands) {
    NEEDS(flatten, -1);
    void *array = api.array_double_new(background, bands);
    int result = api.flatten(in, out, "background", array, NULL);
    api.area_unref(array);
    return result;
}
int modelc_vips_copy_interpretation(VipsImage *in, VipsImage **out, VipsInterpretation interpretation) {
    NEEDS(copy, -1);
    return api.copy(in, out, "interpretation", (int)interpretation, NULL);
}
int modelc_vips_write_to_buffer(VipsImage *in, const char *suffix, void **buffer, size_t *size) {
    NEEDS(write_to_buffer, -1);
    return api.write_to_buffer(in, suffix, buffer, size, NULL);
}
int modelc_vips_draw_rect(VipsImage *image, const double *ink, int bands, int left, int top, int width, int height,
                          int fill) {
    NEEDS(draw_rect, -1);
    return api.draw_rect(image, (double *)ink, bands, left, top, width, height, "fill", fill, NULL);
}
VipsImage *modelc_vips_text(const char *text, int dpi) {
    NEEDS(text, NULL);
    VipsImage *out = NULL;
    if (api.text(&out, text, "dpi", dpi, NULL) != 0) return NULL;
    return out;
}
int modelc_vips_draw_mask(VipsImage *image, const double *ink, int bands, VipsImage *mask, int x, int y) {
    NEEDS(draw_mask, -1);
    return api.draw_mask(image, (double *)ink, bands, mask, x, y, NULL);
}
