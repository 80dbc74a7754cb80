#!/usr/bin/env python3
"""The network benchmark of make bench: a MobileNetV2-shaped classifier run by onnxruntime.

Usage:
    bench_network.py generate DIR            write DIR/mobilenetv2.mlmodel, DIR/mobilenetv2.onnx
                                             and DIR/image.rgb (once; skipped when present)
    bench_network.py onnxruntime DIR THREADS RUNS [--probabilities FILE]
                                             time onnxruntime on the image; prints `key value` lines
    bench_network.py compare WANT GOT        top-1 and largest probability difference of two
                                             probability files (1000 float32 values, class order)
    bench_network.py report FILE...          the table of make bench from measurement files (the
                                             `key value` lines of either engine plus peak_rss_kb),
                                             the best of the rounds of each engine and thread count

The model has the real MobileNetV2 (width 1.0) layer structure on a 224x224 RGB image input
(scale 1/127.5, bias -1): a 3x3 stride-2 stem convolution to 32 channels, 17 inverted-residual
blocks (1x1 expansion except in the first, 3x3 depthwise, 1x1 projection, a residual add where
input and output shapes match), a 1x1 convolution to 1280 channels, global average pooling,
flatten, an inner product to 1000 classes and softmax. ReLU6 is the spec's clip layer (0, 6).
Batch normalization is folded into the convolution weights and biases, in both models: that is
what onnxruntime does with a separate BatchNormalization at load, and what converters emit.

Weights are random (fixed seed, He-scaled so activations stay in range) and identical, float32,
in the Core ML model (NeuralNetworkBuilder) and the ONNX graph (NCHW, opset 17). The image is
224 x 224 x 3 random bytes, RGB, row by row: the exact bytes modelc gets as a pixel buffer;
onnxruntime gets byte * float32(1/127.5) - 1 as a [1, 3, 224, 224] tensor.

Timings are in-process: the `onnxruntime` mode imports everything first, then measures session
creation plus the first run (`first_ms`), then the median of RUNS runs after 5 warm-up runs
(`latency_ms`). It prints its resident memory after the imports (`baseline_rss_kb`, the
interpreter's and libraries' share) so the caller can report onnxruntime's own increment; the
peak comes from running the whole process under /usr/bin/time.
"""

import os
import sys

