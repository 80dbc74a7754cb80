#!/usr/bin/env python3
"""CNN bench: modelc's tensor engine against PyTorch and onnxruntime on the same torchvision weights.

Usage:
    bench_cnn.py build DIR                       build the models into DIR (cached: skipped when present)
    bench_cnn.py ort MODEL.onnx INPUTS.json|INPUT.npy THREADS RUNS [--output FILE]
    bench_cnn.py torch NAME INPUTS.json THREADS RUNS
    bench_cnn.py run DIR BENCHMARKS RUNS [NAME...]   build, check agreement, time all three, print the table

Six torchvision models with seeded random weights (nothing is downloaded): EfficientNet-B0,
DenseNet-121, DeepLabV3-MobileNetV3-Large, LRASPP-MobileNetV3-Large, ResNet-18 and MobileNetV2, on
one 224x224 image. Each is traced once and converted by ct.convert to an fp32 ML program, and
exported by torch.onnx.export from the same module. modelc runs in process through ModelcBenchmarks
(`transformer`: any ML program on the tensor engine), onnxruntime and PyTorch each in their own
Python process with the same intra-op thread count; each process reports its median latency per
input and its peak resident memory, so the ratios come from one run on one machine. modelc and
onnxruntime read the image from a .npy file (see array_input), PyTorch from the JSON. The three
alternate BENCH_CNN_ROUNDS times (5) per model and thread count; the table gives medians over the
rounds, the median of the rounds' own modelc / onnxruntime ratios (each round's two measurements
adjacent in time, so a slow minute moves both) and their range.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import time
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")

import numpy as np

# Outputs must agree within this, relative to max(1, |onnxruntime|): two fp32 engines summing in
# different orders over up to 120 layers.
TOLERANCE = 1e-3
VERSION = "1"  # bump to rebuild cached models when the builders change
NAMES = ["efficientnet_b0", "densenet121", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large",
         "resnet18", "mobilenet_v2"]


def module(name):
    import torch
    import torchvision

    class Out(torch.nn.Module):
        """Segmentation models return a dict; the bench compares its "out"."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)["out"]

    torch.manual_seed(sum(map(ord, name)))
    if "deeplab" in name or "lraspp" in name:
        model = Out(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None))
    else:
        model = getattr(torchvision.models, name)(weights=None)
    model.eval()
    # Batch-norm statistics seeded too, so folding them is exercised with values that matter.
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                layer.running_mean.uniform_(-0.1, 0.1)
                layer.running_var.uniform_(0.5, 1.5)
    return model


