#!/usr/bin/env python3
"""The object-detection benchmark of make bench: the Python pipeline `modelc detect` is measured against.

Usage:
    bench_detect.py generate DIR COUNT        write COUNT 640x480 gray JPEGs with one Gaussian blob each, and
                                              DIR/../detector.onnx (the detector fixture's network), once
    bench_detect.py run DIR MODEL.onnx THREADS
                                              detect in every JPEG of DIR with Pillow, onnxruntime and NumPy NMS
                                              on THREADS threads; prints `key value` lines (images, total_s)
                                              and writes DIR/../python.jsonl (boxes, for the comparison)
    bench_detect.py report MODELC_SECONDS INPROCESS_FILE PYTHON_FILE MODELC_JSONL PYTHON_JSONL
                                              the table of make bench (the CLI end to end, modelc's
                                              requests in process from `ModelcBenchmarks detect`, Python in
                                              process), and the largest difference between the two programs' boxes

The model is Fixtures/Models/Detector.mlmodel: a network measuring the blob (one matrix product
over the 64x64 gray input and a few element-wise operations) and a NonMaximumSuppression stage.
The Python program does for each photo what a Python service does: Pillow decodes it (JPEG draft
mode: shrink-on-load, as modelc), turns it upright by its EXIF orientation (ImageOps.exif_transpose,
as modelc), converts it to gray, resizes it to 64x64 with Lanczos (scale to
fill, as `--crop-and-scale scale-fill`), onnxruntime runs the same network (exported here with the
onnx helper, the same weights), NumPy suppresses overlapping boxes (detection.nms_numpy of the
fixture script), and the kept boxes are mapped to the image's pixels. Photos are worked on by a
pool of THREADS threads (Pillow and onnxruntime release the GIL); onnxruntime uses one thread per run.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Fixtures"))
SIZE = 64
WIDTH, HEIGHT = 640, 480


def onnx_detector(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    centres = (np.arange(SIZE, dtype=np.float64) + 0.5) / SIZE
    xs, ys = np.tile(centres, SIZE), np.repeat(centres, SIZE)
    weights = np.stack([np.ones(SIZE * SIZE), xs, ys, xs * xs, ys * ys], axis=1).astype(np.float32)
    constants = {
        "weights": weights, "shape": np.array([1, SIZE * SIZE], dtype=np.int64),
        "four": np.array([[4.0]], dtype=np.float32), "wider": np.array([[4.4]], dtype=np.float32),
        "scores": np.array([[0.9, 0.1], [0.6, 0.4]], dtype=np.float32),
        "s0": np.array([0], dtype=np.int64), "s1": np.array([1], dtype=np.int64), "s3": np.array([3], dtype=np.int64),
        "s5": np.array([5], dtype=np.int64), "axis1": np.array([1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Reshape", ["image", "shape"], ["pixels"]),
        helper.make_node("MatMul", ["pixels", "weights"], ["sums"]),
        helper.make_node("Slice", ["sums", "s0", "s1", "axis1"], ["mass"]),
        helper.make_node("Slice", ["sums", "s1", "s3", "axis1"], ["first"]),
        helper.make_node("Slice", ["sums", "s3", "s5", "axis1"], ["second"]),
        helper.make_node("Div", ["first", "mass"], ["centre"]),
        helper.make_node("Div", ["second", "mass"], ["square_mean"]),
        helper.make_node("Mul", ["centre", "centre"], ["centre_squared"]),
        helper.make_node("Sub", ["square_mean", "centre_squared"], ["variance"]),
        helper.make_node("Sqrt", ["variance"], ["sd"]),
        helper.make_node("Mul", ["sd", "four"], ["size0"]),
        helper.make_node("Mul", ["sd", "wider"], ["size1"]),
        helper.make_node("Concat", ["centre", "size0"], ["box0"], axis=1),
        helper.make_node("Concat", ["centre", "size1"], ["box1"], axis=1),
        helper.make_node("Concat", ["box0", "box1"], ["coordinates"], axis=0),
        helper.make_node("Identity", ["scores"], ["confidence"]),
    ]
    graph = helper.make_graph(
        nodes, "detector",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, SIZE, SIZE])],
        [helper.make_tensor_value_info("confidence", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("coordinates", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(value, name) for name, value in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def generate(out, count):
    import numpy as np
    from PIL import Image
    import detection

    os.makedirs(out, exist_ok=True)
    onnx_detector(os.path.join(out, "..", "detector.onnx"))
    if len([f for f in os.listdir(out) if f.endswith(".jpg")]) == count:
        return
    rng = np.random.default_rng(22)
    for index in range(count):
        cx, cy = rng.uniform(200, 440), rng.uniform(150, 330)
        sx, sy = rng.uniform(20, 60), rng.uniform(20, 50)
        pixels = detection.gaussian_blob(WIDTH, HEIGHT, cx, cy, sx, sy).astype(np.float64)
        pixels = np.clip(pixels + rng.normal(0, 3, pixels.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels, "L").save(os.path.join(out, "scene-%03d.jpg" % index), quality=90)


def run(directory, model, threads):
    from concurrent.futures import ThreadPoolExecutor
    import numpy as np
    import onnxruntime as ort
    from PIL import ExifTags, Image, ImageOps
    import detection

    files = sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".jpg"))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    start = time.perf_counter()
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def detect(path):
        with Image.open(path) as image:
            # Upright first, as modelc (and Vision) turn images by their EXIF orientation.
            width, height = image.size
            if image.getexif().get(ExifTags.Base.Orientation, 1) > 4:
                width, height = height, width
            image.draft("L", (SIZE, SIZE))
            upright = ImageOps.exif_transpose(image)
            gray = upright.convert("L").resize((SIZE, SIZE), Image.LANCZOS)
        tensor = (np.asarray(gray, dtype=np.float32) * np.float32(1 / 255))[None, None]
        confidence, coordinates = session.run(None, {"image": tensor})
        kept = detection.nms_numpy(confidence.astype(np.float64), coordinates.astype(np.float64), 0.5, 0.2)
        boxes = []
        for index in kept:
            x, y, w, h = coordinates[index].astype(np.float64)
            boxes.append({"confidence": float(confidence[index].max()),
                          "pixels": [(x - w / 2) * width, (y - h / 2) * height, w * width, h * height]})
        return {"image": path, "boxes": boxes}

    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(detect, files))
    total_s = time.perf_counter() - start
    with open(os.path.join(directory, "..", "python.jsonl"), "w") as f:
        for result in results:
            f.write(json.dumps(result) + "\n")
    print("images %d" % len(files))
    print("total_s %f" % total_s)


def report(modelc_seconds, inprocess_file, python_file, modelc_jsonl, python_jsonl):
    values = dict(line.split() for line in open(python_file))
    inprocess = dict(line.split() for line in open(inprocess_file))
    images, python_s, modelc_s = float(values["images"]), float(values["total_s"]), float(modelc_seconds)
    inprocess_s, decode_s = float(inprocess["total_s"]), float(inprocess["decode_s"])
    ours = {}
    for line in open(modelc_jsonl):
        record = json.loads(line)
        ours[record["image"]] = [[o["pixels"][k] for k in ("x", "y", "width", "height")] for o in record["objects"]]
    largest, compared = 0.0, 0
    for line in open(python_jsonl):
        record = json.loads(line)
        name = os.path.join(os.path.basename(os.path.dirname(record["image"])), os.path.basename(record["image"]))
        mine = next((boxes for key, boxes in ours.items() if key.endswith(name)), None)
        theirs = [box["pixels"] for box in record["boxes"]]
        if mine is None or len(mine) != len(theirs):
            largest = float("inf")
            continue
        for a, b in zip(mine, theirs):
            largest = max(largest, max(abs(p - q) for p, q in zip(a, b)))
            compared += 1
    print("  %-52s %10s %12s" % ("", "images/s", "vs Python"))
    print("  %-52s %10.1f %11.2fx" % ("modelc detect (process, end to end)", images / modelc_s, python_s / modelc_s))
    print("  %-52s %10.1f %11.2fx   (decoding and scaling alone: %.0f%%)" % (
        "modelc requests (in process)", images / inprocess_s, python_s / inprocess_s, 100 * decode_s / inprocess_s))
    print("  %-52s %10.1f %11.2fx" % ("Pillow + onnxruntime + NumPy NMS (in process)", images / python_s, 1.0))
    print("  (target ≥ 1.0×; %d boxes compared, largest difference %.2f px: different resamplers)" % (compared, largest))


def main(argv):
    if len(argv) == 3 and argv[0] == "generate":
        generate(argv[1], int(argv[2]))
    elif len(argv) == 4 and argv[0] == "run":
        run(argv[1], argv[2], int(argv[3]))
    elif len(argv) == 6 and argv[0] == "report":
        report(*argv[1:])
    else:
        sys.stderr.write(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
