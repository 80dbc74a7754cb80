/* Measurement only, not part of modelc: libvips alone, decoding and shrinking
   JPEGs on several threads at once the way ImageDecoder does (shrink-on-load,
   sRGB, Lanczos 3 resize, centre crop, pixels to memory). With libvips 8.14
   and liborc 0.4.33 (Debian 12), two threads of 200 decodes each aborted
   with a corrupted heap in 8 of 100 runs over the classify bench's photos;
   with vectors off, in none of 100, nor with one thread. That is why modelc
   turns libvips' vector code off (Sources/ImageDecoding/Vips.swift).
     gcc -O2 -o /tmp/stress-vips Scripts/stress-vips.c $(pkg-config --cflags --libs vips) -lpthread
     /tmp/stress-vips [--vectors-off] 2 200 JPEG...    (run it 100 times, count the failures) */
#include <vips/vips.h>
#include <vips/vector.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char **paths;
static int path_count, rounds;

static void fail(const char *what, const char *path) {
    fprintf(stderr, "%s: %s: %s", path, what, vips_error_buffer());
    exit(2);
}

/* One decode as modelc does it, from a mapped file, down to 224x224. */
static void decode(const char *path) {
    int fd = open(path, O_RDONLY);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0) fail("cannot open", path);
    size_t size = (size_t)info.st_size;
    void *bytes = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (bytes == MAP_FAILED) fail("cannot map", path);

    VipsImage *header, *loaded, *srgb, *shrunk, *cropped;
    if (vips_jpegload_buffer(bytes, size, &header, "shrink", 1, NULL)) fail("header", path);
    int side = VIPS_MIN(header->Xsize, header->Ysize), shrink = 1;
    while (shrink < 8 && side / (shrink * 2) >= 224) shrink *= 2;
    if (vips_jpegload_buffer(bytes, size, &loaded, "shrink", shrink, NULL)) fail("load", path);
    g_object_unref(header);
    double scale = 224.0 / VIPS_MIN(loaded->Xsize, loaded->Ysize);
    if (vips_colourspace(loaded, &srgb, VIPS_INTERPRETATION_sRGB, NULL)) fail("colourspace", path);
    if (vips_resize(srgb, &shrunk, scale, "kernel", VIPS_KERNEL_LANCZOS3, NULL)) fail("resize", path);
    if (vips_extract_area(shrunk, &cropped, (shrunk->Xsize - 224) / 2, (shrunk->Ysize - 224) / 2, 224, 224, NULL))
        fail("crop", path);
    size_t length;
    void *pixels = vips_image_write_to_memory(cropped, &length);
    if (!pixels) fail("pixels", path);
    g_free(pixels);
    g_object_unref(cropped);
    g_object_unref(shrunk);
    g_object_unref(srgb);
    g_object_unref(loaded);
    munmap(bytes, size);
}

static void *worker(void *start) {
    for (int i = 0; i < rounds; i++) decode(paths[((long)start * 7 + i) % path_count]);
    return NULL;
}

int main(int argc, char **argv) {
    if (VIPS_INIT(argv[0])) return 1;
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--vectors-off") == 0) {
        vips_vector_set_enabled(FALSE);
        first = 2;
    }
    if (argc - first < 3) {
        fprintf(stderr, "usage: %s [--vectors-off] THREADS ROUNDS JPEG...\n", argv[0]);
        return 64;
    }
    /* As modelc starts libvips: no operation cache, one worker per pipeline. */
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    int threads = atoi(argv[first]);
    rounds = atoi(argv[first + 1]);
    paths = argv + first + 2;
    path_count = argc - first - 2;
    if (threads < 1 || threads > 64 || rounds < 1) return 64;
    pthread_t running[64];
    for (long i = 0; i < threads; i++) pthread_create(&running[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(running[i], NULL);
    return 0;
}