def build(out, names):
    os.makedirs(out, exist_ok=True)
    for name in names:
        stamp = os.path.join(out, name + ".done")
        if os.path.exists(stamp) and open(stamp).read() == VERSION:
            continue
        import torch
        import coremltools as ct
        model = module(name)
        rng = np.random.default_rng(sum(map(ord, name)))
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        example = torch.from_numpy(x)
        with torch.no_grad():
            traced = torch.jit.trace(model, example)
            torch.onnx.export(model, (example,), os.path.join(out, name + ".onnx"), input_names=["image"],
                              output_names=["out"], opset_version=17, dynamo=False)
        converted = ct.convert(traced, inputs=[ct.TensorType(name="image", shape=x.shape)],
                               outputs=[ct.TensorType(name="out")], convert_to="mlprogram",
                               compute_precision=ct.precision.FLOAT32, minimum_deployment_target=ct.target.iOS17,
                               skip_model_load=True)
        package = os.path.join(out, name + ".mlpackage")
        if os.path.exists(package):
            shutil.rmtree(package)
        converted.save(package)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"image": x.tolist()}, f)
        with open(stamp, "w") as f:
            f.write(VERSION)
        print("built", name, file=sys.stderr, flush=True)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def report(engine, threads, times, first, cpu):
    print("engine %s" % engine)
    print("cpu_ms %.3f" % (cpu / len(times) * 1000))
    print("threads %d" % threads)
    print("latency_ms %.3f" % (sorted(times)[len(times) // 2] * 1000))
    print("first_ms %.3f" % (first * 1000))
    print("peak_rss_kb %d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def array_input(base):
    """The image of BASE.json as BASE.npy (written once) and BASE.npy.json, the inputs file naming it
    (`{"image": "@/…/BASE.npy"}`) for modelc. Peak RSS is the engines' memory: parsed from JSON, the
    150,528 numbers cost modelc's process 32 MB (Foundation boxes each one) and Python's about 10 MB,
    so both processes read the same float32 array from the .npy instead."""
    path, named = base + ".npy", base + ".npy.json"
    if not os.path.exists(path):
        with open(base + ".json") as f:
            np.save(path, np.array(json.load(f)["image"], dtype=np.float32))
    with open(named, "w") as f:
        json.dump({"image": "@" + os.path.abspath(path)}, f)
    return path, named


def ort(model, inputs, threads, runs, output):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    if inputs.endswith(".npy"):
        feed = {session.get_inputs()[0].name: np.load(inputs)}
    else:
        with open(inputs) as f:
            feed = {name: np.array(value, dtype=np.float32) for name, value in json.load(f).items()}
    result = session.run(None, feed)[0]
    first = time.perf_counter() - start
    if output:
        result.astype("<f4").tofile(output)
    for _ in range(3):
        session.run(None, feed)
    times = []
    cpu = cpu_seconds()
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t)
    report("onnxruntime-%s" % onnxruntime.__version__, threads, times, first, cpu_seconds() - cpu)


def run_torch(name, inputs, threads, runs):
    import torch
    torch.set_num_threads(threads)
    start = time.perf_counter()
    model = module(name)
    with open(inputs) as f:
        x = torch.tensor(np.array(json.load(f)["image"], dtype=np.float32))
    with torch.no_grad():
        model(x)
        first = time.perf_counter() - start
        for _ in range(3):
            model(x)
        times = []
        cpu = cpu_seconds()
        for _ in range(runs):
            t = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t)
    report("torch-%s" % torch.__version__, threads, times, first, cpu_seconds() - cpu)


# Rounds in which the three engines alternate, per model and thread count: on a machine whose speed moves
# between minutes a single round's ratio says as much about the minute as about the engines.
ROUNDS = int(os.environ.get("BENCH_CNN_ROUNDS", "5"))


def measure(command):
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return {key: value for key, value in (line.split(" ", 1) for line in text.splitlines() if " " in line)}


def run(out, benchmarks, runs, names):
    build(out, names)
    print("CNNs: modelc tensor engine (fp32 ML program) against PyTorch (eager) and onnxruntime (torch.onnx "
          "export), same weights, 1x3x224x224; median of %d inputs after 3 warm-up, peak RSS per process; the three "
          "alternate %d times (BENCH_CNN_ROUNDS), medians over the rounds" % (runs, ROUNDS))
    # PyTorch runs on OpenMP threads, which spin between parallel regions unless this says passive: on a machine
    # busy with other processes a spinning thread that loses its core stalls the other. (modelc splits its
    # convolutions over its own threads, each oneDNN call on one OpenMP thread, so the policy does not touch it.)
    print("OMP_WAIT_POLICY=%s" % os.environ.get("OMP_WAIT_POLICY", "(unset: OpenMP's default, spinning)"))
    print("%-29s %3s %9s %9s %9s %7s %7s %7s %11s %8s %8s %7s %9s %7s %9s" % (
        "model", "thr", "modelc_ms", "torch_ms", "ort_ms", "/torch", "/ort", "paired", "ort_rounds", "cpu_ms", "ort_cpu",
        "cpu/ort", "modelc_MB", "MB/ort", "max_diff"))
    failed = False
    me = os.path.abspath(__file__)
    for name in names:
        base = os.path.join(out, name)
        array, named = array_input(base)
        for threads in (1, 2):
            rounds = []
            for _ in range(ROUNDS):
                rounds.append((
                    measure([benchmarks, "transformer", base + ".mlpackage", named, str(threads), str(runs),
                             "--output", base + ".modelc.f32"]),
                    measure([sys.executable, me, "ort", base + ".onnx", array, str(threads), str(runs),
                             "--output", base + ".ort.f32"]),
                    measure([sys.executable, me, "torch", name, base + ".json", str(threads), str(runs)])))
            a = np.fromfile(base + ".modelc.f32", dtype="<f4").astype(np.float64)
            b = np.fromfile(base + ".ort.f32", dtype="<f4").astype(np.float64)
            diff = float(np.max(np.abs(a - b) / np.maximum(1, np.abs(b)))) if a.shape == b.shape else float("inf")
            failed |= not diff <= TOLERANCE

            def median(engine, key):
                return float(np.median([float(r[engine][key]) for r in rounds]))

            ml, ol, tl = median(0, "latency_ms"), median(1, "latency_ms"), median(2, "latency_ms")
            mc, oc = median(0, "cpu_ms"), median(1, "cpu_ms")
            mr = max(int(r[0]["peak_rss_kb"]) for r in rounds) / 1024
            orr = max(int(r[1]["peak_rss_kb"]) for r in rounds) / 1024
            ratios = [float(r[0]["latency_ms"]) / float(r[1]["latency_ms"]) for r in rounds]
            print("%-29s %3d %9.2f %9.2f %9.2f %7.2f %7.2f %7.2f %11s %8.2f %8.2f %7.2f %9.0f %7.2f %9.1e%s" % (
                name, threads, ml, tl, ol, ml / tl, ml / ol, float(np.median(ratios)),
                "%.2f-%.2f" % (min(ratios), max(ratios)), mc, oc, mc / oc,
                mr, mr / orr, diff, "" if diff <= TOLERANCE else "  DISAGREE"), flush=True)
    print("/torch, /ort = modelc latency over theirs, of the medians over the rounds (below 1: modelc is faster); "
          "paired = the median of the rounds' own /ort; ort_rounds = the lowest and highest of them; cpu_ms = mean CPU time per input, "
          "every thread (what a busy machine's latency hides); MB/ort = peak RSS over onnxruntime's (both reading the "
          "image from .npy); max_diff relative "
          "to max(1, |onnxruntime|), tolerance %g" % TOLERANCE)
    return 1 if failed else 0


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "build":
        build(args[1], args[2:] or NAMES)
    elif args[:1] == ["ort"] and len(args) in (5, 7):
        ort(args[1], args[2], int(args[3]), int(args[4]), args[6] if len(args) == 7 else None)
    elif args[:1] == ["torch"] and len(args) == 5:
        run_torch(args[1], args[2], int(args[3]), int(args[4]))
    elif len(args) >= 4 and args[0] == "run":
        sys.exit(run(args[1], args[2], int(args[3]), args[4:] or NAMES))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
