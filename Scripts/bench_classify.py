#!/usr/bin/env python3
"""The image-classification benchmark of make bench: the Python pipeline modelc is measured against.

Usage:
    bench_classify.py generate DIR COUNT      write COUNT 640x480 JPEGs (quality 90) into DIR, once
    bench_classify.py run DIR MODEL.onnx THREADS
                                              classify every JPEG in DIR with Pillow and onnxruntime;
                                              prints `key value` lines (images, open_s, decode_s, total_s)
    bench_classify.py report MODELC PYTHON CLI_SECONDS
                                              the table of make bench from both measurement files

The pipeline is what a Python service does for each photo: Pillow decodes it (with JPEG draft
mode, Pillow's shrink-on-load, as modelc shrinks on load), converts it to RGB, resizes it so the
shorter side is 224 with Lanczos (antialiased, as modelc) and crops the centre 224x224, then
onnxruntime runs the MobileNetV2-shaped network of bench_network.py on it (bytes * 1/127.5 - 1,
NCHW) and the five best labels are taken. Images go one after another; onnxruntime uses THREADS
threads inside each run. `decode_s` is the decoding and resizing alone, over every image.
"""

import os
import sys
import time

SIZE = 224


def generate(out, count):
    import numpy as np
    from PIL import Image

    os.makedirs(out, exist_ok=True)
    if len([f for f in os.listdir(out) if f.endswith(".jpg")]) == count:
        return
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:480, 0:640].astype(np.float32)
    for index in range(count):
        # Smooth colour fields with some texture: photo-like JPEG sizes (~60-100 KB).
        phase = rng.uniform(0, 6.3, 3)
        freq = rng.uniform(0.005, 0.03, 3)
        channels = [127 + 100 * np.sin(freq[c] * (x + 1.3 * y) + phase[c]) for c in range(3)]
        image = np.stack(channels, axis=-1) + rng.normal(0, 12, (480, 640, 3))
        pixels = np.clip(image, 0, 255).astype(np.uint8)
        Image.fromarray(pixels, "RGB").save(os.path.join(out, "photo-%03d.jpg" % index), quality=90)


def run(directory, model, threads):
    import numpy as np
    import onnxruntime as ort
    from PIL import Image

    files = sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".jpg"))

    def prepared(path):
        with Image.open(path) as image:
            image.draft("RGB", (SIZE, SIZE))
            image = image.convert("RGB")
            width, height = image.size
            scale = SIZE / min(width, height)
            resized = image.resize((max(SIZE, round(width * scale)), max(SIZE, round(height * scale))),
                                   Image.LANCZOS)
            left = (resized.width - SIZE) // 2
            top = (resized.height - SIZE) // 2
            return np.asarray(resized.crop((left, top, left + SIZE, top + SIZE)))

    start = time.perf_counter()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    open_s = time.perf_counter() - start

    start = time.perf_counter()
    for path in files:
        prepared(path)
    decode_s = time.perf_counter() - start

    start = time.perf_counter()
    for path in files:
        pixels = prepared(path)
        tensor = (pixels.astype(np.float32) * np.float32(1 / 127.5) - 1).transpose(2, 0, 1)[None]
        probabilities = session.run(None, {name: np.ascontiguousarray(tensor)})[0].reshape(-1)
        np.argsort(-probabilities)[:5]
    total_s = time.perf_counter() - start
    print("images %d" % len(files))
    print("open_s %f" % open_s)
    print("decode_s %f" % decode_s)
    print("total_s %f" % total_s)


def read(path):
    values = {}
    with open(path) as f:
        for line in f:
            key, value = line.split()
            values[key] = float(value)
    return values


def report(modelc_file, python_file, cli_seconds):
    modelc, python = read(modelc_file), read(python_file)
    images = modelc["images"]
    cli = float(cli_seconds)
    rows = [
        ("modelc classify (process, end to end)", cli, None),
        ("modelc requests (in process)", modelc["total_s"], modelc["decode_s"]),
        ("Pillow + onnxruntime (in process)", python["total_s"], python["decode_s"]),
    ]
    print("  %-40s %10s %12s %14s" % ("", "images/s", "vs Python", "decode+resize"))
    for label, seconds, decode in rows:
        share = "%13.0f%%" % (100 * decode / seconds) if decode is not None else "%14s" % "-"
        print("  %-40s %10.1f %11.2fx %s" % (label, images / seconds, python["total_s"] / seconds, share))
    print("  (decode+resize: that work alone over every image, as a share of the whole; target ≥ 1.0×)")


def main(argv):
    if len(argv) == 3 and argv[0] == "generate":
        generate(argv[1], int(argv[2]))
    elif len(argv) == 4 and argv[0] == "run":
        run(argv[1], argv[2], int(argv[3]))
    elif len(argv) == 4 and argv[0] == "report":
        report(argv[1], argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
