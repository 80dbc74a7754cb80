#!/usr/bin/env python3
"""Transformer bench: modelc's tensor engine against onnxruntime on the same PyTorch weights.

Usage:
    bench_transformers.py build DIR            build the models into DIR (cached: skipped when present)
    bench_transformers.py ort MODEL.onnx INPUTS.json|INPUTS.npz|INPUT.npy THREADS RUNS [--output FILE]
    bench_transformers.py run DIR BENCHMARKS RUNS [ROUNDS]
                                               build, check agreement, time both (ROUNDS alternations,
                                               default 5), print the table

Four models at real sizes, built from transformers configs with seeded random weights (nothing
is downloaded): a BERT-base-shaped encoder (sequence 128), a GPT-2-small-shaped decoder (one
forward of 64 tokens), the same decoder's one-token step after 64 tokens with its key/value
caches held in Core ML states (ONNX: caches as inputs and outputs; see kv_decoders) and a
ViT-S/16-shaped classifier (224x224). Each is traced once and
converted by ct.convert to an fp32 ML program, and exported by torch.onnx.export from the same
module. modelc runs in process through ModelcBenchmarks (`transformer`, tensor engine forced),
onnxruntime in its own Python process with the same intra-op thread count; each process reports
its median latency per input and its peak resident memory (getrusage), so the ratios come from
one run on one machine. An image input is read by both from a .npy file (see array_input).
The two engines alternate ROUNDS times per model and thread count; the table gives each engine's
median over the rounds, the ratio of the medians, the median of the rounds' own ratios (each
round's two measurements adjacent in time) and their range (a machine whose memory bandwidth
moves between minutes moves both engines; a single round's ratio then says as much about the
minute as about the engines).
"""

import copy
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


NAMES = ["bert-base-s128", "gpt2-small-t64", "gpt2-small-step", "vit-s16"]
# The decoder step: one token after PREFIX tokens, key/value caches of CACHE positions.
PREFIX, CACHE = 64, 128


def kv_decoders(lm, cache):
    """GPT-2 one-token decoding over key/value caches, from the weights of `lm` (a GPT2LMHeadModel).

    `Stateful` holds the caches as buffers updated in forward (Core ML states: the pattern
    coremltools documents for stateful models); its token positions follow from the inputs'
    shapes (`causal_mask` is [1, 1, tokens, end]: the tokens sit at end - tokens ..< end).
    `Past` is the same computation with the caches as inputs and outputs (ONNX
    past_key_values / present), for onnxruntime. The caches hold float16 in both (coremltools
    9.0 makes states fp16 only); everything else computes in the module's precision.
    """
    import torch

    config = lm.config
    heads, width = config.n_head, config.n_embd // config.n_head
    blocks = lm.transformer.h

    def attend(block, h, causal_mask, store):
        tokens = h.shape[1]
        q, k, v = block.attn.c_attn(block.ln_1(h)).split(config.n_embd, dim=2)
        q, k, v = (t.view(1, tokens, heads, width).transpose(1, 2) for t in (q, k, v))
        keys, values = store(k, v)
        scores = torch.matmul(q, keys.transpose(-1, -2)) * (1.0 / width ** 0.5) + causal_mask
        a = torch.matmul(torch.softmax(scores, dim=-1), values)
        h = h + block.attn.c_proj(a.transpose(1, 2).reshape(1, tokens, config.n_embd))
        return h + block.mlp(block.ln_2(h))

    def embed(input_ids, position_ids):
        return lm.transformer.wte(input_ids) + lm.transformer.wpe(position_ids)

    def head(h):
        return lm.lm_head(lm.transformer.ln_f(h))

    class Stateful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm
            for i in range(config.n_layer):
                self.register_buffer("keys_%d" % i, torch.zeros(1, heads, cache, width, dtype=torch.float16))
                self.register_buffer("values_%d" % i, torch.zeros(1, heads, cache, width, dtype=torch.float16))

        def forward(self, input_ids, position_ids, causal_mask):
            end = causal_mask.shape[-1]
            begin = end - input_ids.shape[-1]
            h = embed(input_ids, position_ids)
            for i, block in enumerate(blocks):
                keys, values = getattr(self, "keys_%d" % i), getattr(self, "values_%d" % i)

                def store(k, v):
                    keys[:, :, begin:end, :] = k.half()
                    values[:, :, begin:end, :] = v.half()
                    return keys[:, :, :end, :].to(k.dtype), values[:, :, :end, :].to(v.dtype)

                h = attend(block, h, causal_mask, store)
            return head(h)

    class Past(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, position_ids, causal_mask, past_keys, past_values):
            h = embed(input_ids, position_ids)
            presents = []
            for i, block in enumerate(blocks):
                def store(k, v):
                    keys, values = torch.cat([past_keys[i], k.half()], dim=2), torch.cat([past_values[i], v.half()], dim=2)
                    presents.append((keys, values))
                    return keys.to(k.dtype), values.to(v.dtype)

                h = attend(block, h, causal_mask, store)
            return head(h), torch.stack([k for k, _ in presents]), torch.stack([v for _, v in presents])

    return Stateful().eval(), Past().eval()


