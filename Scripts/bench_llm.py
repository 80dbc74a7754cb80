#!/usr/bin/env python3
"""LLM bench: `modelc generate` on Llama-shaped stateful decoders, against onnxruntime and llama.cpp on
the same weights and against the machine's memory bandwidth.

Usage (the zoo venv: torch, coremltools, onnxruntime, gguf; `make zoo` makes it; `make bench-llm` runs it):
    bench_llm.py [--modelc BIN] [--models 200m-int4,7b-int4] [--rounds N] [--threads 1,2]
                 [--isas native,avx2] [--skip-onnxruntime] [--llama-python PYTHON] [--build-only] [--work DIR]

Models, built once into --work (.build/bench-llm; reruns reuse them), all with seeded weights and a
context of 512 tokens:
    200m-fp16, 200m-int4   201 M parameters: vocab 32000, width 1024, 12 layers, 16 heads (4 key/value)
                           of 64, MLP 2816
    1b-fp16, 1b-int4       853 M parameters (the issue's "1 B"): vocab 32000, width 2048, 16 layers,
                           32 heads (8 key/value) of 64, MLP 5632
    7b-int4                6.7 B parameters, Llama-7B's shape: vocab 32000, width 4096, 32 layers,
                           32 heads of 128, MLP 11008
The 200m and 1b models are Fixtures/llama_decoder.py's PyTorch Decoder at these sizes, traced and
converted by its `convert` (Apple's decoder form: inputIds [1, q], causalMask [1, 1, q, end], key/value
caches as fp16 states, fp16 compute), then int4 per block of 32 by its quantizer config (every
projection, the embedding and the LM head). The 7b program is written directly with coremltools' MIL
builder (no PyTorch: the 7B in PyTorch would need 27 GB), the graph coremltools makes of the PyTorch
decoder, with random int4 codes and fp16 scales from a seeded generator: 3.8 GB. Before writing it,
the generator is checked at a tiny size with modelc (prefill and steps agree). Building everything
takes about 10 minutes and 17 GB of memory at the peak (the 1b's conversion and ONNX export; the 7b's
MIL program 8 GB, its GGUF 12 GB).

Per model and thread count, each measurement a fresh process: `modelc generate --json` with a
PROMPT-token prompt and NEW new tokens (the 7b: NEW_7B), its load time, prefill and decode tokens/s and
peak RSS (/usr/bin/time, as for every engine); modelc's cache (--work/modelc-cache) is filled by a first run, not timed.
onnxruntime (200m and 1b, not the 7b) runs the same PyTorch weights exported by torch.onnx.export with
the key/value caches as inputs and outputs (past / present, fp16 as in the states): for the fp16 rows
the fp16 graph (onnxruntime 1.20's CPU provider has no fp16 MatMul on x86: it inserts Cast nodes and
converts the fp16 weights to fp32 at every run, a weak baseline), for int4 the fp32 graph quantized by onnxruntime's MatMul4BitsQuantizer (MatMulNBits,
symmetric, blocks of 32, accuracy level 4: int8 activations, its fastest CPU setting; the embedding
stays fp32), timed the same way in a Python process of its own (its peak RSS includes Python's and numpy's).
The engines alternate --rounds times; the table gives medians over the rounds and `paired`, the median
of the rounds' own ratios.

The physical limit: a decode step must read every stored weight but the embedding table (one row of
it) and the key/value cache up to its position. The bandwidth is measured in this run by a STREAM-like
copy of a 1 GiB float64 array with numpy, (bytes read + bytes written) / s, best of 5, once in one
process (single-threaded) and once in two processes copying at the same time (for rows of 2 threads or
more the larger of the two), before the rows and again after them, the better of the two kept (a shared
machine disturbed at one moment understated the limit); `limit` is modelc's decode tokens/s as a fraction
of bandwidth / bytes per token, `cpp_lim` llama.cpp's.

Prints one table per --isas value (modelc's kernels capped by MODELC_MAX_CPU_ISA; onnxruntime as it
is), headed by the CPU and its ISA extensions, and writes every number to WORK/results.json.
Exits 1 when modelc fails on a model (the error and its command are printed and kept in the JSON).

llama.cpp (with --llama-python, the python of a venv holding llama-cpp-python built from PyPI's source
distribution; `make bench-llm` makes .venv-llama) runs the int4 models (the 7b too) from GGUF files
written with the `gguf` package: the programs' own int4 codes and fp16 scales as Q4_0 blocks of 32, so
bit for bit the weights modelc runs (see write_gguf), in the same rounds, timed the same way through
llama-cpp-python's low-level eval (greedy on the last logits).
"""

import argparse
import json
import multiprocessing
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "200m": dict(vocab=32000, hidden=1024, layers=12, heads=16, kv_heads=4, head_dim=64, intermediate=2816, context=512),
    "1b": dict(vocab=32000, hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, intermediate=5632, context=512),
    "7b": dict(vocab=32000, hidden=4096, layers=32, heads=32, kv_heads=32, head_dim=128, intermediate=11008, context=512),
}
# The MIL generator's check before it writes the 7B (llama_decoder.py's fixture size).
TINY = dict(vocab=96, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128, context=32)
MODELS = ["200m-fp16", "200m-int4", "1b-fp16", "1b-int4", "7b-int4"]
PROMPT, NEW, NEW_7B = 128, 32, 8
BLOCK = 32
SEED = 7


def size_of(name):
    return name.split("-")[0]


def weight_bytes(package):
    """The bytes of the package's weight file(s)."""
    weights = os.path.join(package, "Data", "com.apple.CoreML", "weights")
    return sum(os.path.getsize(os.path.join(weights, f)) for f in os.listdir(weights))