SIZE = 224
CLASSES = 1000
SEED = 20240611
# (expansion, output channels, repeats, first stride): MobileNetV2, width 1.0.
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def same_pads(size, kernel, stride):
    """Core ML's same padding (BOTTOM_RIGHT_HEAVY): the extra row or column at the end."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + kernel - size)
    return total // 2, total - total // 2


def generate(out):
    import contextlib
    import io
    import warnings
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    # coremltools complains on import about what Linux lacks (its macOS-only predictor) and the
    # untested XGBoost next to it; none of it is used here.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        from coremltools.models import datatypes
        from coremltools.models.neural_network import NeuralNetworkBuilder

    rng = np.random.default_rng(SEED)
    builder = NeuralNetworkBuilder([("image", datatypes.Array(3, SIZE, SIZE))],
                                   [("classLabelProbs", datatypes.Array(CLASSES))], mode="classifier")
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def conv(name, x, size, cin, cout, kernel, stride, groups, relu6):
        """A convolution with batch normalization folded in, optionally followed by ReLU6."""
        fan_in = cin // groups * kernel * kernel
        w = (rng.standard_normal((cout, cin // groups, kernel, kernel)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        top, bottom = same_pads(size, kernel, stride)
        out_size = -(-size // stride)
        y = name + "_out"
        builder.add_convolution(name, cin // groups, cout, kernel, kernel, stride, stride, "same", groups,
                                np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0))), b, True,
                                input_name=x, output_name=y)
        nodes.append(helper.make_node("Conv", [x, const(name + "_w", w), const(name + "_b", b)], [y], name=name,
                                      group=groups, kernel_shape=[kernel, kernel], strides=[stride, stride],
                                      pads=[top, top, bottom, bottom]))
        if relu6:
            builder.add_clip(name + "_relu6", y, name + "_relu6_out", 0.0, 6.0)
            nodes.append(helper.make_node("Clip", [y, const(name + "_lo", 0.0), const(name + "_hi", 6.0)],
                                          [name + "_relu6_out"], name=name + "_relu6"))
            y = name + "_relu6_out"
        return y, out_size

    x, size = conv("stem", "image", SIZE, 3, 32, 3, 2, 1, True)
    channels, index = 32, 0
    for expansion, cout, repeats, first_stride in BLOCKS:
        for repeat in range(repeats):
            stride = first_stride if repeat == 0 else 1
            name = "block%d" % index
            hidden = channels * expansion
            y = x
            if expansion != 1:
                y, _ = conv(name + "_expand", y, size, channels, hidden, 1, 1, 1, True)
            y, out_size = conv(name + "_depthwise", y, size, hidden, hidden, 3, stride, hidden, True)
            y, _ = conv(name + "_project", y, out_size, hidden, cout, 1, 1, 1, False)
            if stride == 1 and channels == cout:
                builder.add_elementwise(name + "_add", [x, y], name + "_add_out", "ADD")
                nodes.append(helper.make_node("Add", [x, y], [name + "_add_out"], name=name + "_add"))
                y = name + "_add_out"
            x, size, channels, index = y, out_size, cout, index + 1
    assert index == 17, index
    x, _ = conv("last", x, size, channels, 1280, 1, 1, 1, True)
    builder.add_pooling("pool", 1, 1, 1, 1, "AVERAGE", "VALID", x, "pool_out", is_global=True)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool_out"], name="pool"))
    builder.add_flatten("flatten", 0, "pool_out", "flatten_out")
    nodes.append(helper.make_node("Flatten", ["pool_out"], ["flatten_out"], name="flatten", axis=1))
    w = (rng.standard_normal((CLASSES, 1280)) * 0.03).astype(np.float32)
    b = (rng.standard_normal(CLASSES) * 0.1).astype(np.float32)
    builder.add_inner_product("fc", w, b, 1280, CLASSES, True, "flatten_out", "fc_out")
    nodes.append(helper.make_node("Gemm", ["flatten_out", const("fc_w", w), const("fc_b", b)], ["fc_out"],
                                  name="fc", transB=1))
    builder.add_softmax("softmax", "fc_out", "classLabelProbs")
    nodes.append(helper.make_node("Softmax", ["fc_out"], ["classLabelProbs"], name="softmax", axis=1))
    builder.set_class_labels(list(range(CLASSES)), predicted_feature_name="classLabel",
                             prediction_blob="classLabelProbs")
    builder.set_pre_processing_parameters(image_input_names=["image"], is_bgr=False, image_scale=1 / 127.5,
                                          red_bias=-1.0, green_bias=-1.0, blue_bias=-1.0)
    spec = builder.spec
    spec.description.metadata.shortDescription = "MobileNetV2-shaped benchmark classifier (random weights)"

    graph = helper.make_graph(
        nodes, "mobilenetv2",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("classLabelProbs", TensorProto.FLOAT, [1, CLASSES])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)

    image = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
    os.makedirs(out, exist_ok=True)
    # Each file written under a temporary name and renamed: a run cut short leaves no half model.
    for name, data in (("mobilenetv2.onnx", model.SerializeToString()),
                       ("image.rgb", image.tobytes()),
                       ("mobilenetv2.mlmodel", spec.SerializeToString(deterministic=True))):
        with open(os.path.join(out, name + ".tmp"), "wb") as f:
            f.write(data)
        os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))


def image_tensor(out):
    import numpy as np
    pixels = np.fromfile(os.path.join(out, "image.rgb"), dtype=np.uint8).reshape(SIZE, SIZE, 3)
    # As modelc computes it: byte * float32(1/127.5) + float32(-1), in float32.
    x = pixels.astype(np.float32).transpose(2, 0, 1) * np.float32(1 / 127.5) + np.float32(-1.0)
    return np.ascontiguousarray(x[None], dtype=np.float32)


def measure(out, threads, runs, probabilities):
    import time
    import numpy as np
    import onnxruntime

    x = image_tensor(out)
    path = os.path.join(out, "mobilenetv2.onnx")
    baseline = rss_kb()
    start = time.perf_counter()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    result = session.run(None, {"image": x})[0]
    first = time.perf_counter() - start
    for _ in range(5):
        session.run(None, {"image": x})
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, {"image": x})
        times.append(time.perf_counter() - start)
    times.sort()
    if probabilities:
        result.reshape(-1).astype(np.float32).tofile(probabilities)
    print("engine onnxruntime %s" % onnxruntime.__version__)
    print("threads %d" % threads)
    print("latency_ms %.3f" % (times[len(times) // 2] * 1000))
    print("first_ms %.3f" % (first * 1000))
    print("baseline_rss_kb %d" % baseline)


def compare(want_path, got_path):
    import numpy as np
    want = np.fromfile(want_path, dtype=np.float32)
    got = np.fromfile(got_path, dtype=np.float32)
    assert want.shape == got.shape == (CLASSES,), (want.shape, got.shape)
    difference = float(np.max(np.abs(want.astype(np.float64) - got)))
    same = int(np.argmax(want)) == int(np.argmax(got))
    top = np.sort(want)[-2:]
    print("  top-1: onnxruntime class %d (p %.4f, runner-up %.4f), modelc class %d: %s"
          % (np.argmax(want), top[1], top[0], np.argmax(got), "agree" if same else "DIFFER"))
    print("  largest probability difference %.2e: %s"
          % (difference, "within 1e-4" if difference <= 1e-4 else "ABOVE 1e-4"))
    return 0 if same and difference <= 1e-4 else 1


def report(paths):
    best = {}
    for path in paths:
        with open(path) as f:
            values = dict(line.split(None, 1) for line in f if line.strip())
        key = (values["engine"].split()[0], int(values["threads"]))
        numbers = {k: float(values[k]) for k in ("latency_ms", "first_ms", "baseline_rss_kb", "peak_rss_kb")}
        if key in best:
            numbers = {k: min(v, best[key][k]) for k, v in numbers.items()}
        best[key] = numbers
    counts = sorted({threads for _, threads in best})
    one, many = counts[0], counts[-1]

    def line(label, field, threads, unit, scale=1.0, minus=None):
        m, o = best[("modelc", threads)], best[("onnxruntime", threads)]
        mv, ov = m[field] - (m[minus] if minus else 0), o[field] - (o[minus] if minus else 0)
        print("  %-34s %9.1f %s %9.1f %s   %5.2f×" % (label, mv * scale, unit, ov * scale, unit, mv / ov))

    print("  %-34s %12s %12s   %s" % ("", "modelc", "onnxruntime", "ratio"))
    line("latency, 1 thread", "latency_ms", one, "ms")
    line("latency, %d threads (all cores)" % many, "latency_ms", many, "ms")
    line("open → first prediction, 1 thread", "first_ms", one, "ms")
    line("peak RSS, 1 thread", "peak_rss_kb", one, "MB", 1 / 1024)
    line("  less the process before loading", "peak_rss_kb", one, "MB", 1 / 1024, minus="baseline_rss_kb")
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == "generate":
        if not all(os.path.exists(os.path.join(argv[1], f)) for f in ("mobilenetv2.mlmodel", "mobilenetv2.onnx", "image.rgb")):
            generate(argv[1])
        return 0
    if len(argv) in (4, 6) and argv[0] == "onnxruntime" and (len(argv) == 4 or argv[4] == "--probabilities"):
        measure(argv[1], int(argv[2]), int(argv[3]), argv[5] if len(argv) == 6 else None)
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], argv[2])
    if len(argv) >= 2 and argv[0] == "report":
        return report(argv[1:])
    sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
