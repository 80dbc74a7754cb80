#ifndef MODELC_CFACES_H
#define MODELC_CFACES_H
/* The face detector library (libModelcFaces.so: dlib's frontal face
   detector, see CFaceDetector.h), opened with dlopen at the first face
   request so that no other command loads it or dlib.

   The library is looked for at $MODELC_FACES_LIBRARY when set, else next to
   the running executable, else on the loader's path. */
#include <stddef.h>

struct modelc_face {
    double left, top, right, bottom;
    double score;
    int filter;
};

/* Opens the library once per process (thread-safe). NULL on success,
   otherwise the loader's one-line reason. */
const char *modelc_faces_load(void);

/* As modelc_faces_detect of CFaceDetector.h; -1 with a reason when the
   library could not be opened. */
int modelc_faces_run(const unsigned char *pixels, long width, long height, long bytes_per_row, double min_score,
                     int upsample, struct modelc_face **faces, char *failure, size_t failure_size);
void modelc_faces_release(struct modelc_face *faces);
const char *modelc_faces_library_version(void);

#endif
