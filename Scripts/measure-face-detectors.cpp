/* Measurement only, not part of modelc: dlib's frontal face detector against OpenCV's Haar
   cascades on folders of images, counting the images with at least one detection and the time
   per image (one thread). The numbers and the decision are in docs/images.md ("Why dlib for faces").
   The images: Scripts/measure_face_images.py writes them from scikit-image's wheel (PyPI).
     apt-get install libdlib-dev libopencv-objdetect-dev libopencv-imgcodecs-dev opencv-data
     g++ -O2 -std=c++17 Scripts/measure-face-detectors.cpp -o /tmp/measure-faces -I/usr/include/opencv4 \
         -lopencv_objdetect -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -ldlib -llapack -lblas
     /tmp/measure-faces DIR/face DIR/noface DIR/lfwface DIR/lfwnon */
#include <dlib/image_processing/frontal_face_detector.h>
#include <opencv2/objdetect.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include <dirent.h>
#include <algorithm>
int main(int argc, char **argv) {
    auto dlibdet = dlib::get_frontal_face_detector();
    cv::CascadeClassifier haar("/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml");
    cv::CascadeClassifier alt2("/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml");
    for (int d = 1; d < argc; d++) {
        std::vector<std::string> files;
        DIR *dir = opendir(argv[d]);
        while (auto *e = readdir(dir)) if (e->d_name[0] != '.') files.push_back(std::string(argv[d]) + "/" + e->d_name);
        closedir(dir);
        std::sort(files.begin(), files.end());
        int nd = 0, nh = 0, na = 0, imgs = 0; double td = 0, th = 0, ta = 0;
        for (auto &f : files) {
            cv::Mat gray = cv::imread(f, cv::IMREAD_GRAYSCALE);
            if (gray.empty()) continue;
            imgs++;
            dlib::array2d<unsigned char> img;
            img.set_size(gray.rows, gray.cols);
            for (int y = 0; y < gray.rows; y++) for (int x = 0; x < gray.cols; x++) img[y][x] = gray.at<unsigned char>(y, x);
            auto t0 = std::chrono::steady_clock::now();
            auto faces = dlibdet(img, 0);
            auto t1 = std::chrono::steady_clock::now();
            std::vector<cv::Rect> hf, af;
            cv::Mat eq; cv::equalizeHist(gray, eq);
            haar.detectMultiScale(eq, hf, 1.1, 3, 0, cv::Size(24, 24));
            auto t2 = std::chrono::steady_clock::now();
            alt2.detectMultiScale(eq, af, 1.1, 3, 0, cv::Size(24, 24));
            auto t3 = std::chrono::steady_clock::now();
            td += std::chrono::duration<double>(t1 - t0).count(); th += std::chrono::duration<double>(t2 - t1).count(); ta += std::chrono::duration<double>(t3 - t2).count();
            nd += faces.size() > 0; nh += hf.size() > 0; na += af.size() > 0;
            if (argc <= 5 || files.size() < 5) {
                printf("  %s %dx%d dlib %zu", f.c_str(), gray.cols, gray.rows, faces.size());
                for (auto &r : faces) printf(" [%ld %ld %ld %ld]", r.left(), r.top(), r.width(), r.height());
                printf(" haar %zu", hf.size()); for (auto &r : hf) printf(" [%d %d %d %d]", r.x, r.y, r.width, r.height);
                printf(" alt2 %zu\n", af.size());
            }
        }
        printf("%s: %d images; with a detection: dlib %d, haar default %d, haar alt2 %d; ms/image dlib %.1f haar %.1f alt2 %.1f\n",
               argv[d], imgs, nd, nh, na, 1000 * td / imgs, 1000 * th / imgs, 1000 * ta / imgs);
    }
}
