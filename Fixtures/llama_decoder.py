#!/usr/bin/env python3
"""Generate Fixtures/Models/LlamaDecoder{FP16,Int4,Int8}: a tiny Llama-shaped decoder in Apple's
documented on-device form (key/value caches as Core ML states), fp16 and with int4 / int8 weights,
and the logits PyTorch computes in float64 for a prefill, one-token steps and greedy generation.

Usage (needs torch: the zoo venv, `make zoo` makes it; make test does not):
    llama_decoder.py [--out DIR]   write DIR/Models/LlamaDecoder{FP16,Int4,Int8}.{mlpackage,json}

The decoder is plain PyTorch: token embedding; 2 layers of RMSNorm, rotary position embedding,
grouped-query attention (4 query heads, 2 key/value heads of width 16) through
scaled_dot_product_attention with an additive float mask, and a SwiGLU MLP; a final RMSNorm and
an LM head. Seeded weights, 96 tokens, width 64, context 32. The form is the one of Apple's Llama
example: inputs `inputIds` int32 [1, q] and `causalMask` fp16 [1, 1, q, end] (0 where a position
may be attended, -inf where not), states `keyCache` / `valueCache` fp16
[layers, 1, kv heads, context, head width] updated by slice assignment, output `logits` [1, q, vocab];
the caches hold positions [0, end - q) before a call, whose tokens sit at end - q ..< end.

Three programs from one traced decoder, converted for iOS18 computing in fp16:
    LlamaDecoderFP16   as converted
    LlamaDecoderInt4   weights quantized by ct.optimize.coreml to int4 in blocks of 32
                       (constexpr_blockwise_shift_scale); the PyTorch weights are put on that
                       grid first, so the quantization is lossless
    LlamaDecoderInt8   weights quantized to int8 per output channel (not lossless)

Each JSON lists the predictions to make in order on one state (`begin`, `end`: the test builds
the mask; `inputs`: inputIds; `logits`): a prefill of the 5-token prompt, then 3 one-token steps
feeding the greedy tokens; and `greedy`, the 6 tokens greedy generation appends to `prompt`. The
logits are PyTorch's float64 full forward over all the tokens at once, on the weights as the saved
program defines them (read back from the package) and with keys and values rounded to fp16 as the
states hold them, so the only difference a correct engine shows is its own fp16 arithmetic.
"""

import argparse
import collections
import copy
import json
import os
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import torch
import coremltools as ct
import coremltools.optimize.coreml as cto
from coremltools.converters.mil.frontend.milproto.load import load as load_program
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.types.symbolic import is_symbolic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Scripts"))
from generate import save_ml_package  # noqa: E402
from zoo import TOLERANCE, float16_error, rounded  # noqa: E402

VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, CONTEXT = 96, 64, 2, 4, 2, 16, 128, 32
PROMPT, STEPS, GENERATED = 5, 3, 6
BLOCK = 32
SEED = 1
# RMSNorm's epsilon, 1e-5 as fp16 holds it: the value the program stores, so the reference's too.
EPS = float(np.float16(1e-5))
INT4 = cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=BLOCK)
INT8 = cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8", granularity="per_channel")


class RMSNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Not all ones, so that a norm whose weight is ignored shows.
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(HIDDEN))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rotate(x, cos, sin):
    """Rotary embedding, Llama's half-split convention."""
    half = HEAD_DIM // 2  # static: a traced x.shape[-1] // 2 does not convert
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_norm = RMSNorm()
        self.q_proj = torch.nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = torch.nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_norm = RMSNorm()
        self.gate_proj = torch.nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = torch.nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = torch.nn.Linear(INTERMEDIATE, HIDDEN, bias=False)


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm()
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
        # Tables of every position, sliced at past ..< end: constants the program stores in fp16,
        # so the reference can use them as stored (angles computed in fp16 would not be).
        inverse = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
        angles = torch.arange(CONTEXT, dtype=torch.float64)[:, None] * inverse
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        shape = (LAYERS, 1, KV_HEADS, CONTEXT, HEAD_DIM)
        self.register_buffer("keyCache", torch.zeros(shape, dtype=torch.float16))
        self.register_buffer("valueCache", torch.zeros(shape, dtype=torch.float16))

    def forward(self, inputIds, causalMask):  # noqa: N803 - the names are the model's feature names
        tokens = inputIds.shape[-1]
        end = causalMask.shape[-1]
        past = end - tokens
        cos, sin = self.cos[past:end], self.sin[past:end]
        h = self.embed(inputIds)
        for i, layer in enumerate(self.layers):
            x = layer.input_norm(h)
            q = layer.q_proj(x).view(1, tokens, HEADS, HEAD_DIM).transpose(1, 2)
            k = layer.k_proj(x).view(1, tokens, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = layer.v_proj(x).view(1, tokens, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            # .half(): the states hold fp16, and so does the float64 reference (its caches are
            # float64 but receive fp16 values).
            self.keyCache[i, :, :, past:end, :] = k.half()
            self.valueCache[i, :, :, past:end, :] = v.half()
            keys = self.keyCache[i, :, :, :end, :].to(q.dtype).repeat_interleave(HEADS // KV_HEADS, dim=1)
            values = self.valueCache[i, :, :, :end, :].to(q.dtype).repeat_interleave(HEADS // KV_HEADS, dim=1)
            a = torch.nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=causalMask)
            h = h + layer.o_proj(a.transpose(1, 2).reshape(1, tokens, HEADS * HEAD_DIM))
            x = layer.post_norm(h)
            h = h + layer.down_proj(torch.nn.functional.silu(layer.gate_proj(x)) * layer.up_proj(x))
        return self.lm_head(self.norm(h))


class FullForward(torch.nn.Module):
    """The decoder over a whole token sequence at once ([1, n] ids → [1, n, vocab] logits)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, ids):
        n = ids.shape[-1]
        return self.decoder(ids, causal_mask(n, n, self.decoder.cos.dtype))


def causal_mask(tokens, end, dtype=torch.float32):
    """[1, 1, tokens, end]: 0 where token t (at position end - tokens + t) may attend, -inf after it."""
    return torch.full((1, 1, tokens, end), float("-inf"), dtype=dtype).triu(end - tokens + 1)


def on_int4_grid(weight):
    """`weight` [out, in] with each block of BLOCK along the input axis made k × 2^e, k an integer in
    [-7, 7], the block's largest |value| exactly 7 × 2^e: coremltools' linear_symmetric int4 scale,
    max|w| / 7, is then 2^e exactly and every value quantizes to k without rounding."""
    w = weight.detach().numpy().astype(np.float64).reshape(weight.shape[0], -1, BLOCK)
    largest = np.abs(w).argmax(axis=-1)[..., None]
    scale = 2.0 ** np.round(np.log2(np.take_along_axis(np.abs(w), largest, -1) / 7))
    k = np.clip(np.round(w / scale), -7, 7)
    np.put_along_axis(k, largest, 7 * np.sign(np.take_along_axis(w, largest, -1)), -1)
    return torch.from_numpy((k * scale).reshape(weight.shape).astype(np.float32))


def convert(decoder, example):
    """The fp16 program, declared as Apple's Llama example declares it (its logits fp16 too)."""
    with torch.no_grad():
        traced = torch.jit.trace(decoder, (example, causal_mask(example.shape[-1], example.shape[-1])), check_trace=False)
    tokens, end = ct.RangeDim(1, CONTEXT), ct.RangeDim(1, CONTEXT)
    inputs = [ct.TensorType(name="inputIds", shape=(1, tokens), dtype=np.int32),
              ct.TensorType(name="causalMask", shape=(1, 1, tokens, end), dtype=np.float16)]
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=tuple(decoder.keyCache.shape), dtype=np.float16), name=name)
              for name in ("keyCache", "valueCache")]
    return ct.convert(traced, inputs=inputs, states=states, outputs=[ct.TensorType(name="logits", dtype=np.float16)],
                      convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                      compute_precision=ct.precision.FLOAT16, skip_model_load=True)


