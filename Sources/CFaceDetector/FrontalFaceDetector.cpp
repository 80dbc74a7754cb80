#include "CFaceDetector.h"

#include <dlib/image_processing/frontal_face_detector.h>
#include <dlib/image_transforms/interpolation.h>
#include <dlib/revision.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <vector>

namespace {
/* Building the detector decodes its filters (about 20 ms); it is built once
   and copied per call, because scanning keeps state in the detector. */
const dlib::frontal_face_detector &prototype() {
    static const dlib::frontal_face_detector detector = dlib::get_frontal_face_detector();
    return detector;
}
}  // namespace

extern "C" int modelc_faces_detect(const unsigned char *pixels, long width, long height, long bytes_per_row,
                                   double min_score, int upsample, struct modelc_face **faces, char *failure,
                                   size_t failure_size) {
    *faces = nullptr;
    try {
        dlib::frontal_face_detector detector = prototype();
        dlib::array2d<unsigned char> image(height, width);
        for (long y = 0; y < height; y++) {
            const unsigned char *row = pixels + y * bytes_per_row;
            for (long x = 0; x < width; x++) image[y][x] = row[x];
        }
        double scale = 1;
        for (int i = 0; i < upsample; i++) {
            dlib::pyramid_up(image);
            scale *= 2;
        }
        std::vector<dlib::rect_detection> found;
        detector(image, found, min_score);
        if (found.empty()) return 0;
        auto *out = static_cast<struct modelc_face *>(std::malloc(found.size() * sizeof(struct modelc_face)));
        if (!out) {
            std::snprintf(failure, failure_size, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < found.size(); i++) {
            const dlib::rectangle &r = found[i].rect;
            out[i].left = r.left() / scale;
            out[i].top = r.top() / scale;
            out[i].right = (r.right() + 1) / scale;
            out[i].bottom = (r.bottom() + 1) / scale;
            out[i].score = found[i].detection_confidence;
            out[i].filter = static_cast<int>(found[i].weight_index);
        }
        *faces = out;
        return static_cast<int>(found.size());
    } catch (const std::exception &error) {
        std::snprintf(failure, failure_size, "dlib: %s", error.what());
        return -1;
    }
}

extern "C" void modelc_faces_free(struct modelc_face *faces) { std::free(faces); }

extern "C" const char *modelc_faces_version(void) {
    static char version[32];
    static std::once_flag once;
    std::call_once(once, [] {
        std::snprintf(version, sizeof version, "%d.%d.%d", DLIB_MAJOR_VERSION, DLIB_MINOR_VERSION, DLIB_PATCH_VERSION);
    });
    return version;
}