def embedding_bytes(name):
    """The stored bytes of the embedding table: int4 codes plus an fp16 scale per block, or fp16."""
    shape = SHAPES[size_of(name)]
    values = shape["vocab"] * shape["hidden"]
    return values // 2 + values // BLOCK * 2 if name.endswith("int4") else values * 2


def cache_bytes(name, end):
    """The key and value cache bytes a step at position `end` reads (fp16, positions 0 ..< end)."""
    s = SHAPES[size_of(name)]
    return 2 * s["layers"] * s["kv_heads"] * end * s["head_dim"] * 2


# The PyTorch decoders (200m, 1b): Fixtures/llama_decoder.py at other sizes.

def llama_decoder(shape):
    """Fixtures/llama_decoder.py with its module constants set to `shape` (its classes read them)."""
    sys.path.insert(0, os.path.join(ROOT, "Fixtures"))
    import llama_decoder as L
    L.VOCAB, L.HIDDEN, L.LAYERS = shape["vocab"], shape["hidden"], shape["layers"]
    L.HEADS, L.KV_HEADS, L.HEAD_DIM = shape["heads"], shape["kv_heads"], shape["head_dim"]
    L.INTERMEDIATE, L.CONTEXT = shape["intermediate"], shape["context"]
    return L


def past_present(decoder):
    """`decoder` (llama_decoder.Decoder) with its caches as inputs and outputs, for ONNX: past keys and
    values [layers, 1, kv heads, past, head width] in, logits and the present caches (past + the new
    tokens) out. It runs the decoder's own forward on a cache made of the past and room for the new
    tokens, so the computation is the one the Core ML program makes."""
    import torch

    class PastPresent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = decoder

        def forward(self, input_ids, causal_mask, past_keys, past_values):
            room = list(past_keys.shape)
            room[3] = input_ids.shape[-1]
            fresh = torch.zeros(room, dtype=past_keys.dtype)
            self.decoder.keyCache = torch.cat((past_keys, fresh), dim=3)
            self.decoder.valueCache = torch.cat((past_values, fresh), dim=3)
            logits = self.decoder(input_ids, causal_mask)
            return logits, self.decoder.keyCache, self.decoder.valueCache

    return PastPresent().eval()


def export_onnx(decoder, L, directory, half):
    """The decoder in past / present form as DIRECTORY/model.onnx, an fp16 graph when `half` (fp32
    otherwise). torch writes the weights of a model past protobuf's 2 GB as files beside it."""
    import copy
    import torch

    os.makedirs(directory, exist_ok=True)
    kind = torch.float16 if half else torch.float32
    wrapper = past_present(copy.deepcopy(decoder).to(kind))
    cache = (L.LAYERS, 1, L.KV_HEADS, 3, L.HEAD_DIM)
    example = (torch.randint(0, L.VOCAB, (1, 2)), L.causal_mask(2, 5, kind),
               torch.zeros(cache, dtype=torch.float16), torch.zeros(cache, dtype=torch.float16))
    with torch.no_grad():
        torch.onnx.export(wrapper, example, os.path.join(directory, "model.onnx"), opset_version=17, dynamo=False,
                          input_names=["input_ids", "causal_mask", "past_keys", "past_values"],
                          output_names=["logits", "present_keys", "present_values"],
                          dynamic_axes={"input_ids": {1: "q"}, "causal_mask": {2: "q", 3: "end"},
                                        "past_keys": {3: "past"}, "past_values": {3: "past"},
                                        "logits": {1: "q"}, "present_keys": {3: "end"}, "present_values": {3: "end"}})


def quantize_onnx_int4(source, directory):
    """onnxruntime's MatMul4BitsQuantizer on SOURCE/model.onnx (fp32) into DIRECTORY/model.onnx: every
    MatMul with a constant weight becomes MatMulNBits, symmetric int4 in blocks of 32, accuracy level 4."""
    import onnx
    from onnxruntime.quantization.matmul_4bits_quantizer import MatMul4BitsQuantizer

    os.makedirs(directory, exist_ok=True)
    quantizer = MatMul4BitsQuantizer(onnx.load(os.path.join(source, "model.onnx")), block_size=BLOCK,
                                     is_symmetric=True, accuracy_level=4)
    quantizer.process()
    quantizer.model.save_model_to_file(os.path.join(directory, "model.onnx"), use_external_data_format=False)


def build_torch(work, size, names, onnx):
    """The `size` decoder's programs in `names` (fp16, int4) and, with `onnx`, their ONNX twins, each
    one that is missing; one seeded PyTorch decoder for all of them."""
    import torch
    import coremltools.optimize.coreml as cto

    missing = [n for n in names if not os.path.exists(package_path(work, n))]
    missing_onnx = [n for n in names if onnx and not os.path.exists(onnx_path(work, n))]
    if not missing and not missing_onnx:
        return
    L = llama_decoder(SHAPES[size])
    torch.manual_seed(SEED)
    decoder = L.Decoder().eval()
    print("%s: %.0f M parameters" % (size, sum(p.numel() for p in decoder.parameters()) / 1e6), flush=True)
    if missing:
        start = time.perf_counter()
        fp16 = L.convert(decoder, torch.randint(0, L.VOCAB, (1, 8)))
        print("%s: traced and converted in %.0f s" % (size, time.perf_counter() - start), flush=True)
        for name in missing:
            start = time.perf_counter()
            model = fp16
            if name.endswith("int4"):
                model = cto.linear_quantize_weights(fp16, cto.OptimizationConfig(global_config=L.INT4))
            save_package(model, work, name)
            print("%s: saved in %.0f s" % (name, time.perf_counter() - start), flush=True)
        del fp16, model
    for name in missing_onnx:
        start = time.perf_counter()
        partial = onnx_path(work, name) + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        if name.endswith("fp16"):
            export_onnx(decoder, L, partial, half=True)
        else:
            fp32 = partial + "-fp32"
            export_onnx(decoder, L, fp32, half=False)
            quantize_onnx_int4(fp32, partial)
            shutil.rmtree(fp32)
        os.replace(partial, onnx_path(work, name))
        print("%s: ONNX written in %.0f s" % (name, time.perf_counter() - start), flush=True)


