/* Measurement only, not part of modelc: where libvips' time goes on small targets. The detect
   bench's 200 generated 640x480 gray JPEGs (Scripts/bench-detect.sh writes them) are loaded
   at 1/4 and brought to 64x64 (scale to fill), one stage more per row, against libjpeg-turbo
   alone at 1/4; CPU time per image, libvips with one thread per image and no cache, as modelc.
   The numbers and the decision (the direct JPEG path) are in docs/images.md ("Decoding", "Why libvips").
     gcc -O2 -o /tmp/measure-jpeg Scripts/measure-jpeg-overhead.c $(pkg-config --cflags --libs vips) -ljpeg
     /tmp/measure-jpeg .build/bench/detect/images */
#include <vips/vips.h>
#include <jpeglib.h>
#include <stdio.h>
#include <time.h>

enum { COUNT = 200 };

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static const char *stages[] = {
    "libvips: jpegload shrink 4 + write to memory",
    "libvips: + a header-only load first (as modelc did)",
    "libvips: + colourspace to B_W",
    "libvips: + vips_resize Lanczos 3 to 64x64",
    "libjpeg-turbo alone at 1/4",
};

int main(int argc, char **argv) {
    if (argc != 2 || VIPS_INIT(argv[0])) {
        fprintf(stderr, "usage: %s DIR (of scene-000.jpg ... scene-199.jpg)\n", argv[0]);
        return 64;
    }
    vips_cache_set_max(0);
    vips_concurrency_set(1);
    gchar *data[COUNT];
    gsize sizes[COUNT];
    for (int i = 0; i < COUNT; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/scene-%03d.jpg", argv[1], i);
        if (!g_file_get_contents(path, &data[i], &sizes[i], NULL)) {
            fprintf(stderr, "cannot read %s\n", path);
            return 66;
        }
    }
    for (int stage = 0; stage < 5; stage++) {
        double start = cpu();
        for (int i = 0; i < COUNT; i++) {
            if (stage == 4) {
                struct jpeg_decompress_struct info;
                struct jpeg_error_mgr errors;
                info.err = jpeg_std_error(&errors);
                jpeg_create_decompress(&info);
                jpeg_mem_src(&info, (unsigned char *)data[i], sizes[i]);
                jpeg_read_header(&info, TRUE);
                info.scale_num = 1;
                info.scale_denom = 4;
                jpeg_start_decompress(&info);
                unsigned char row[4096];
                JSAMPROW rows = row;
                while (info.output_scanline < info.output_height) jpeg_read_scanlines(&info, &rows, 1);
                jpeg_finish_decompress(&info);
                jpeg_destroy_decompress(&info);
                continue;
            }
            VipsImage *header = NULL, *loaded = NULL, *gray = NULL, *resized = NULL;
            if (stage >= 1) vips_jpegload_buffer(data[i], sizes[i], &header, NULL);
            vips_jpegload_buffer(data[i], sizes[i], &loaded, "shrink", 4, NULL);
            VipsImage *last = loaded;
            if (stage >= 2) {
                vips_colourspace(last, &gray, VIPS_INTERPRETATION_B_W, NULL);
                last = gray;
            }
            if (stage >= 3) {
                vips_resize(last, &resized, 64.0 / last->Xsize, "vscale", 64.0 / last->Ysize,
                            "kernel", VIPS_KERNEL_LANCZOS3, NULL);
                last = resized;
            }
            size_t size;
            g_free(vips_image_write_to_memory(last, &size));
            if (header) g_object_unref(header);
            g_object_unref(loaded);
            if (gray) g_object_unref(gray);
            if (resized) g_object_unref(resized);
        }
        printf("%-55s %.3f ms/image\n", stages[stage], (cpu() - start) / COUNT * 1000);
    }
    return 0;
}