def saved_program(path):
    """The MIL program of the package at `path`, as coremltools reads it back from the files."""
    model = ct.models.MLModel(path, skip_model_load=True)
    spec = model.get_spec()
    return spec, load_program(spec, spec.specificationVersion, model.weights_dir)


def stored_weights(program):
    """Every float tensor constant of the program by name, as float64: fp16 constants as they are,
    quantized ones as constexpr_blockwise_shift_scale defines them, data × scale (each scale
    repeated over its block) in the scale's type, fp16, computed here with numpy; and the data type
    of each quantized one."""
    values, quantized = {}, {}
    for op in program.functions["main"].operations:
        if op.op_type == "const" and types.is_float(op.outputs[0].dtype) and op.outputs[0].rank > 0:
            values[op.name] = np.asarray(op.outputs[0].val, dtype=np.float64)
        elif op.op_type == "constexpr_blockwise_shift_scale":
            assert op.offset is None, op.name  # linear_symmetric: no zero point
            data, scale = op.data.val.astype(np.float64), op.scale.val
            for axis, (size, blocks) in enumerate(zip(data.shape, scale.shape)):
                scale = np.repeat(scale, size // blocks, axis=axis)
            values[op.name] = (data * scale.astype(np.float64)).astype(scale.dtype).astype(np.float64)
            quantized[op.name] = types.builtin_to_string(op.data.dtype)
    return values, quantized


def weights(module):
    """The module's parameters and constant buffers (not its caches) by name."""
    return [(name, tensor) for name, tensor in list(module.named_parameters()) + list(module.named_buffers())
            if name not in ("keyCache", "valueCache")]


def stored_value(values, name):
    """The program's value of the PyTorch parameter or buffer `name` (coremltools names it so)."""
    const = name.replace(".", "_") + "_to_fp16"
    stored = values.get(const + "_quantized", values.get(const))
    assert stored is not None, name
    return stored


def reference_of(decoder, values):
    """The decoder in float64 on the program's weights (its caches float64, holding fp16 values)."""
    reference = copy.deepcopy(decoder).double()
    with torch.no_grad():
        for name, tensor in weights(reference):
            tensor.copy_(torch.from_numpy(stored_value(values, name)))
    return reference


def check_description(spec, program):
    """The features and states have exactly the names, types and shapes of Apple's decoder form."""
    description = spec.description
    print(description)
    features = {f.name: f.type.multiArrayType for f in description.input}
    assert list(features) == ["inputIds", "causalMask"]
    assert features["inputIds"].dataType == ct.proto.FeatureTypes_pb2.ArrayFeatureType.INT32
    assert features["causalMask"].dataType == ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16
    bounds = lambda array: [(r.lowerBound, r.upperBound) for r in array.shapeRange.sizeRanges]
    assert bounds(features["inputIds"]) == [(1, 1), (1, CONTEXT)]
    assert bounds(features["causalMask"]) == [(1, 1), (1, 1), (1, CONTEXT), (1, CONTEXT)]
    assert [s.name for s in description.state] == ["keyCache", "valueCache"]
    for state in description.state:
        assert list(state.type.stateType.arrayType.shape) == [LAYERS, 1, KV_HEADS, CONTEXT, HEAD_DIM]
        assert state.type.stateType.arrayType.dataType == ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16
    assert [o.name for o in description.output] == ["logits"]
    main = program.functions["main"]
    kinds = {name: (types.builtin_to_string(var.dtype), var.shape) for name, var in main.inputs.items()}
    kinds.update({var.name: (types.builtin_to_string(var.dtype), var.shape) for var in main.outputs})
    print("program features:", kinds)
    ids, mask, logits = kinds["inputIds"], kinds["causalMask"], kinds["logits"]
    assert ids[0] == "int32" and ids[1][0] == 1 and is_symbolic(ids[1][1])
    # (Read back, every flexible dimension is a symbol of its own.)
    assert mask[0] == "fp16" and mask[1][:2] == (1, 1) and all(map(is_symbolic, mask[1][2:]))
    assert logits[0] == "fp16" and logits[1][0] == 1 and is_symbolic(logits[1][1]) and logits[1][2] == VOCAB
    for name in ("keyCache", "valueCache"):
        assert kinds[name] == ("fp16", (LAYERS, 1, KV_HEADS, CONTEXT, HEAD_DIM)), kinds[name]


def greedy(full_forward, prompt, count):
    """`count` tokens appended by greedy decoding (a full forward per token), and each choice's margin
    over the runner-up and its logit."""
    tokens, margins = prompt, []
    with torch.no_grad():
        for _ in range(count):
            last = full_forward(tokens)[0, -1].numpy()
            second, first = np.sort(last)[-2:]
            margins.append((first - second, first))
            tokens = torch.cat((tokens, torch.tensor([[int(last.argmax())]])), dim=1)
    return tokens[0, prompt.shape[1]:].tolist(), margins


def stepwise(decoder, tokens, spans):
    """The logits of `spans` predicted in order on one state (the decoder's caches, zeroed first)."""
    decoder.keyCache.zero_()
    decoder.valueCache.zero_()
    with torch.no_grad():
        return [decoder(tokens[:, b:e], causal_mask(e - b, e, decoder.cos.dtype)).double().numpy() for b, e in spans]


def relative(got, reference):
    """The largest |got - reference| / max(1, |reference|): the tests' measure."""
    return float(np.max(np.abs(got - reference) / np.maximum(1, np.abs(reference))))


def fp16_tolerance(decoder):
    """The tolerance, relative to max(1, |reference|): the zoo's for fp16 programs, 5e-3, or twice how
    far rounding the weights to fp16 alone moves the logits over the whole context if that is more
    (Scripts/zoo.py): an engine computing in fp16 rounds every intermediate value likewise."""
    sequence = torch.randint(0, VOCAB, (1, CONTEXT))
    with torch.no_grad():
        unrounded = FullForward(copy.deepcopy(decoder).double())(sequence).numpy()
    own = float16_error(FullForward(decoder), [sequence.numpy().astype(np.int32)], [unrounded])
    print("fp16 storage moves the logits by %.3g" % own)
    return max(TOLERANCE["fp16"], float("%.2g" % (2 * own)))


def check_weights(name, decoder, values, exact):
    """Prints how far the program's weights are from PyTorch's; with `exact`, asserts that each is the
    PyTorch weight rounded to fp16 (so for the on-grid weights, the PyTorch weight itself)."""
    moved = 0.0
    for tensor_name, tensor in weights(decoder):
        stored, given = stored_value(values, tensor_name), tensor.detach()
        moved = max(moved, float(np.max(np.abs(stored - given.double().numpy()))))
        assert not exact or np.array_equal(stored, given.half().double().numpy()), tensor_name
    print("%s: the program's weights differ from PyTorch's by at most %.3g%s" % (
        name, moved, "; each is the PyTorch weight rounded to fp16" if exact else ""))


def write_variant(name, model, decoder, prompt, tolerance, out):
    path = os.path.join(out, name + ".mlpackage")
    save_ml_package(model, path)
    spec, program = saved_program(path)
    check_description(spec, program)
    counts = collections.Counter(op.op_type for op in program.functions["main"].operations)
    print("%s op types: %s" % (name, dict(sorted(counts.items()))))
    values, quantized = stored_weights(program)
    print("%s quantized weights: %s" % (name, quantized))
    # Quantized: the embedding, the LM head and 5 Linear weights a layer (all but k_proj / v_proj).
    expected = {"LlamaDecoderFP16": set(), "LlamaDecoderInt4": {"int4"}, "LlamaDecoderInt8": {"int8"}}[name]
    assert set(quantized.values()) == expected and len(quantized) == (5 * LAYERS + 2 if expected else 0), quantized
    # fp16 storage and the int4 quantization keep the on-grid weights exactly (the norm weights and
    # the rotary tables, not on the grid, are rounded to fp16 like any fp16 constant); int8 does not.
    check_weights(name, decoder, values, exact=expected != {"int8"})
    reference = reference_of(decoder, values)

    generated, margins = greedy(FullForward(reference), prompt, GENERATED)
    for step, (margin, top) in enumerate(margins):
        print("%s greedy step %d: token %d, top-2 logit gap %.4f (logit %.3f)" % (name, step, generated[step], margin, top))
        # Any engine within the tolerance picks the same token.
        assert margin >= max(1e-2, 2 * tolerance * max(1, abs(top))), (step, margin)
    tokens = torch.cat((prompt, torch.tensor([generated[:STEPS]])), dim=1)
    spans = [(0, PROMPT)] + [(PROMPT + i, PROMPT + i + 1) for i in range(STEPS)]
    with torch.no_grad():
        full = FullForward(reference)(tokens).numpy()
    # The steps on one state in float64 give the full forward (the cache logic is right), and
    # PyTorch computing in float16, one more fp16 engine, stays within the tolerance.
    exact = relative(np.concatenate(stepwise(reference, tokens, spans), axis=1), full)
    half = relative(np.concatenate(stepwise(copy.deepcopy(reference).half(), tokens, spans), axis=1), full)
    print("%s: steps against the full forward: float64 %.2g, PyTorch float16 %.2g" % (name, exact, half))
    assert exact < 1e-9 and half < tolerance, (exact, half)

    stored_as = {"LlamaDecoderFP16": "fp16 constants",
                 "LlamaDecoderInt4": "int4 data x per-block scale for the quantized weights, fp16 constants for the others",
                 "LlamaDecoderInt8": "int8 data x per-channel scale rounded to fp16 (as constexpr_blockwise_shift_scale "
                                     "defines it) for the quantized weights, fp16 constants for the others"}[name]
    document = {"reference": "PyTorch %s float64, the decoder's full forward over all tokens, on the weights as stored "
                             "in the program (%s), with keys and values rounded to fp16 as the states hold them" % (
                                 torch.__version__.split("+")[0], stored_as),
                "tolerance": tolerance, "context": CONTEXT, "vocab": VOCAB, "prompt": prompt[0].tolist(), "greedy": generated,
                "predictions": [{"begin": b, "end": e, "inputs": {"inputIds": tokens[:, b:e].tolist()},
                                 "logits": rounded(full[:, b:e])} for b, e in spans]}
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(root, file)) for root, _, files in os.walk(path) for file in files)
    print("wrote %s (%d bytes) and %s.json" % (path, size, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE)
    out = os.path.join(parser.parse_args().out, "Models")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    decoder = Decoder().eval()
    prompt = torch.randint(0, VOCAB, (1, PROMPT))
    # Measured before the weights go on the int4 grid, which fp16 holds exactly.
    tolerance = fp16_tolerance(decoder)
    print("tolerance %g" % tolerance)
    # One set of weights for the three programs, on the int4 grid. The quantizer's default
    # weight_threshold (more than 2048 values) takes the embedding (a gather's constant, blocks
    # along its width) and every Linear weight but k_proj / v_proj (32 x 64 = 2048 values).
    with torch.no_grad():
        for module in decoder.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                module.weight.copy_(on_int4_grid(module.weight))
    fp16 = convert(decoder, prompt)
    write_variant("LlamaDecoderFP16", fp16, decoder, prompt, tolerance, out)
    for name, config in (("LlamaDecoderInt4", INT4), ("LlamaDecoderInt8", INT8)):
        quantized = cto.linear_quantize_weights(fp16, cto.OptimizationConfig(global_config=config))
        write_variant(name, quantized, decoder, prompt, tolerance, out)


if __name__ == "__main__":
    main()
