#!/usr/bin/env python3
"""The training benchmark of make bench: generated labelled images, and scikit-learn's fit.

Usage:
    bench_training.py generate DIR COUNT [SIZE]
        write COUNT images (PNG, SIZE x SIZE, default 128) into DIR/LABEL/, four labels of
        equal size: each label a colour (moved per image by up to JITTER per channel) with a
        brighter square in a random place, and per-pixel noise (seeded: the same files on every
        run; skipped when DIR already holds them)
    bench_training.py sklearn DIR L2 MAX_ITER
        fit scikit-learn's LogisticRegression (lbfgs, multinomial) on the features modelc
        extracted (DIR/train.npy, DIR/train-labels.npy, DIR/validation.npy,
        DIR/validation-labels.npy) with the same objective as modelc: standardized features,
        mean cross-entropy + L2/2 * |W|^2, i.e. C = 1 / (L2 * rows); prints `key value` lines:
        fit_seconds (StandardScaler and fit, best of 3), iterations, loss (the objective at the
        solution), training_accuracy, validation_accuracy
"""

import os
import struct
import sys
import time
import zlib

import numpy as np

# Near colours, and each image's colour moved by up to JITTER per channel: the labels overlap a
# little, so that neither fit reaches 100 % and their validation accuracies can be compared.
LABELS = {"blue": (70, 90, 170), "green": (70, 150, 90), "grey": (120, 120, 120), "purple": (130, 80, 150)}
JITTER = 20
SEED = 20261130


def png(pixels):
    """An 8-bit RGB PNG of an (height, width, 3) uint8 array."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def generate(directory, count, size):
    marker = os.path.join(directory, ".complete-%d-%d-jitter%d" % (count, size, JITTER))
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(SEED)
    per_label = count // len(LABELS)
    for label, color in LABELS.items():
        folder = os.path.join(directory, label)
        os.makedirs(folder, exist_ok=True)
        for index in range(per_label):
            image = np.empty((size, size, 3), dtype=np.int32)
            image[:, :] = np.array(color) + rng.integers(-JITTER, JITTER + 1, 3)
            side = size // 3
            left, top = rng.integers(0, size - side, 2)
            image[top:top + side, left:left + side] += 50
            image += rng.integers(-30, 31, image.shape)
            with open(os.path.join(folder, "%s-%04d.png" % (label, index)), "wb") as f:
                f.write(png(np.clip(image, 0, 255).astype(np.uint8)))
    open(marker, "w").close()


def fit(directory, l2, max_iter):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x = np.load(os.path.join(directory, "train.npy")).astype(np.float64)
    y = np.load(os.path.join(directory, "train-labels.npy"))
    vx = np.load(os.path.join(directory, "validation.npy")).astype(np.float64)
    vy = np.load(os.path.join(directory, "validation-labels.npy"))
    best = None
    for _ in range(3):
        start = time.perf_counter()
        scaler = StandardScaler().fit(x)
        model = LogisticRegression(C=1.0 / (l2 * len(x)), solver="lbfgs", max_iter=max_iter, tol=1e-5)
        model.fit(scaler.transform(x), y)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    print("fit_seconds %.6f" % best)
    print("iterations %d" % int(np.max(model.n_iter_)))
    from sklearn.metrics import log_loss
    z = scaler.transform(x)
    objective = log_loss(y, model.predict_proba(z)) + 0.5 * l2 * float(np.sum(model.coef_ ** 2))
    print("loss %.8f" % objective)
    print("training_accuracy %.6f" % model.score(scaler.transform(x), y))
    print("validation_accuracy %.6f" % model.score(scaler.transform(vx), vy))


def main(argv):
    if len(argv) >= 3 and argv[0] == "generate":
        generate(argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 128)
    elif len(argv) == 4 and argv[0] == "sklearn":
        fit(argv[1], float(argv[2]), int(argv[3]))
    else:
        sys.stderr.write(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
