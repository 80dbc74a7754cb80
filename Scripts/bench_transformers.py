#!/usr/bin/env python3
"""Transformer bench: modelc's tensor engine against onnxruntime on the same PyTorch weights.

Usage:
    bench_transformers.py build DIR            build the models into DIR (cached: skipped when present)
    bench_transformers.py ort MODEL.onnx INPUTS.json THREADS RUNS [--output FILE]
    bench_transformers.py run DIR BENCHMARKS RUNS   build, check agreement, time both, print the table

Three models at real sizes, built from transformers configs with seeded random weights (nothing
is downloaded): a BERT-base-shaped encoder (sequence 128), a GPT-2-small-shaped decoder (one
forward of 64 tokens) and a ViT-S/16-shaped classifier (224x224). Each is traced once and
converted by ct.convert to an fp32 ML program, and exported by torch.onnx.export from the same
module. modelc runs in process through ModelcBenchmarks (`transformer`, tensor engine forced),
onnxruntime in its own Python process with the same intra-op thread count; each process reports
its median latency per input and its peak resident memory (getrusage), so the ratios come from
one run on one machine.
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
# different orders over 12 layers.
TOLERANCE = 1e-3
VERSION = "2"  # bump to rebuild cached models when the builders change


def builders():
    import torch
    import transformers

    class Outputs(torch.nn.Module):
        def __init__(self, inner, key):
            super().__init__()
            self.inner, self.key = inner, key

        def forward(self, x):
            return getattr(self.inner(x, return_dict=True), self.key)

    def bert(rng):
        config = transformers.BertConfig(hidden_act="gelu")  # BERT-base: 12 layers, 768 wide, 12 heads
        module = Outputs(transformers.BertModel(config, add_pooling_layer=False), "last_hidden_state")
        return module, rng.integers(0, config.vocab_size, (1, 128)).astype(np.int32), "input_ids", "last_hidden_state"

    def gpt2(rng):
        config = transformers.GPT2Config(use_cache=False)  # GPT-2 small: 12 layers, 768 wide, 12 heads
        module = Outputs(transformers.GPT2LMHeadModel(config), "logits")
        return module, rng.integers(0, config.vocab_size, (1, 64)).astype(np.int32), "input_ids", "logits"

    def vit(rng):
        config = transformers.ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                                        intermediate_size=1536, image_size=224, patch_size=16, num_labels=1000)
        module = Outputs(transformers.ViTForImageClassification(config), "logits")
        return module, rng.standard_normal((1, 3, 224, 224)).astype(np.float32), "pixel_values", "logits"

    return {"bert-base-s128": bert, "gpt2-small-t64": gpt2, "vit-s16": vit}


NAMES = ["bert-base-s128", "gpt2-small-t64", "vit-s16"]


def build(out):
    os.makedirs(out, exist_ok=True)
    table = None
    for name in NAMES:
        stamp = os.path.join(out, name + ".done")
        if os.path.exists(stamp) and open(stamp).read() == VERSION:
            continue
        import torch
        import coremltools as ct
        table = table or builders()
        torch.manual_seed(sum(map(ord, name)))
        rng = np.random.default_rng(sum(map(ord, name)))
        module, x, input_name, output_name = table[name](rng)
        module.eval()
        example = torch.from_numpy(x.astype(np.int64) if x.dtype == np.int32 else x)
        traced = torch.jit.trace(module, example, strict=False)
        with torch.no_grad():
            torch.onnx.export(module, (example,), os.path.join(out, name + ".onnx"), input_names=[input_name],
                              output_names=[output_name], opset_version=17, dynamo=False)
        if x.dtype == np.int32:
            # Token inputs are flexible, as the zoo converts them (with a fixed length coremltools
            # 9.0 folds the attention mask's shape arithmetic into a cast it cannot make).
            shape = (1, ct.RangeDim(1, 512, default=x.shape[1]))
            spec = ct.TensorType(name=input_name, shape=shape, dtype=np.int32)
        else:
            spec = ct.TensorType(name=input_name, shape=x.shape)
        converted = ct.convert(traced, inputs=[spec],
                               outputs=[ct.TensorType(name=output_name)], convert_to="mlprogram",
                               compute_precision=ct.precision.FLOAT32, minimum_deployment_target=ct.target.iOS17,
                               skip_model_load=True)
        package = os.path.join(out, name + ".mlpackage")
        if os.path.exists(package):
            shutil.rmtree(package)
        converted.save(package)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({input_name: x.tolist()}, f)
        with open(stamp, "w") as f:
            f.write(VERSION)
        print("built", name, file=sys.stderr)


def ort(model, inputs, threads, runs, output):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    with open(inputs) as f:
        feed = {}
        for name, value in json.load(f).items():
            kind = next(i for i in session.get_inputs() if i.name == name).type
            feed[name] = np.array(value, dtype=np.int64 if "int64" in kind else np.float32)
    result = session.run(None, feed)[0]
    first = time.perf_counter() - start
    if output:
        result.astype("<f4").tofile(output)
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t)
    print("engine onnxruntime-%s" % onnxruntime.__version__)
    print("threads %d" % threads)
    print("latency_ms %.3f" % (sorted(times)[len(times) // 2] * 1000))
    print("first_ms %.3f" % (first * 1000))
    print("peak_rss_kb %d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def measure(command):
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return {key: value for key, value in (line.split(" ", 1) for line in text.splitlines() if " " in line)}


def run(out, benchmarks, runs):
    build(out)
    print("transformers: modelc tensor engine (fp32 ML program) against onnxruntime (torch.onnx export), "
          "same weights; median of %d inputs after 3 warm-up, peak RSS per process" % runs)
    # OpenBLAS (modelc's matrix products) picks its kernels by CPU unless this forces a core type.
    print("OPENBLAS_CORETYPE=%s" % os.environ.get("OPENBLAS_CORETYPE", "(unset: chosen by CPU)"))
    print("%-15s %3s %11s %11s %7s %10s %10s %6s %9s" % ("model", "thr", "modelc_ms", "ort_ms", "ratio",
                                                        "modelc_MB", "ort_MB", "ratio", "max_diff"))
    failed = False
    for name in NAMES:
        base = os.path.join(out, name)
        for threads in (1, 2):
            mine = measure([benchmarks, "transformer", base + ".mlpackage", base + ".json", str(threads), str(runs),
                            "--output", base + ".modelc.f32"])
            theirs = measure([sys.executable, os.path.abspath(__file__), "ort", base + ".onnx", base + ".json",
                              str(threads), str(runs), "--output", base + ".ort.f32"])
            a = np.fromfile(base + ".modelc.f32", dtype="<f4").astype(np.float64)
            b = np.fromfile(base + ".ort.f32", dtype="<f4").astype(np.float64)
            diff = float(np.max(np.abs(a - b) / np.maximum(1, np.abs(b)))) if a.shape == b.shape else float("inf")
            failed |= not diff <= TOLERANCE
            ml, ol = float(mine["latency_ms"]), float(theirs["latency_ms"])
            mr, orr = int(mine["peak_rss_kb"]) / 1024, int(theirs["peak_rss_kb"]) / 1024
            print("%-15s %3d %11.2f %11.2f %7.2f %10.0f %10.0f %6.2f %9.1e%s" % (
                name, threads, ml, ol, ml / ol, mr, orr, mr / orr, diff, "" if diff <= TOLERANCE else "  DISAGREE"),
                flush=True)
    print("ratio = modelc / onnxruntime (below 1: modelc is faster or smaller); max_diff relative to "
          "max(1, |onnxruntime|), tolerance %g" % TOLERANCE)
    return 1 if failed else 0


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "build":
        build(args[1])
    elif args[:1] == ["ort"] and len(args) in (5, 7):
        ort(args[1], args[2], int(args[3]), int(args[4]), args[6] if len(args) == 7 else None)
    elif len(args) == 4 and args[0] == "run":
        sys.exit(run(args[1], args[2], int(args[3])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
