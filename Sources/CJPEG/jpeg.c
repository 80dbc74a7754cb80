#include "CJPEG.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>

/* libjpeg's entry points, looked up once by load(). */
static struct {
    struct jpeg_error_mgr *(*std_error)(struct jpeg_error_mgr *);
    void (*create_decompress)(j_decompress_ptr, int, size_t);
    void (*mem_src)(j_decompress_ptr, const unsigned char *, unsigned long);
    void (*save_markers)(j_decompress_ptr, int, unsigned int);
    int (*read_header)(j_decompress_ptr, boolean);
    boolean (*start_decompress)(j_decompress_ptr);
    JDIMENSION (*read_scanlines)(j_decompress_ptr, JSAMPARRAY, JDIMENSION);
    boolean (*finish_decompress)(j_decompress_ptr);
    void (*destroy_decompress)(j_decompress_ptr);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;

static void load(void) {
    const struct modelc_library_symbol symbols[] = {
        {"jpeg_std_error", (void **)&api.std_error},
        {"jpeg_CreateDecompress", (void **)&api.create_decompress},
        {"jpeg_mem_src", (void **)&api.mem_src},
        {"jpeg_save_markers", (void **)&api.save_markers},
        {"jpeg_read_header", (void **)&api.read_header},
        {"jpeg_start_decompress", (void **)&api.start_decompress},
        {"jpeg_read_scanlines", (void **)&api.read_scanlines},
        {"jpeg_finish_decompress", (void **)&api.finish_decompress},
        {"jpeg_destroy_decompress", (void **)&api.destroy_decompress},
    };
    char failure[256];
    loaded = modelc_library_open("libjpeg.so.62", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* An error jumps back to the call; a warning (damaged or truncated data)
   is remembered, and the image goes to libvips, which reports it. */
struct failing_errors {
    struct jpeg_error_mgr manager;
    jmp_buf back;
    int warned;
};

static void error_exit(j_common_ptr info) {
    longjmp(((struct failing_errors *)info->err)->back, 1);
}

static void emit_message(j_common_ptr info, int level) {
    if (level < 0) ((struct failing_errors *)info->err)->warned = 1;
}

static void output_message(j_common_ptr info) { (void)info; }

/* The EXIF orientation in an APP1 marker: 1–8, 0 when absent, -1 when the
   EXIF data cannot be read. */
static int exif_orientation(const unsigned char *data, unsigned int length) {
    if (length < 6 || memcmp(data, "Exif\0\0", 6) != 0) return 0;
    const unsigned char *tiff = data + 6;
    unsigned long size = length - 6;
    if (size < 8) return -1;
    int little = tiff[0] == 'I' && tiff[1] == 'I';
    if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return -1;
#define U16(at) (little ? (unsigned)tiff[at] | (unsigned)tiff[(at) + 1] << 8 : (unsigned)tiff[at] << 8 | (unsigned)tiff[(at) + 1])
#define U32(at) (little ? (unsigned long)U16(at) | (unsigned long)U16((at) + 2) << 16 \
                        : (unsigned long)U16(at) << 16 | (unsigned long)U16((at) + 2))
    unsigned long directory = U32(4);
    if (directory + 2 > size) return -1;
    unsigned entries = U16(directory);
    for (unsigned i = 0; i < entries; i++) {
        unsigned long entry = directory + 2 + 12ul * i;
        if (entry + 12 > size) return -1;
        if (U16(entry) == 0x0112) {
            unsigned value = U16(entry + 8);
            return U16(entry + 2) == 3 && value >= 1 && value <= 8 ? (int)value : -1;
        }
    }
    return 0;
#undef U16
#undef U32
}

/* The header of data into info, set up with errors that jump back. */
#define BEGIN(info, errors, data, size)                                  \
    struct jpeg_decompress_struct info;                                  \
    struct failing_errors errors;                                        \
    pthread_once(&once, load);                                           \
    if (!loaded) return MODELC_JPEG_GENERAL;                             \
    memset(&errors, 0, sizeof errors);                                   \
    info.err = api.std_error(&errors.manager);                           \
    errors.manager.error_exit = error_exit;                              \
    errors.manager.emit_message = emit_message;                          \
    errors.manager.output_message = output_message;                      \
    api.create_decompress(&info, JPEG_LIB_VERSION, sizeof info);         \
    if (setjmp(errors.back)) {                                           \
        api.destroy_decompress(&info);                                   \
        return MODELC_JPEG_GENERAL;                                      \
    }                                                                    \
    api.mem_src(&info, (const unsigned char *)(data), (unsigned long)(size))

static int plain(const struct jpeg_decompress_struct *info) {
    return info->data_precision == 8
        && ((info->num_components == 1 && info->jpeg_color_space == JCS_GRAYSCALE)
            || (info->num_components == 3 && (info->jpeg_color_space == JCS_YCbCr || info->jpeg_color_space == JCS_RGB)));
}

int modelc_jpeg_read_header(const void *data, size_t size, int read_orientation, struct modelc_jpeg_header *header) {
    BEGIN(info, errors, data, size);
    if (read_orientation) api.save_markers(&info, JPEG_APP0 + 1, 0xFFFF);
    api.read_header(&info, TRUE);
    int result = errors.warned || !plain(&info) ? MODELC_JPEG_GENERAL : MODELC_JPEG_OK;
    header->width = (int)info.image_width;
    header->height = (int)info.image_height;
    header->components = info.num_components;
    header->orientation = 0;
    for (jpeg_saved_marker_ptr marker = info.marker_list; marker; marker = marker->next) {
        if (marker->marker != JPEG_APP0 + 1) continue;
        int found = exif_orientation(marker->data, marker->data_length);
        if (found < 0) result = MODELC_JPEG_GENERAL;
        if (found != 0) {
            header->orientation = found;
            break;
        }
    }
    api.destroy_decompress(&info);
    return result;
}

int modelc_jpeg_decode(const void *data, size_t size, int shrink, int components, unsigned char *pixels,
                       int width, int height) {
    BEGIN(info, errors, data, size);
    api.read_header(&info, TRUE);
    if (!plain(&info) || (components == 1 && info.num_components != 1) || (components != 1 && components != 3)) {
        api.destroy_decompress(&info);
        return MODELC_JPEG_GENERAL;
    }
    info.scale_num = 1;
    info.scale_denom = (unsigned int)shrink;
    info.out_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    api.start_decompress(&info);
    if ((int)info.output_width != width || (int)info.output_height != height || info.output_components != components) {
        api.destroy_decompress(&info);
        return MODELC_JPEG_GENERAL;
    }
    size_t stride = (size_t)width * (size_t)components;
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + stride * info.output_scanline;
        api.read_scanlines(&info, &row, 1);
    }
    api.finish_decompress(&info);
    int result = errors.warned ? MODELC_JPEG_GENERAL : MODELC_JPEG_OK;
    api.destroy_decompress(&info);
    return result;
}
