/* Measurement only, not part of modelc: decode + resize of 640x480 JPEGs to 224x224
   (centre crop), one thread, libvips against libjpeg-turbo with a resampler written here.
   The numbers and the decision are in docs/images.md ("Why libvips").
     gcc -O2 -o /tmp/measure Scripts/measure-image-decoding.c $(pkg-config --cflags --libs vips) -ljpeg -lm
     VIPS_CONCURRENCY=1 taskset -c 1 /tmp/measure */
#include <vips/vips.h>
#include <jpeglib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

typedef struct { void *data; size_t size; } Blob;
static int lanczos = 0;

/* Separable antialiased resampler: triangle filter widened by the scale factor (as Pillow's bilinear reduce). */
typedef struct { int start, count; float *w; } Taps;
static Taps *taps(int in, int out, double offset, double span) {
    double scale = span / out, support = scale > 1 ? scale : 1;
    Taps *t = calloc(out, sizeof(Taps));
    for (int i = 0; i < out; i++) {
        double centre = offset + (i + 0.5) * scale;
        double reach = lanczos ? 3 * support : support; int lo = (int)floor(centre - reach), hi = (int)ceil(centre + reach);
        if (lo < 0) lo = 0; if (hi > in) hi = in;
        t[i].start = lo; t[i].count = hi - lo; t[i].w = malloc(sizeof(float) * (hi - lo));
        double sum = 0;
        for (int k = lo; k < hi; k++) { double d = fabs((k + 0.5 - centre) / support) / (lanczos ? 3 : 1); double v;
            if (lanczos) { double u = d * 3; v = u == 0 ? 1 : u < 3 ? 3 * sin(M_PI * u) * sin(M_PI * u / 3) / (M_PI * M_PI * u * u) : 0; } else v = d < 1 ? 1 - d : 0; t[i].w[k - lo] = v; sum += v; }
        for (int k = 0; k < hi - lo; k++) t[i].w[k] /= sum;
    }
    return t;
}
/* Resizes the crop (cx, cy, cw, ch) of an RGB image to ow x oh. */
static void resample(const unsigned char *src, int w, int h, double cx, double cy, double cw, double ch,
                     unsigned char *dst, int ow, int oh, float *tmp) {
    Taps *tx = taps(w, ow, cx, cw), *ty = taps(h, oh, cy, ch);
    int y0 = ty[0].start, y1 = ty[oh - 1].start + ty[oh - 1].count;
    for (int y = y0; y < y1; y++) {
        const unsigned char *row = src + (size_t)y * w * 3;
        float *o = tmp + (size_t)y * ow * 3;
        for (int x = 0; x < ow; x++) {
            float r = 0, g = 0, b = 0; const unsigned char *p = row + tx[x].start * 3;
            for (int k = 0; k < tx[x].count; k++, p += 3) { float q = tx[x].w[k]; r += q * p[0]; g += q * p[1]; b += q * p[2]; }
            o[x * 3] = r; o[x * 3 + 1] = g; o[x * 3 + 2] = b;
        }
    }
    for (int y = 0; y < oh; y++) {
        for (int x = 0; x < ow * 3; x++) {
            float v = 0;
            for (int k = 0; k < ty[y].count; k++) v += ty[y].w[k] * tmp[(size_t)(ty[y].start + k) * ow * 3 + x];
            int i = (int)lrintf(v); dst[(size_t)y * ow * 3 + x] = i < 0 ? 0 : i > 255 ? 255 : i;
        }
    }
    for (int i = 0; i < ow; i++) free(tx[i].w); for (int i = 0; i < oh; i++) free(ty[i].w); free(tx); free(ty);
}

static unsigned char *jpeg_decode(Blob b, int denom, int *w, int *h) {
    struct jpeg_decompress_struct c; struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e); jpeg_create_decompress(&c);
    jpeg_mem_src(&c, b.data, b.size); jpeg_read_header(&c, TRUE);
    c.out_color_space = JCS_RGB; c.scale_num = 1; c.scale_denom = denom;
    jpeg_start_decompress(&c);
    *w = c.output_width; *h = c.output_height;
    unsigned char *pixels = malloc((size_t)*w * *h * 3);
    while (c.output_scanline < c.output_height) { JSAMPROW row = pixels + (size_t)c.output_scanline * *w * 3; jpeg_read_scanlines(&c, &row, 1); }
    jpeg_finish_decompress(&c); jpeg_destroy_decompress(&c);
    return pixels;
}

static void fallback(Blob b, int denom, unsigned char *out, float *tmp) {
    int w, h; unsigned char *p = jpeg_decode(b, denom, &w, &h);
    double s = fmax(224.0 / w, 224.0 / h), cw = 224 / s, ch = 224 / s;
    resample(p, w, h, (w - cw) / 2, (h - ch) / 2, cw, ch, out, 224, 224, tmp);
    free(p);
}