def package_path(work, name):
    return os.path.join(work, name + ".mlpackage")


def onnx_path(work, name):
    return os.path.join(work, "onnx", name)


def save_package(model, work, name):
    """Saves under a scratch name first, so that an interrupted build is not taken for a built one."""
    partial = os.path.join(work, "partial", name + ".mlpackage")
    shutil.rmtree(partial, ignore_errors=True)
    model.save(partial)
    os.replace(partial, package_path(work, name))


# The 7B-shaped program, written with the MIL builder.

def mil_decoder(shape, seed):
    """A Llama-shaped int4 decoder in Apple's stateful form as a MIL program: the op sequence that
    coremltools makes of llama_decoder.Decoder (embedding gather, per layer RMSNorm, q/k/v projections,
    rotary embedding from fp16 tables sliced at past ..< end, key/value caches updated in state by
    slice_update, grouped-query scaled_dot_product_attention, output projection, RMSNorm, SwiGLU MLP;
    a final RMSNorm and the LM head). Every projection, the embedding and the LM head are
    constexpr_blockwise_shift_scale of random int4 codes in [-7, 7] (linear_symmetric's range) and
    fp16 scales per block of 32, sized so that activations keep unit scale."""
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import get_new_symbol, types
    import coremltools as ct

    vocab, hidden, layers = shape["vocab"], shape["hidden"], shape["layers"]
    heads, kv_heads, width = shape["heads"], shape["kv_heads"], shape["head_dim"]
    intermediate, context = shape["intermediate"], shape["context"]
    half = width // 2
    rng = np.random.default_rng(seed)
    int32 = lambda values: np.array(values, dtype=np.int32)

    def int4(rows, columns, spread):
        """An int4 weight [rows, columns] whose values' standard deviation is about `spread`."""
        codes = rng.integers(-7, 8, size=(rows, columns), dtype=np.int8).view(types.np_int4_dtype)
        # Uniform codes in [-7, 7] have a standard deviation of 4.32.
        scale = (spread / 4.32 * rng.uniform(0.75, 1.25, size=(rows, columns // BLOCK))).astype(np.float16)
        return mb.constexpr_blockwise_shift_scale(data=codes, scale=scale)

    def projection(x, rows, columns, name):
        return mb.linear(x=x, weight=int4(rows, columns, columns ** -0.5), name=name)

    def norm(x, name):
        weight = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float16)
        mean = mb.reduce_mean(x=mb.mul(x=x, y=x), axes=[-1], keep_dims=True)
        scaled = mb.mul(x=x, y=mb.rsqrt(x=mb.add(x=mean, y=np.float16(1e-5))))
        return mb.mul(x=scaled, y=weight, name=name)

    def split_heads(x, count):
        return mb.transpose(x=mb.reshape(x=x, shape=int32([1, -1, count, width])), perm=[0, 2, 1, 3])

    def rotate(x, count, cos, sin):
        """Llama's half-split rotary embedding of x [1, count, q, width]."""
        upper = mb.slice_by_index(x=x, begin=int32([0, 0, 0, half]), end=int32([1, count, 0, width]),
                                  end_mask=[True, True, True, True])
        lower = mb.slice_by_index(x=x, begin=int32([0, 0, 0, 0]), end=int32([1, count, 0, half]),
                                  end_mask=[True, True, True, False])
        turned = mb.concat(values=[mb.mul(x=upper, y=np.float16(-1)), lower], axis=-1)
        return mb.add(x=mb.mul(x=x, y=cos), y=mb.mul(x=turned, y=sin))

    def store(cache, previous, layer, update, past, end):
        """Writes update [1, kv heads, q, width] at past ..< end of `layer` in the cache (its value so far
        `previous`), and returns the updated cache and the layer's [1, kv heads, end, width]."""
        stop = mb.concat(values=[int32([layer + 1, 1, kv_heads]), end, int32([width])], axis=0)
        updated = mb.slice_update(x=previous, update=update,
                                  begin=mb.concat(values=[int32([layer, 0, 0]), past, int32([0])], axis=0),
                                  end=stop, stride=int32([1] * 5), begin_mask=[False] * 5,
                                  end_mask=[False, True, True, False, True], squeeze_mask=[True, False, False, False, False])
        updated = mb.coreml_update_state(state=cache, value=updated)
        seen = mb.slice_by_index(x=updated, begin=int32([layer, 0, 0, 0, 0]), end=stop,
                                 end_mask=[False, True, True, False, True], squeeze_mask=[True, False, False, False, False])
        if kv_heads != heads:
            seen = mb.tile(x=mb.expand_dims(x=seen, axes=[2]), reps=int32([1, 1, heads // kv_heads, 1, 1]))
            seen = mb.reshape(x=seen, shape=int32([1, heads, -1, width]))
        return updated, seen

    inverse = 10000.0 ** (-np.arange(0, width, 2, dtype=np.float64) / width)
    angles = np.arange(context, dtype=np.float64)[:, None] * inverse
    angles = np.concatenate((angles, angles), axis=-1)
    cache_shape = (layers, 1, kv_heads, context, width)
    tokens, positions = get_new_symbol(), get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, tokens), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 1, tokens, positions), dtype=types.fp16),
                             mb.StateTensorSpec(shape=cache_shape, dtype=types.fp16),
                             mb.StateTensorSpec(shape=cache_shape, dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def program(inputIds, causalMask, keyCache, valueCache):  # noqa: N803 - the model's feature names
        count = mb.slice_by_index(x=mb.shape(x=inputIds), begin=int32([1]), end=int32([2]))
        end = mb.slice_by_index(x=mb.shape(x=causalMask), begin=int32([3]), end=int32([4]))
        past = mb.sub(x=end, y=count, name="past")
        table = lambda values, name: mb.slice_by_index(
            x=values.astype(np.float16), begin=mb.concat(values=[past, int32([0])], axis=0),
            end=mb.concat(values=[end, int32([width])], axis=0), name=name)
        cos, sin = table(np.cos(angles), "cos"), table(np.sin(angles), "sin")
        h = mb.gather(x=int4(vocab, hidden, 1.0), indices=inputIds, axis=0, name="embedded")
        keys, values = mb.read_state(input=keyCache), mb.read_state(input=valueCache)
        for i in range(layers):
            x = norm(h, "layer%d_input_norm" % i)
            q = rotate(split_heads(projection(x, heads * width, hidden, "layer%d_q" % i), heads), heads, cos, sin)
            k = rotate(split_heads(projection(x, kv_heads * width, hidden, "layer%d_k" % i), kv_heads), kv_heads, cos, sin)
            v = split_heads(projection(x, kv_heads * width, hidden, "layer%d_v" % i), kv_heads)
            keys, seen_keys = store(keyCache, keys, i, k, past, end)
            values, seen_values = store(valueCache, values, i, v, past, end)
            a = mb.scaled_dot_product_attention(query=q, key=seen_keys, value=seen_values, attn_mask=causalMask)
            a = mb.reshape(x=mb.transpose(x=a, perm=[0, 2, 1, 3]), shape=int32([1, -1, heads * width]))
            h = mb.add(x=h, y=projection(a, hidden, heads * width, "layer%d_o" % i))
            x = norm(h, "layer%d_post_norm" % i)
            gate = mb.silu(x=projection(x, intermediate, hidden, "layer%d_gate" % i))
            up = projection(x, intermediate, hidden, "layer%d_up" % i)
            h = mb.add(x=h, y=projection(mb.mul(x=gate, y=up), hidden, intermediate, "layer%d_down" % i))
            if layers >= 8:
                print("  layer %d of %d written" % (i + 1, layers), flush=True)
        return projection(norm(h, "norm"), vocab, hidden, "logits")

    return program


def build_mil(shape, seed=SEED):
    """The MIL-built decoder of `shape` as an ML program (iOS18, fp16, not yet saved)."""
    import coremltools as ct

    start = time.perf_counter()
    program = mil_decoder(shape, seed)
    print("program built in %.0f s" % (time.perf_counter() - start), flush=True)
    context = ct.RangeDim(1, shape["context"], default=1)
    inputs = [ct.TensorType(name="inputIds", shape=(1, context), dtype=np.int32),
              ct.TensorType(name="causalMask", shape=(1, 1, context, ct.RangeDim(1, shape["context"], default=1)),
                            dtype=np.float16)]
    model = ct.convert(program, inputs=inputs, outputs=[ct.TensorType(name="logits", dtype=np.float16)],
                       convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                       compute_precision=ct.precision.FLOAT16, skip_model_load=True)
    print("converted in %.0f s" % (time.perf_counter() - start), flush=True)
    return model


def check_mil_generator(work, modelc):
    """The MIL generator at a tiny size, run by modelc before the 7B is written: a generation's tokens
    must be those of a second one whose prompt holds the first's first tokens (the prefill and the
    one-token steps on the state agree)."""
    path = os.path.join(work, "partial", "tiny-mil.mlpackage")
    shutil.rmtree(path, ignore_errors=True)
    build_mil(TINY).save(path)
    env = dict(os.environ, MODELC_CACHE=os.path.join(work, "modelc-cache"))
    prompt = [1, 2, 3, 4, 5]
    first = modelc_generate(modelc, path, prompt, 6, 1, env)["tokens"]
    again = modelc_generate(modelc, path, prompt + first[:3], 3, 1, env)["tokens"]
    shutil.rmtree(path)
    if again != first[3:]:
        raise SystemExit("the tiny MIL decoder: %s, then from its first 3 tokens %s" % (first, again))
    print("tiny MIL decoder checked with modelc: %s" % first, flush=True)


# The same int4 weights for llama.cpp: GGUF, Q4_0.

def decoder_weights(package, shape):
    """The decoder's weights as the package stores them, found by the graph's structure (the converted
    and the MIL-built programs name their constants differently): ("embedding", w), then per layer
    ("input_norm", w), ("q", w) ... ("down", w), ("post_norm", w) in graph order, then ("norm", w),
    ("output", w). A projection's w is (int4 codes [out, in], fp16 scales [out, in / 32]) or an fp16 array."""
    import coremltools as ct
    from coremltools.converters.mil.frontend.milproto.load import load as load_program

    model = ct.models.MLModel(package, skip_model_load=True)
    spec = model.get_spec()
    operations = load_program(spec, spec.specificationVersion, model.weights_dir).functions["main"].operations

    def stored(var):
        op = var.op
        if op.op_type == "constexpr_blockwise_shift_scale":
            assert op.offset is None and op.data.val.shape[1] == op.scale.val.shape[1] * BLOCK, op.name
            return op.data.val, op.scale.val
        assert op.op_type == "const", op.name
        return op.outputs[0].val

    weights = []
    linear = ["q", "k", "v", "o", "gate", "up", "down"]
    for op in operations:
        if op.op_type == "gather" and op.x.shape == (shape["vocab"], shape["hidden"]):
            weights.append(("embedding", stored(op.x)))
        elif op.op_type == "linear":
            weights.append((linear[sum(n in linear for n, _ in weights) % len(linear)], stored(op.weight)))
        elif op.op_type == "mul" and op.y.val is not None and op.y.shape == (shape["hidden"],):
            weights.append(("norm", op.y.val))
    count = shape["layers"] * 9 + 3
    assert len(weights) == count, "%d weights, expected %d" % (len(weights), count)
    # The last projection is the LM head; the norms are each layer's two, then the final one.
    weights[-1] = ("output", weights[-1][1])
    names = iter(["input_norm", "post_norm"] * shape["layers"] + ["norm"])
    return [(next(names) if name == "norm" else name, w) for name, w in weights]


def q4_0(codes, scales):
    """GGML's Q4_0 blocks of int4 codes [rows, columns] in [-8, 7] with an fp16 scale per 32: per block
    the scale, then 16 bytes, element j in the low nibble and j + 16 in the high one, each code + 8."""
    rows, columns = codes.shape
    nibbles = (codes.astype(np.int16) + 8).astype(np.uint8).reshape(rows, columns // BLOCK, BLOCK)
    blocks = np.empty((rows, columns // BLOCK, 18), dtype=np.uint8)
    blocks[..., :2] = scales.astype("<f2").reshape(rows, -1, 1).view(np.uint8)
    blocks[..., 2:] = nibbles[..., :16] | (nibbles[..., 16:] << 4)
    return blocks.reshape(rows, -1)


def write_gguf(package, shape, path):
    """The package's decoder as a llama GGUF file at `path`: its int4 weights as Q4_0 with the same codes
    and scales (bit for bit the same values), fp16 ones as F16, the norms as F32. The query and key
    projections' rows are permuted from the half-split rotary layout the decoder uses to the interleaved
    one of llama.cpp's llama architecture (as llama.cpp's own converter does for Hugging Face models).
    The vocabulary is placeholder tokens: the bench feeds token ids."""
    import gguf

    heads, kv_heads, width = shape["heads"], shape["kv_heads"], shape["head_dim"]
    tensor_names = {"embedding": "token_embd.weight", "norm": "output_norm.weight", "output": "output.weight"}
    layer_names = {"input_norm": "attn_norm", "q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
                   "post_norm": "ffn_norm", "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}

    def interleaved(w, count):
        order = np.arange(count * width).reshape(count, 2, width // 2).swapaxes(1, 2).reshape(-1)
        return tuple(a[order] for a in w) if isinstance(w, tuple) else w[order]

    writer = gguf.GGUFWriter(path, "llama", use_temp_file=True)
    writer.add_context_length(shape["context"])
    writer.add_embedding_length(shape["hidden"])
    writer.add_block_count(shape["layers"])
    writer.add_feed_forward_length(shape["intermediate"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(width)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    writer.add_tokenizer_model("llama")
    vocab = shape["vocab"]
    writer.add_token_list(["<unk>", "<s>", "</s>"] + ["<t%d>" % i for i in range(3, vocab)])
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
                           + [gguf.TokenType.NORMAL] * (vocab - 3))
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    layer = -1
    for name, w in decoder_weights(package, shape):
        if name == "input_norm":
            layer += 1
        if name in ("q", "k"):
            w = interleaved(w, heads if name == "q" else kv_heads)
        tensor = tensor_names.get(name) or "blk.%d.%s.weight" % (layer, layer_names[name])
        if isinstance(w, tuple):
            writer.add_tensor(tensor, q4_0(*w), raw_dtype=gguf.GGMLQuantizationType.Q4_0)
        elif name.endswith("norm"):
            writer.add_tensor(tensor, w.astype(np.float32))
        else:
            writer.add_tensor(tensor, w.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def llama_generate(path, ids, new, threads):
    """Greedy decoding with llama.cpp (llama-cpp-python) on the GGUF file, timed as modelc times it;
    prints the same summary as a JSON line (run in the llama.cpp venv, in a process of its own)."""
    import llama_cpp

    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=path, n_ctx=PROMPT + new, n_batch=PROMPT, n_ubatch=PROMPT, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    load = time.perf_counter() - start

    def step(tokens):
        llm.eval(tokens)
        # The logits of the last token, the one row llama.cpp computes without logits_all.
        return int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(llm.n_vocab(),))))

    start = time.perf_counter()
    generated = [step(ids)]
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(new - 1):
        generated.append(step([generated[-1]]))
    decode = time.perf_counter() - start
    print(json.dumps({"load_s": load, "prefill_tps": len(ids) / prefill, "decode_tps": (new - 1) / decode,
                      "tokens": generated, "engine": "llama.cpp (llama-cpp-python %s)" % llama_cpp.__version__}))


def gguf_path(work, name):
    return os.path.join(work, "gguf", name + ".gguf")


def build(work, names, onnx, gguf, modelc):
    """Every model of `names` missing from `work`: with `onnx` their ONNX twins (but for the 7b), with
    `gguf` the int4 ones' GGUF twins."""
    for size in SHAPES:
        wanted = [n for n in names if size_of(n) == size]
        if not wanted:
            continue
        if size == "7b":
            if not os.path.exists(package_path(work, "7b-int4")):
                check_mil_generator(work, modelc)
                print("7b-int4: writing the MIL program (a few minutes, about 8 GB of memory)", flush=True)
                save_package(build_mil(SHAPES["7b"]), work, "7b-int4")
        else:
            build_torch(work, size, wanted, onnx)
    for name in names:
        if gguf and name.endswith("int4") and not os.path.exists(gguf_path(work, name)):
            start = time.perf_counter()
            partial = os.path.join(work, "partial", name + ".gguf")
            os.makedirs(os.path.dirname(partial), exist_ok=True)
            write_gguf(package_path(work, name), SHAPES[size_of(name)], partial)
            os.makedirs(os.path.dirname(gguf_path(work, name)), exist_ok=True)
            os.replace(partial, gguf_path(work, name))
            print("%s: GGUF written in %.0f s" % (name, time.perf_counter() - start), flush=True)


# Measurements.

def copy_bandwidth(processes, total=1 << 30, repeats=5):
    """Bytes read + written per second by `processes` processes each copying its share of a `total`-byte
    float64 array with numpy at the same moment (a barrier before each copy), best of `repeats`."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()

    def worker():
        source = np.ones(total // processes // 8)
        target = np.zeros_like(source)
        times = []
        for _ in range(repeats):
            barrier.wait()
            start = time.perf_counter()
            np.copyto(target, source)
            times.append(time.perf_counter() - start)
        results.put(times)

    workers = [context.Process(target=worker) for _ in range(processes)]
    for w in workers:
        w.start()
    times = [results.get() for _ in workers]
    for w in workers:
        w.join()
    slowest = [max(t[i] for t in times) for i in range(repeats)]
    return 2 * total / min(slowest)


def cpu_description():
    """The CPU's model name (lscpu) and which of the ISA extensions that matter here it has."""
    name = platform.processor() or "unknown"
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        name = re.search(r"^Model name:\s*(.+)$", text, re.M).group(1).strip()
    except (OSError, subprocess.CalledProcessError, AttributeError):
        pass
    with open("/proc/cpuinfo") as f:
        flags = set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())
    wanted = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"]
    return name, {flag: flag in flags for flag in wanted}


class RunFailed(Exception):
    def __init__(self, command, status, stderr):
        super().__init__("exit %d: %s" % (status, stderr.strip().splitlines()[-1] if stderr.strip() else "(no output)"))
        self.command, self.status, self.stderr = command, status, stderr


def timed(command, env=None):
    """Runs `command` under /usr/bin/time: its last line of output as JSON, with its peak RSS (rss_mb) and
    wall time added. (Not getrusage in the child: Linux carries the RSS high-water mark of the process
    that forked it across exec, so a child of this bench would report at least the bench's own.)"""
    with tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + command, capture_output=True,
                              text=True, env=env)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise RunFailed(command, done.returncode, done.stderr)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result.update(rss_mb=int(rss.read().split()[-1]) / 1024, wall_s=wall)
    return result


def modelc_generate(modelc, package, ids, new, threads, env):
    """One `modelc generate --json` in a fresh process: its summary, wall time and peak RSS."""
    summary = timed([modelc, "generate", package, "--input-ids", ",".join(map(str, ids)), "--max-new-tokens", str(new),
                     "--threads", str(threads), "--json"], env)
    return {"load_s": summary["load_ms"] / 1000, "prefill_tps": len(ids) / (summary["prefill_ms"] / 1000),
            "decode_tps": summary["decode_tokens_per_second"], "rss_mb": summary["rss_mb"], "wall_s": summary["wall_s"],
            "tokens": summary["tokens"]}


def onnxruntime_generate(directory, ids, new, threads):
    """Greedy decoding with onnxruntime on DIRECTORY/model.onnx (past / present caches), timed as modelc
    times it; prints the same summary as a JSON line (run in a process of its own)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(os.path.join(directory, "model.onnx"), options,
                                           providers=["CPUExecutionProvider"])
    load = time.perf_counter() - start
    kinds = {i.name: i for i in session.get_inputs()}
    mask_type = np.float16 if "float16" in kinds["causal_mask"].type else np.float32
    layers, _, kv_heads, _, width = kinds["past_keys"].shape
    keys = values = np.zeros((layers, 1, kv_heads, 0, width), dtype=np.float16)

    def step(tokens, keys, values):
        end = keys.shape[3] + len(tokens)
        mask = np.triu(np.full((1, 1, len(tokens), end), -np.inf, dtype=mask_type), end - len(tokens) + 1)
        logits, keys, values = session.run(None, {"input_ids": np.array([tokens], dtype=np.int64), "causal_mask": mask,
                                                  "past_keys": keys, "past_values": values})
        return int(logits[0, -1].argmax()), keys, values

    start = time.perf_counter()
    token, keys, values = step(ids, keys, values)
    prefill = time.perf_counter() - start
    generated = [token]
    start = time.perf_counter()
    for _ in range(new - 1):
        token, keys, values = step([token], keys, values)
        generated.append(token)
    decode = time.perf_counter() - start
    print(json.dumps({"load_s": load, "prefill_tps": len(ids) / prefill, "decode_tps": (new - 1) / decode,
                      "tokens": generated, "engine": "onnxruntime " + onnxruntime.__version__}))


ENGINES = {"onnxruntime": onnxruntime_generate, "llama.cpp": llama_generate}


def engine_run(python, engine, path, ids, new, threads):
    """One of ENGINES generating in a fresh process of `python` (this file run with --engine)."""
    return timed([python, os.path.abspath(__file__), "--engine", engine, "--engine-model", path, "--ids",
                  ",".join(map(str, ids)), "--new", str(new), "--threads", str(threads)])


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def leading_agreement(a, b):
    """How many leading tokens two greedy generations share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def measure(args, name, isa, bandwidths):
    """The rounds of one model at each thread count: modelc, onnxruntime and llama.cpp alternating."""
    work, env = args.work, dict(os.environ, MODELC_CACHE=os.path.join(args.work, "modelc-cache"))
    if isa != "native":
        env["MODELC_MAX_CPU_ISA"] = isa
    package = package_path(work, name)
    new = NEW_7B if name.startswith("7b") else NEW
    ids = np.random.default_rng(SEED).integers(0, SHAPES[size_of(name)]["vocab"], PROMPT).tolist()
    others = {}
    if not args.skip_onnxruntime and not name.startswith("7b"):
        others["onnxruntime"] = (sys.executable, onnx_path(work, name))
    if args.llama_python and name.endswith("int4"):
        others["llama.cpp"] = (args.llama_python, gguf_path(work, name))
    stored = weight_bytes(package)
    # Bytes a decode step reads at the middle of the generated tokens: every weight but the embedding, the caches.
    per_token = stored - embedding_bytes(name) + cache_bytes(name, PROMPT + new // 2)
    rows = []
    start = time.perf_counter()
    # The first run compiles the package into modelc's cache; its wall time is the cold start.
    first = modelc_generate(args.modelc, package, ids, 1, max(args.threads), env)
    print("%s: first run (compiles into the cache) %.1f s wall" % (name, first["wall_s"]), flush=True)
    for threads in args.threads:
        mine, theirs = [], {engine: [] for engine in others}
        for _ in range(args.rounds):
            mine.append(modelc_generate(args.modelc, package, ids, new, threads, env))
            for engine, (python, path) in others.items():
                theirs[engine].append(engine_run(python, engine, path, ids, new, threads))
        decode = median(mine, "decode_tps")
        row = {"model": name, "isa": isa, "threads": threads, "stored_bytes": stored, "bytes_per_token": per_token,
               "prompt_tokens": PROMPT, "new_tokens": new, "first_run_wall_s": first["wall_s"],
               "load_s": median(mine, "load_s"), "rss_mb": max(r["rss_mb"] for r in mine),
               "prefill_tps": median(mine, "prefill_tps"), "decode_tps": decode, "runs": mine}
        row["rss_over_stored"] = row["rss_mb"] * (1 << 20) / stored
        for engine, runs in theirs.items():
            row[engine] = {"engine": runs[0]["engine"], "load_s": median(runs, "load_s"),
                           "rss_mb": max(r["rss_mb"] for r in runs), "prefill_tps": median(runs, "prefill_tps"),
                           "decode_tps": median(runs, "decode_tps"), "runs": runs}
            row[engine]["decode_ratio"] = decode / row[engine]["decode_tps"]
            row[engine]["decode_paired"] = statistics.median(m["decode_tps"] / t["decode_tps"] for m, t in zip(mine, runs))
            row[engine]["prefill_ratio"] = row["prefill_tps"] / row[engine]["prefill_tps"]
            # fp16 against fp32 arithmetic (and onnxruntime's own int4 rounding) part random-weight
            # generations sooner or later; a wrong graph parts them at once.
            row[engine]["same_leading_tokens"] = leading_agreement(mine[0]["tokens"], runs[0]["tokens"])
        set_limits(row, bandwidths)
        rows.append(row)
        print_row(row, flush=True)
    print("%s: measured in %.0f s" % (name, time.perf_counter() - start), flush=True)
    return rows


def set_limits(row, bandwidths):
    """The row's physical limit (tokens/s) for `bandwidths`, and each engine's decode as a fraction of it."""
    # More threads read at least as fast as one.
    ideal = max(b for n, b in bandwidths.items() if n <= row["threads"]) / row["bytes_per_token"]
    row["limit_tps"] = ideal
    row["limit_fraction"] = row["decode_tps"] / ideal
    for engine in ENGINES:
        if engine in row:
            row[engine]["limit_fraction"] = row[engine]["decode_tps"] / ideal


COLUMNS = [("model", "%-10s"), ("thr", "%3s"), ("stored_MB", "%9s"), ("load_s", "%6s"), ("RSS_MB", "%7s"),
           ("RSS/st", "%6s"), ("prefill", "%8s"), ("decode", "%7s"), ("limit", "%5s"),
           ("ort_pf", "%7s"), ("ort_dec", "%7s"), ("vs_ort", "%6s"), ("paired", "%6s"), ("ort_RSS", "%7s"),
           ("cpp_pf", "%7s"), ("cpp_dec", "%7s"), ("vs_cpp", "%6s"), ("paired", "%6s"), ("cpp_RSS", "%7s"),
           ("cpp_lim", "%7s"), ("same", "%5s")]
HEADER = " ".join(form % title for title, form in COLUMNS)


def print_row(row, flush=False):
    def engine(key):
        found = row.get(key)
        if not found:
            return ["-"] * 5
        return ["%.1f" % found["prefill_tps"], "%.2f" % found["decode_tps"], "%.2f" % found["decode_ratio"],
                "%.2f" % found["decode_paired"], "%.0f" % found["rss_mb"]]

    same = "/".join(str(row[k]["same_leading_tokens"]) if k in row else "-" for k in ("onnxruntime", "llama.cpp"))
    cells = [row["model"], str(row["threads"]), "%.0f" % (row["stored_bytes"] / (1 << 20)), "%.2f" % row["load_s"],
             "%.0f" % row["rss_mb"], "%.2f" % row["rss_over_stored"], "%.1f" % row["prefill_tps"],
             "%.2f" % row["decode_tps"], "%.0f%%" % (100 * row["limit_fraction"])]
    cpp = row.get("llama.cpp")
    cells += engine("onnxruntime") + engine("llama.cpp") + ["%.0f%%" % (100 * cpp["limit_fraction"]) if cpp else "-", same]
    print(" ".join(form % cell for (_, form), cell in zip(COLUMNS, cells)), flush=flush)


def main():
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--modelc", default=os.path.join(ROOT, ".build", "release", "modelc"), help="the modelc binary")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the engines per model and thread count")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--isas", default="native",
                        help="one table per value: modelc's kernels capped by MODELC_MAX_CPU_ISA (native: not capped)")
    parser.add_argument("--skip-onnxruntime", action="store_true", help="no onnxruntime (no ONNX export either)")
    parser.add_argument("--llama-python", help="the python of a venv with llama-cpp-python: llama.cpp on the int4 "
                                               "models (written as GGUF Q4_0); without it, no llama.cpp")
    parser.add_argument("--build-only", action="store_true", help="build the models, measure nothing")
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "bench-llm"), help="where the models are built")
    parser.add_argument("--engine", choices=sorted(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--engine-model", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--new", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    if args.engine:
        ENGINES[args.engine](args.engine_model, [int(i) for i in args.ids.split(",")], args.new, args.threads[0])
        return 0
    names = args.models.split(",")
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error("unknown models %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    if not os.access(args.modelc, os.X_OK):
        parser.error("%s is not an executable (make bench-llm builds it)" % args.modelc)

    phases = {}
    start = time.perf_counter()
    build(args.work, names, not args.skip_onnxruntime, args.llama_python is not None, args.modelc)
    phases["build_s"] = time.perf_counter() - start
    if args.build_only:
        return 0
    cpu, flags = cpu_description()
    start = time.perf_counter()
    bandwidths = {1: copy_bandwidth(1), 2: copy_bandwidth(2)}
    phases["bandwidth_s"] = time.perf_counter() - start
    results = {"cpu": cpu, "flags": flags, "bandwidth_bytes_per_s": bandwidths, "rounds": args.rounds,
               "tables": {}, "errors": [], "phases": phases}
    print("CPU: %s, %d cores; %s" % (cpu, os.cpu_count(), " ".join("%s %s" % (f, "yes" if v else "no")
                                                                   for f, v in flags.items())))
    print("memory bandwidth (numpy copy of 1 GiB, read + write, best of 5): %.1f GB/s in one process "
          "(single-threaded), %.1f GB/s in two at once" % (bandwidths[1] / 1e9, bandwidths[2] / 1e9), flush=True)
    for isa in args.isas.split(","):
        rows = []
        start = time.perf_counter()
        print("\nmodelc's kernels: %s; prompt %d tokens, %d new (7b: %d); medians over %d rounds" % (
            "as the CPU allows" if isa == "native" else "MODELC_MAX_CPU_ISA=" + isa, PROMPT, NEW, NEW_7B, args.rounds),
            flush=True)
        print(HEADER, flush=True)
        for name in names:
            try:
                rows += measure(args, name, isa, bandwidths)
            except RunFailed as failure:
                print("%s: FAILED (%s)\n  command: %s" % (name, failure, " ".join(failure.command)), flush=True)
                results["errors"].append({"model": name, "isa": isa, "command": failure.command,
                                          "status": failure.status, "stderr": failure.stderr[-4000:]})
        results["tables"][isa] = rows
        phases["measure_%s_s" % isa] = time.perf_counter() - start
        # The copy again after the rows; the better of the two measures the machine.
        later = {1: copy_bandwidth(1), 2: copy_bandwidth(2)}
        print("memory bandwidth again after the rows: %.1f GB/s in one process, %.1f GB/s in two (the better of each "
              "kept for the limits)" % (later[1] / 1e9, later[2] / 1e9), flush=True)
        results.setdefault("bandwidth_after_bytes_per_s", {})[isa] = later
        bandwidths = {n: max(bandwidths[n], later[n]) for n in bandwidths}
        results["bandwidth_bytes_per_s"] = bandwidths
        for row in rows:
            set_limits(row, bandwidths)
        print("\n%s, %s; modelc's kernels: %s" % (cpu, ", ".join(f for f, v in flags.items() if v), isa))
        print(HEADER)
        for row in rows:
            print_row(row)
    print("\nprefill (pf), decode (dec): tokens/s (prefill: %d tokens / its time; decode: the tokens after the first "
          "/ their time); load_s: modelc's load_ms (its cache filled); RSS/st: peak RSS / stored weight bytes; limit: "
          "modelc's decode as a fraction of the bandwidth / bytes per token (the stored weights but the embedding, and "
          "the caches), one process' bandwidth for 1 thread, the larger of one and two processes' for more; ort: onnxruntime; cpp: llama.cpp; "
          "vs_: modelc / the engine, decode tokens/s of the medians; paired: the median of the rounds' own ratios; "
          "same: the leading greedy tokens modelc shares with onnxruntime / llama.cpp" % PROMPT)
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print("wrote %s" % os.path.join(args.work, "results.json"))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
