#ifndef MODELC_CFACEDETECTOR_H
#define MODELC_CFACEDETECTOR_H
/* dlib's frontal face detector (HOG features + linear SVMs, its model built
   into the library) behind a plain C interface. Built as its own shared
   library (libModelcFaces.so, linked with Debian's libdlib), which modelc
   opens with dlopen at the first face request: nothing else loads dlib. */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One face: its box in pixels (origin at the top left, right and bottom
   exclusive), dlib's detection score (the SVM's margin, > 0 when found at the
   default threshold), and which of dlib's five filters found it: 0 looking
   ahead, 1 turned to the image's left, 2 turned to the image's right, 3 ahead
   and tilted counterclockwise, 4 ahead and tilted clockwise. */
struct modelc_face {
    double left, top, right, bottom;
    double score;
    int filter;
};

/* Detects faces in 8-bit gray pixels (`height` rows of `bytes_per_row`
   bytes), keeping those scoring at least `min_score`; `upsample` doubles the
   image that many times first (finds faces down to 40×40 at 1, 20×20 at 2).
   Returns the number of faces and a malloc'd array in *faces (free with
   modelc_faces_free), or -1 with a one-line reason in `failure`.
   Thread-safe: each call uses its own copy of the detector. */
int modelc_faces_detect(const unsigned char *pixels, long width, long height, long bytes_per_row, double min_score,
                        int upsample, struct modelc_face **faces, char *failure, size_t failure_size);
void modelc_faces_free(struct modelc_face *faces);
/* The dlib version the library was built against ("19.24.0"). */
const char *modelc_faces_version(void);

#ifdef __cplusplus
}
#endif
#endif
