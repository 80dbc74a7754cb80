#ifndef MODELC_CJPEG_H
#define MODELC_CJPEG_H

#include <stddef.h>

/* libjpeg (Debian's libjpeg62-turbo, the library libvips decodes JPEGs
   with) opened with dlopen at the first JPEG, for the direct path of
   ImageDecoding: plain 8-bit gray or colour JPEGs decoded straight into
   memory, scaled down while decoding (1/2, 1/4, 1/8), without libvips'
   per-image machinery. Anything else (CMYK, an EXIF orientation other than
   1, data libjpeg warns about, a library that cannot be opened) is left to
   libvips: these calls then return MODELC_JPEG_GENERAL. */

enum {
    MODELC_JPEG_OK = 0,
    /* Not for the direct path; decode it the general way. */
    MODELC_JPEG_GENERAL = 1,
};

/* What the header says. */
struct modelc_jpeg_header {
    int width;
    int height;
    /* 1 (gray) or 3 (colour). */
    int components;
    /* The EXIF orientation (1–8), 0 when the file records none. */
    int orientation;
};

/* Reads the header (and the EXIF orientation when read_orientation is set). */
int modelc_jpeg_read_header(const void *data, size_t size, int read_orientation, struct modelc_jpeg_header *header);

/* Decodes the image scaled by 1/shrink (1, 2, 4 or 8) into pixels: rows of
   width × components bytes, components 1 (gray; colour JPEGs are not
   turned gray here) or 3 (RGB). width and height are the scaled size,
   libjpeg's (the stored size divided by shrink, rounded up); the call fails
   when the image is of another size. */
int modelc_jpeg_decode(const void *data, size_t size, int shrink, int components, unsigned char *pixels,
                       int width, int height);

#endif
