#!/usr/bin/env python3
"""Build modelc's model zoo: Hugging Face transformers architectures from tiny configs.

Usage:
    zoo.py [--out DIR] [--only NAME]   write DIR/NAME.mlpackage and DIR/NAME.json
                                       (default DIR: Fixtures/Parity/Zoo)

Each model is built from a small config with seeded random weights (nothing is downloaded),
traced with torch.jit.trace and converted by coremltools' ct.convert to an ML program, once
computing in float32 and once in float16. The references are the same PyTorch model run in
float64 on the same inputs. The JSON files use the format of Fixtures/Parity (the runtime must
give every output within `tolerance` relative to max(1, |reference|)).

Needs torch and transformers (Scripts/zoo-requirements.txt, `make zoo`); `make test` only reads
the committed results.
"""

import argparse
import json
import os
import sys
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")

import numpy as np
import torch
import transformers
import coremltools as ct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Fixtures"))
from generate import save_ml_package  # noqa: E402

REFERENCE = "PyTorch %s float64 (transformers %s), same weights" % (torch.__version__.split("+")[0], transformers.__version__)
MODELS = []


def model(name):
    def register(function):
        MODELS.append((name, function))
        return function
    return register


class Outputs(torch.nn.Module):
    """Returns the named tensor of a transformers model's output as a plain tensor."""

    def __init__(self, inner, key):
        super().__init__()
        self.inner, self.key = inner, key

    def forward(self, x):
        return getattr(self.inner(x, return_dict=True), self.key)


def token_input(rng, vocab, lengths):
    return [rng.integers(0, vocab, (1, n)).astype(np.int32) for n in lengths]


@model("bert")
def bert(rng):
    config = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    module = Outputs(transformers.BertModel(config, add_pooling_layer=False), "last_hidden_state")
    inputs = token_input(rng, 96, [12, 5, 31])
    spec = ct.TensorType(name="input_ids", shape=(1, ct.RangeDim(1, 64, default=12)), dtype=np.int32)
    return module, inputs, spec, "input_ids", "last_hidden_state"


@model("distilbert")
def distilbert(rng):
    config = transformers.DistilBertConfig(vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                           max_position_embeddings=64)
    module = Outputs(transformers.DistilBertModel(config), "last_hidden_state")
    inputs = token_input(rng, 96, [9, 20])
    spec = ct.TensorType(name="input_ids", shape=(1, ct.RangeDim(1, 64, default=9)), dtype=np.int32)
    return module, inputs, spec, "input_ids", "last_hidden_state"


@model("gpt2")
def gpt2(rng):
    config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    module = Outputs(transformers.GPT2LMHeadModel(config), "logits")
    inputs = token_input(rng, 96, [16, 3, 40])
    spec = ct.TensorType(name="input_ids", shape=(1, ct.RangeDim(1, 64, default=16)), dtype=np.int32)
    return module, inputs, spec, "input_ids", "logits"


@model("vit")
def vit(rng):
    config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64, num_labels=10)
    module = Outputs(transformers.ViTForImageClassification(config), "logits")
    inputs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(2)]
    spec = ct.TensorType(name="pixel_values", shape=(1, 3, 32, 32))
    return module, inputs, spec, "pixel_values", "logits"


def build(name, factory, out):
    torch.manual_seed(sum(map(ord, name)))
    rng = np.random.default_rng(sum(map(ord, name)))
    module, inputs, spec, input_name, output_name = factory(rng)
    module.eval()
    example = torch.from_numpy(inputs[0].astype(np.int64) if inputs[0].dtype == np.int32 else inputs[0])
    traced = torch.jit.trace(module, example, strict=False)
    references = []
    reference = module.double()
    with torch.no_grad():
        for x in inputs:
            given = torch.from_numpy(x.astype(np.int64)) if x.dtype == np.int32 else torch.from_numpy(x.astype(np.float64))
            references.append(reference(given).numpy())
    for precision, suffix, tolerance in [(ct.precision.FLOAT32, "fp32", 1e-5), (ct.precision.FLOAT16, "fp16", 5e-3)]:
        converted = ct.convert(traced, inputs=[spec], outputs=[ct.TensorType(name=output_name)], convert_to="mlprogram",
                               compute_precision=precision, minimum_deployment_target=ct.target.iOS17, skip_model_load=True)
        package = os.path.join(out, "%s_%s.mlpackage" % (name, suffix))
        save_ml_package(converted, package)
        cases = [{"inputs": {input_name: x.tolist()}, "outputs": {output_name: r.astype(float).tolist()}}
                 for x, r in zip(inputs, references)]
        document = {"kind": "mlProgram", "model": os.path.basename(package), "reference": REFERENCE, "tolerance": tolerance,
                    "note": "transformers %s from a tiny config with seeded weights, traced and converted by coremltools %s "
                            "computing in %s" % (type(module.inner).__name__, ct.__version__, suffix),
                    "cases": cases}
        with open(os.path.join(out, "%s_%s.json" % (name, suffix)), "w") as f:
            json.dump(document, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", package)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "Fixtures", "Parity", "Zoo"))
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, factory in MODELS:
        if args.only is None or args.only == name:
            build(name, factory, args.out)


if __name__ == "__main__":
    main()
