#!/usr/bin/env python3
"""Generate Fixtures/Models/StatefulDecoder: a tiny GPT-2-shaped decoder whose key/value caches are
Core ML states, and the logits PyTorch computes in float64 for a prefill and two one-token steps.

Usage (needs torch and transformers: the zoo venv, `make zoo` makes it; make test does not):
    stateful_decoder.py [--out DIR]   write DIR/Models/StatefulDecoder.{mlpackage,json}

The decoder is the one the transformer bench times at GPT-2-small size (`kv_decoders` in
Scripts/bench_transformers.py: caches registered as buffers and updated in forward, converted
with ct.StateType, iOS18), here 2 layers of width 32 with 4 heads, 64 tokens, caches of 16
positions, seeded weights. The JSON lists the predictions to make in order on one state:
`inputs` (input_ids, position_ids, causal_mask) and `logits`, the logits of the same decoder's
full forward over all the tokens at once, computed by PyTorch in float64 (its caches hold
float16, as the states do: coremltools 9.0 makes states fp16 only), at the positions predicted.
So a test checks that a sequence of steps on the state equals the full forward.
"""

import argparse
import copy
import json
import os
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import torch
import transformers
import coremltools as ct

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Scripts"))
from generate import save_ml_package  # noqa: E402
from bench_transformers import causal_mask, kv_decoders  # noqa: E402

CACHE = 16
PREFIX = 5
STEPS = 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=HERE)
    out = parser.parse_args().out
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=32, use_cache=False)
    lm = transformers.GPT2LMHeadModel(config).eval()
    stateful, _ = kv_decoders(lm, CACHE)
    tokens = rng.integers(0, config.vocab_size, (1, PREFIX + STEPS)).astype(np.int32)

    def feed(begin, end):
        return {"input_ids": tokens[:, begin:end], "position_ids": np.arange(begin, end, dtype=np.int32)[None],
                "causal_mask": causal_mask(end - begin, end)}

    predictions = [feed(0, PREFIX)] + [feed(PREFIX + i, PREFIX + i + 1) for i in range(STEPS)]
    as_torch = lambda f: tuple(torch.from_numpy(f[k].astype(np.int64) if f[k].dtype == np.int32 else f[k])
                               for k in ("input_ids", "position_ids", "causal_mask"))
    with torch.no_grad():
        traced = torch.jit.trace(stateful, as_torch(predictions[0]), check_trace=False)
        reference, _ = kv_decoders(copy.deepcopy(lm).double(), CACHE)
        everything = feed(0, PREFIX + STEPS)
        everything["causal_mask"] = everything["causal_mask"].astype(np.float64)
        full = reference(*as_torch(everything)).numpy()
    length, end = ct.RangeDim(1, CACHE, default=PREFIX), ct.RangeDim(1, CACHE, default=PREFIX)
    inputs = [ct.TensorType(name="input_ids", shape=(1, length), dtype=np.int32),
              ct.TensorType(name="position_ids", shape=(1, length), dtype=np.int32),
              ct.TensorType(name="causal_mask", shape=(1, 1, length, end), dtype=np.float32)]
    width = config.n_embd // config.n_head
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=(1, config.n_head, CACHE, width), dtype=np.float16),
                           name="%s_%d" % (kind, i)) for i in range(config.n_layer) for kind in ("keys", "values")]
    model = ct.convert(traced, inputs=inputs, states=states, outputs=[ct.TensorType(name="logits")], convert_to="mlprogram",
                       compute_precision=ct.precision.FLOAT32, minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
    os.makedirs(os.path.join(out, "Models"), exist_ok=True)
    save_ml_package(model, os.path.join(out, "Models", "StatefulDecoder.mlpackage"))
    cases, begin = [], 0
    for prediction in predictions:
        end_ = begin + prediction["input_ids"].shape[1]
        cases.append({"inputs": {k: v.tolist() for k, v in prediction.items()},
                      "logits": full[:, begin:end_].astype(float).tolist()})
        begin = end_
    document = {"reference": "PyTorch %s float64, the decoder's full forward (transformers %s GPT2LMHeadModel weights)" % (
                    torch.__version__.split("+")[0], transformers.__version__),
                "tolerance": 1e-5, "predictions": cases}
    with open(os.path.join(out, "Models", "StatefulDecoder.json"), "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