def causal_mask(tokens, end):
    """[1, 1, tokens, end] additive mask: token t (at end - tokens + t) sees positions up to its own."""
    mask = np.zeros((1, 1, tokens, end), dtype=np.float32)
    for t in range(tokens):
        mask[0, 0, t, end - tokens + t + 1:] = -1e9
    return mask


def build_step(out, name):
    """The decoder step: a stateful ML program (flexible token count, caches as states) and an ONNX
    model with the caches as inputs/outputs, from one GPT-2-small-shaped model; the logits of
    the step checked against the same module's full forward of all PREFIX + 1 tokens in float64."""
    import torch
    import transformers
    import coremltools as ct

    rng = np.random.default_rng(sum(map(ord, name)))
    lm = transformers.GPT2LMHeadModel(transformers.GPT2Config(use_cache=False)).eval()
    stateful, past = kv_decoders(lm, CACHE)
    tokens = rng.integers(0, lm.config.vocab_size, (1, PREFIX + 1)).astype(np.int32)
    prefill = {"input_ids": tokens[:, :PREFIX], "position_ids": np.arange(PREFIX, dtype=np.int32)[None],
               "causal_mask": causal_mask(PREFIX, PREFIX)}
    step = {"input_ids": tokens[:, PREFIX:], "position_ids": np.array([[PREFIX]], dtype=np.int32),
            "causal_mask": causal_mask(1, PREFIX + 1)}
    torch_inputs = lambda feed: tuple(torch.from_numpy(feed[k].astype(np.int64) if feed[k].dtype == np.int32 else feed[k])
                                      for k in ("input_ids", "position_ids", "causal_mask"))
    with torch.no_grad():
        traced = torch.jit.trace(stateful, torch_inputs(prefill), check_trace=False)
        # The caches after the prefix, for onnxruntime's past inputs.
        stateful(*torch_inputs(prefill))
        past_keys = torch.stack([getattr(stateful, "keys_%d" % i)[:, :, :PREFIX] for i in range(lm.config.n_layer)])
        past_values = torch.stack([getattr(stateful, "values_%d" % i)[:, :, :PREFIX] for i in range(lm.config.n_layer)])
        step_logits = stateful(*torch_inputs(step)).numpy()
        reference, _ = kv_decoders(copy.deepcopy(lm).double(), CACHE)
        full = reference(*torch_inputs({"input_ids": tokens, "position_ids": np.arange(PREFIX + 1, dtype=np.int32)[None],
                                        "causal_mask": causal_mask(PREFIX + 1, PREFIX + 1).astype(np.float64)}))[:, -1:].numpy()
        torch.onnx.export(past, torch_inputs(step) + (past_keys, past_values), os.path.join(out, name + ".onnx"),
                          input_names=["input_ids", "position_ids", "causal_mask", "past_keys", "past_values"],
                          output_names=["logits", "present_keys", "present_values"], opset_version=17, dynamo=False)
    error = float(np.max(np.abs(step_logits - full) / np.maximum(1, np.abs(full))))
    print("%s: PyTorch step against the full float64 forward: max relative difference %.1e" % (name, error), file=sys.stderr)
    assert error < TOLERANCE, error
    length = ct.RangeDim(1, CACHE, default=PREFIX)
    end = ct.RangeDim(1, CACHE, default=PREFIX)
    inputs = [ct.TensorType(name="input_ids", shape=(1, length), dtype=np.int32),
              ct.TensorType(name="position_ids", shape=(1, length), dtype=np.int32),
              ct.TensorType(name="causal_mask", shape=(1, 1, length, end), dtype=np.float32)]
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=(1, lm.config.n_head, CACHE, lm.config.n_embd // lm.config.n_head),
                                                      dtype=np.float16), name="%s_%d" % (kind, i))
              for i in range(lm.config.n_layer) for kind in ("keys", "values")]
    converted = ct.convert(traced, inputs=inputs, states=states, outputs=[ct.TensorType(name="logits")],
                           convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                           minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
    package = os.path.join(out, name + ".mlpackage")
    if os.path.exists(package):
        shutil.rmtree(package)
    converted.save(package)
    as_lists = lambda feed: {k: v.tolist() for k, v in feed.items()}
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump({"prefill": as_lists(prefill), "step": as_lists(step)}, f)
    np.savez(os.path.join(out, name + ".npz"), past_keys=past_keys.numpy(), past_values=past_values.numpy(), **step)


def torch_seed(name):
    import torch
    torch.manual_seed(sum(map(ord, name)))


def build(out):
    os.makedirs(out, exist_ok=True)
    table = None
    for name in NAMES:
        stamp = os.path.join(out, name + ".done")
        if os.path.exists(stamp) and open(stamp).read() == VERSION:
            continue
        if name == "gpt2-small-step":
            torch_seed(name)
            build_step(out, name)
            with open(stamp, "w") as f:
                f.write(VERSION)
            print("built", name, file=sys.stderr)
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
    if inputs.endswith(".npz"):
        given = dict(np.load(inputs))
    elif inputs.endswith(".npy"):
        given = {session.get_inputs()[0].name: np.load(inputs)}
    else:
        with open(inputs) as f:
            given = json.load(f)
    feed = {}
    for name, value in given.items():
        kind = next(i for i in session.get_inputs() if i.name == name).type
        feed[name] = np.array(value, dtype=np.int64 if "int64" in kind else np.float16 if "float16" in kind else np.float32)
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


def array_input(base):
    """For a model whose one input is a float array (ViT's image): that array of BASE.json as BASE.npy
    (written once) and BASE.npy.json, the inputs file naming it (`{"pixel_values": "@/…/BASE.npy"}`) for
    modelc; None for token inputs. Peak RSS is the engines' memory: parsed from JSON, an image's 150,528
    numbers cost modelc's process 32 MB (Foundation boxes each one) and Python's about 10 MB, so both
    processes read the same float32 array from the .npy instead."""
    with open(base + ".json") as f:
        given = json.load(f)
    if len(given) != 1 or not isinstance(given, dict):
        return None
    (name, value), = given.items()
    array = np.array(value)
    if array.dtype.kind != "f":
        return None
    path, named = base + ".npy", base + ".npy.json"
    if not os.path.exists(path):
        np.save(path, array.astype(np.float32))
    with open(named, "w") as f:
        json.dump({name: "@" + os.path.abspath(path)}, f)
    return path, named


def measure(command):
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return {key: value for key, value in (line.split(" ", 1) for line in text.splitlines() if " " in line)}


def run(out, benchmarks, runs, rounds=5):
    build(out)
    print("transformers: modelc tensor engine (fp32 ML program) against onnxruntime (torch.onnx export), "
          "same weights; median of %d inputs after 3 warm-up, peak RSS per process; the engines alternate %d "
          "times, medians over the rounds" % (runs, rounds))
    # OpenBLAS (modelc's matrix products) picks its kernels by CPU unless this forces a core type.
    print("OPENBLAS_CORETYPE=%s" % os.environ.get("OPENBLAS_CORETYPE", "(unset: chosen by CPU)"))
    print("%-15s %3s %11s %11s %7s %7s %11s %10s %10s %6s %9s" % ("model", "thr", "modelc_ms", "ort_ms", "ratio", "paired",
                                                                  "rounds", "modelc_MB", "ort_MB", "ratio", "max_diff"))
    failed = False
    for name in NAMES:
        base = os.path.join(out, name)
        inputs = feed = base + ".json"
        if os.path.exists(base + ".npz"):
            feed = base + ".npz"
        elif (array := array_input(base)) is not None:
            feed, inputs = array
        for threads in (1, 2):
            mine, theirs = [], []
            for _ in range(rounds):
                mine.append(measure([benchmarks, "transformer", base + ".mlpackage", inputs, str(threads), str(runs),
                                     "--output", base + ".modelc.f32"]))
                theirs.append(measure([sys.executable, os.path.abspath(__file__), "ort", base + ".onnx", feed,
                                       str(threads), str(runs), "--output", base + ".ort.f32"]))
            a = np.fromfile(base + ".modelc.f32", dtype="<f4").astype(np.float64)
            b = np.fromfile(base + ".ort.f32", dtype="<f4").astype(np.float64)
            diff = float(np.max(np.abs(a - b) / np.maximum(1, np.abs(b)))) if a.shape == b.shape else float("inf")
            failed |= not diff <= TOLERANCE
            mine_ms = [float(m["latency_ms"]) for m in mine]
            theirs_ms = [float(t["latency_ms"]) for t in theirs]
            ratios = [m / t for m, t in zip(mine_ms, theirs_ms)]
            ml, ol = float(np.median(mine_ms)), float(np.median(theirs_ms))
            mr = max(int(m["peak_rss_kb"]) for m in mine) / 1024
            orr = max(int(t["peak_rss_kb"]) for t in theirs) / 1024
            print("%-15s %3d %11.2f %11.2f %7.2f %7.2f %11s %10.0f %10.0f %6.2f %9.1e%s" % (
                name, threads, ml, ol, ml / ol, float(np.median(ratios)), "%.2f-%.2f" % (min(ratios), max(ratios)),
                mr, orr, mr / orr, diff,
                "" if diff <= TOLERANCE else "  DISAGREE"), flush=True)
    print("ratio = modelc / onnxruntime (below 1: modelc is faster or smaller), of the medians over the rounds; "
          "paired = the median of the rounds' own ratios; rounds = the lowest and highest of them; MB = the largest peak RSS of the rounds; max_diff "
          "relative to max(1, |onnxruntime|), tolerance %g" % TOLERANCE)
    return 1 if failed else 0


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "build":
        build(args[1])
    elif args[:1] == ["ort"] and len(args) in (5, 7):
        ort(args[1], args[2], int(args[3]), int(args[4]), args[6] if len(args) == 7 else None)
    elif len(args) in (4, 5) and args[0] == "run":
        sys.exit(run(args[1], args[2], int(args[3]), int(args[4]) if len(args) == 5 else 5))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
