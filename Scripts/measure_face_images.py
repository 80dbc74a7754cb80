#!/usr/bin/env python3
"""Measurement only: the images Scripts/measure-face-detectors.cpp runs the face detectors on.

Usage: measure_face_images.py SKIMAGE_DATA_DIR OUT_DIR
  SKIMAGE_DATA_DIR: skimage/data/ of scikit-image's wheel (`pip download scikit-image --no-deps`,
  then unzip it). Writes OUT_DIR/face (the astronaut and the cameraman), OUT_DIR/noface (19
  sample photos without faces and 20 generated noise and gradient scenes), OUT_DIR/lfwface and
  OUT_DIR/lfwnon (lfw_subset.npy: 100 faces and 100 non-faces, 25x25, shown at 100x100 on a
  160x160 gray canvas).
"""
import os
import shutil
import sys

import numpy as np
from PIL import Image

PHOTOS = ["coffee.png", "chelsea.png", "rocket.jpg", "coins.png", "horse.png", "page.png", "hubble_deep_field.jpg",
          "brick.png", "grass.png", "gravel.png", "logo.png", "motorcycle_left.png", "retina.jpg", "ihc.png",
          "moon.png", "text.png", "color.png", "clock_motion.png", "cell.png"]


def main(data, out):
    for folder in ("face", "noface", "lfwface", "lfwnon"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
    for name in ("astronaut.png", "camera.png"):
        shutil.copy(os.path.join(data, name), os.path.join(out, "face", name))
    for name in PHOTOS:
        Image.open(os.path.join(data, name)).convert("RGB").save(
            os.path.join(out, "noface", name.rsplit(".", 1)[0] + ".png"))
    faces = np.load(os.path.join(data, "lfw_subset.npy"))
    for index, face in enumerate(faces):
        shown = Image.fromarray(np.uint8(np.clip(face * 255, 0, 255))).resize((100, 100), Image.BICUBIC)
        canvas = Image.new("L", (160, 160), 128)
        canvas.paste(shown, (30, 30))
        canvas.save(os.path.join(out, "lfwface" if index < 100 else "lfwnon", "%03d.png" % index))
    rng = np.random.default_rng(5)
    for index in range(20):
        if index % 2:
            pixels = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)
        else:
            pixels = np.uint8(np.clip(rng.normal(128, 40, (240, 320, 3)).cumsum(axis=1) / 50 % 255, 0, 255))
        Image.fromarray(pixels).save(os.path.join(out, "noface", "gen%02d.png" % index))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(64)
    main(sys.argv[1], sys.argv[2])