static int kernel_choice = VIPS_KERNEL_LANCZOS3; static int seq = 0;
static int vips_decode_only(Blob b) {
    VipsImage *in = vips_image_new_from_buffer(b.data, b.size, "", "access", seq ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM, NULL);
    size_t size; void *m = vips_image_write_to_memory(in, &size); g_free(m); g_object_unref(in); return 0;
}
static int vips_path(Blob b, unsigned char *out, int shrink) {
    VipsImage *in, *t1, *t2, *t3;
    if (shrink > 1) { if (vips_jpegload_buffer(b.data, b.size, &in, "shrink", shrink, NULL)) return -1; }
    else if (!(in = vips_image_new_from_buffer(b.data, b.size, "", "access", seq ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM, NULL))) return -1;
    double s = fmax(224.0 / in->Xsize, 224.0 / in->Ysize);
    int rw = (int)lround(in->Xsize * s), rh = (int)lround(in->Ysize * s);
    if (vips_colourspace(in, &t1, VIPS_INTERPRETATION_sRGB, NULL)) return -1;
    if (vips_resize(t1, &t2, (double)rw / in->Xsize, "vscale", (double)rh / in->Ysize, "kernel", kernel_choice, NULL)) return -1;
    if (vips_extract_area(t2, &t3, (rw - 224) / 2, (rh - 224) / 2, 224, 224, NULL)) return -1;
    size_t size; void *m = vips_image_write_to_memory(t3, &size);
    memcpy(out, m, size); g_free(m);
    g_object_unref(t3); g_object_unref(t2); g_object_unref(t1); g_object_unref(in);
    return 0;
}

int main(int argc, char **argv) {
    if (VIPS_INIT(argv[0])) return 1;
    vips_concurrency_set(1); vips_cache_set_max(0);
    enum { N = 100 };
    Blob blobs[N];
    srand(7);
    for (int i = 0; i < N; i++) {
        /* Photo-like: smooth gradients, a few shapes, noise. */
        VipsImage *x, *g, *n, *sum, *img, *rgb;
        vips_xyz(&x, 640, 480, NULL);
        VipsImage *bx, *by; vips_extract_band(x, &bx, 0, NULL); vips_extract_band(x, &by, 1, NULL);
        VipsImage *r, *gg, *bb;
        double a = 0.2 + (i % 7) * 0.05;
        vips_linear1(bx, &r, a, i % 50, NULL); vips_linear1(by, &gg, a * 0.8, 30, NULL);
        VipsImage *sn; vips_gaussnoise(&n, 640, 480, "sigma", 12.0, "mean", 120.0, NULL);
        vips_add(r, gg, &sum, NULL); vips_linear1(sum, &sn, 0.5, 0, NULL);
        VipsImage *bands[3] = { r, gg, n }; vips_bandjoin(bands, &img, 3, NULL);
        vips_cast(img, &rgb, VIPS_FORMAT_UCHAR, NULL);
        VipsImage *srgb; vips_copy(rgb, &srgb, "interpretation", VIPS_INTERPRETATION_sRGB, NULL);
        vips_jpegsave_buffer(srgb, &blobs[i].data, &blobs[i].size, "Q", 90, NULL);
    }
    unsigned char out[224 * 224 * 3]; float *tmp = malloc(sizeof(float) * 480 * 224 * 3);
    const char *names[] = { "libvips decode only", "libjpeg-turbo decode only",
        "libvips: decode, Lanczos3 to 299x224, crop (ours)", "libvips, sequential access", "libvips, linear kernel",
        "libvips, JPEG shrink-on-load 1/2", "libjpeg-turbo + own triangle", "libjpeg-turbo + own Lanczos3",
        "libjpeg-turbo DCT 1/2 + own triangle" };
    for (int round = 0; round < 3; round++)
    for (int m = 0; m < 9; m++) {
        seq = m == 3; kernel_choice = m == 4 ? VIPS_KERNEL_LINEAR : VIPS_KERNEL_LANCZOS3; lanczos = m == 7;
        double t0 = now();
        for (int i = 0; i < N; i++) {
            int w, h;
            switch (m) {
            case 0: vips_decode_only(blobs[i]); break;
            case 1: free(jpeg_decode(blobs[i], 1, &w, &h)); break;
            case 2: case 3: case 4: vips_path(blobs[i], out, 1); break;
            case 5: vips_path(blobs[i], out, 2); break;
            case 6: case 7: fallback(blobs[i], 1, out, tmp); break;
            case 8: fallback(blobs[i], 2, out, tmp); break;
            }
        }
        double t = (now() - t0) / N;
        if (round == 2) printf("%-52s %.2f ms/image  %.0f images/s\n", names[m], t * 1e3, 1 / t);
    }
    size_t total = 0; for (int i = 0; i < N; i++) total += blobs[i].size;
    printf("mean JPEG size %zu bytes\n", total / N);
    return 0;
}
