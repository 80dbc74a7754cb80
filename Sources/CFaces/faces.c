#include "CFaces.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>

static struct {
    int (*detect)(const unsigned char *, long, long, long, double, int, struct modelc_face **, char *, size_t);
    void (*free)(struct modelc_face *);
    const char *(*version)(void);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[768];
static int loaded;

static const char library_name[] = "libModelcFaces.so";

static void load(void) {
    static const struct modelc_library_symbol symbols[] = {
        {"modelc_faces_detect", (void **)&api.detect},
        {"modelc_faces_free", (void **)&api.free},
        {"modelc_faces_version", (void **)&api.version},
    };
    loaded = modelc_own_library_open(library_name, "MODELC_FACES_LIBRARY", symbols, sizeof symbols / sizeof symbols[0],
                                     failure, sizeof failure);
}

const char *modelc_faces_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

int modelc_faces_run(const unsigned char *pixels, long width, long height, long bytes_per_row, double min_score,
                     int upsample, struct modelc_face **faces, char *reason, size_t reason_size) {
    const char *problem = modelc_faces_load();
    if (problem) {
        snprintf(reason, reason_size, "%s", problem);
        return -1;
    }
    return api.detect(pixels, width, height, bytes_per_row, min_score, upsample, faces, reason, reason_size);
}

void modelc_faces_release(struct modelc_face *faces) {
    if (!modelc_faces_load() && faces) api.free(faces);
}

const char *modelc_faces_library_version(void) {
    return modelc_faces_load() ? NULL : api.version();
}
