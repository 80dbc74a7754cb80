#!/usr/bin/env python3
"""Build modelc's model zoo: torchvision and Hugging Face transformers architectures.

Usage:
    zoo.py [--out DIR] [--only NAME,...] [--variants V,...] [--full] [--check MODELC]

    Writes DIR/NAME_VARIANT.mlpackage (or .mlmodel) and DIR/NAME_VARIANT.json
    (default DIR: Fixtures/Parity/Zoo, or .build/zoo with --full).

    --full           the torchvision models at their published sizes (224 x 224 inputs,
                     1,000 classes) instead of the small committed ones
    --check MODELC   run every written model with `MODELC predict --engine tensor` (neural
                     networks: the default engine) and print model, variant, worst error;
                     exits 1 when one is refused or outside its tolerance

Each model is a real torchvision or transformers architecture built from its constructor
or a small config with seeded random weights (nothing is downloaded), traced with
torch.jit.trace (or, where coremltools 9.0 cannot convert the traced graph, exported with
torch.export at fixed shapes) and converted by coremltools' ct.convert:

    fp32, fp16   ML programs computing in float32 / float16 (iOS17 opsets)
    ios18        an fp32 ML program for iOS18 (attention as `scaled_dot_product_attention`)
    nn           a neural network (convert_to="neuralnetwork"), where the converter makes one
    pal4, pal6   the fp32 program palettized by ct.optimize.coreml (k-means, 4 and 6 bits)
    int8         the fp32 program with weights linearly quantized to int8
    sparse       the fp32 program with weights pruned to a sparse representation
    lut4g        an iOS18 fp32 program palettized to 4 bits with a table per 8 output channels
    int4b        an iOS18 fp32 program with weights quantized to int4 in blocks of 16
    splut4       an iOS18 fp32 program pruned, then its nonzero weights palettized to 4 bits
                 (joint compression)

For the compressed variants the PyTorch weights are first made representable (each compressed
weight takes at most 2^bits distinct values, int8 multiples of one scale, 60 % exact zeros);
then the compressed program is decompressed (ct.optimize.coreml.decompress_weights) and its
weights are copied back into the PyTorch model, so the reference is PyTorch float64 on the
same decompressed weights (the note in each file gives how far k-means moved them).

The references are the PyTorch model run in float64 on the same inputs. The JSON files use
the format of Fixtures/Parity (every output within `tolerance` relative to
max(1, |reference|)). Needs torch, torchvision and transformers (Scripts/zoo-requirements.txt,
`make zoo`); `make test` only reads the committed results.
"""

import argparse
import copy
import json
import os
import sys
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")

import numpy as np
import torch
import torchvision
import transformers
import coremltools as ct
import coremltools.optimize.coreml as cto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Fixtures"))
sys.path.insert(0, os.path.join(ROOT, "Scripts"))
from generate import save_ml_package, save_spec  # noqa: E402
from zoo_check import check, table  # noqa: E402

VERSIONS = "PyTorch %s float64 (torchvision %s, transformers %s)" % (
    torch.__version__.split("+")[0], torchvision.__version__.split("+")[0], transformers.__version__)
TOLERANCE = {"fp32": 1e-5, "ios18": 1e-5, "fp16": 5e-3, "nn": 1e-5, "pal4": 1e-5, "pal6": 1e-5, "int8": 1e-5, "sparse": 1e-5,
             "lut4g": 1e-5, "int4b": 1e-5, "splut4": 1e-5}
COMPRESSED = ("pal4", "pal6", "int8", "sparse", "lut4g", "int4b", "splut4")
# Compressed with the iOS18 forms (per-grouped-channel tables, int4 blocks): iOS18 programs,
# compressing every weight of more than 512 values (the others: more than 2048).
IOS18 = ("lut4g", "int4b", "splut4")


def threshold(variant):
    return 512 if variant in IOS18 else 2048
MODELS = []


class Entry:
    """One zoo model: the module, its inputs, and how ct.convert sees them."""

    def __init__(self, module, inputs, spec, input_name, output_name, variants=("fp32", "fp16"), export=False):
        self.module, self.inputs, self.spec = module, inputs, spec
        self.input_name, self.output_name, self.variants = input_name, output_name, variants
        # Converted from torch.export (fixed shapes) instead of torch.jit.trace, where
        # coremltools 9.0 cannot convert the traced graph.
        self.export = export


def model(name, variants=("fp32", "fp16"), full=None):
    """Registers a model: `variants` are the ones committed (the small models), `full` the ones
    --full builds (torchvision's published sizes; None: not built with --full)."""
    def register(function):
        MODELS.append((name, function, variants, full))
        return function
    return register


class Outputs(torch.nn.Module):
    """Returns the named tensor of a transformers model's output as a plain tensor."""

    def __init__(self, inner, key):
        super().__init__()
        self.inner, self.key = inner, key

    def forward(self, x):
        return getattr(self.inner(x, return_dict=True), self.key)


class Key(torch.nn.Module):
    """Returns one entry of a dictionary output (torchvision segmentation models)."""

    def __init__(self, inner, key):
        super().__init__()
        self.inner, self.key = inner, key

    def forward(self, x):
        return self.inner(x)[self.key]


def token_input(rng, vocab, lengths):
    return [rng.integers(0, vocab, (1, n)).astype(np.int32) for n in lengths]


def image_input(rng, shape, count=1):
    # Multiples of 1/64: exact in float32 and short in JSON.
    return [(np.round(rng.standard_normal(shape) * 64) / 64).astype(np.float32) for _ in range(count)]


def text(module, rng, vocab, lengths, output="last_hidden_state"):
    spec = ct.TensorType(name="input_ids", shape=(1, ct.RangeDim(1, 64, default=lengths[0])), dtype=np.int32)
    return Entry(Outputs(module, output), token_input(rng, vocab, lengths), spec, "input_ids", output)


def image(module, rng, shape, output="logits", count=1, variants=("fp32", "fp16"), export=False):
    spec = ct.TensorType(name="pixel_values", shape=shape)
    return Entry(module, image_input(rng, shape, count), spec, "pixel_values", output, variants, export)


# ELECTRA, OPT and GPT-Neo build their attention mask as (1 - mask) * finfo(float32).min;
# coremltools 9.0 casts that constant to fp16 -inf, so their fp16 programs compute 0 * -inf =
# NaN in every engine (a converter defect, fixed after 9.0): fp32 programs only.
FP32_ONLY = ("fp32",)
# Neural networks too where the converter makes them (the text models' networks, flexible in
# their sequence, run on the tensor engine through the lowering: `getShape` and the shape
# arithmetic after it). OPT's network is not kept: the converter expands a scalar it stores as
# a vector of one, so a concatenation meets [1] and [1, 1] (docs/runtime.md, the zoo).
WITH_NN = ("fp32", "fp16", "nn")


# ---- Hugging Face transformers -------------------------------------------------------------

@model("bert", ("fp32", "fp16", "nn", "ios18", "pal4", "int8", "sparse", "lut4g", "int4b", "splut4"))
def bert(rng, full):
    config = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    return text(transformers.BertModel(config, add_pooling_layer=False), rng, 96, [12, 5, 31])


@model("distilbert", WITH_NN)
def distilbert(rng, full):
    config = transformers.DistilBertConfig(vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                           max_position_embeddings=64)
    return text(transformers.DistilBertModel(config), rng, 96, [9, 20])


@model("gpt2", ("fp32", "fp16", "nn", "ios18"))
def gpt2(rng, full):
    config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    return text(transformers.GPT2LMHeadModel(config), rng, 96, [16, 3, 40], "logits")


@model("vit", WITH_NN)
def vit(rng, full):
    config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64, num_labels=10)
    module = Outputs(transformers.ViTForImageClassification(config), "logits")
    inputs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(2)]
    spec = ct.TensorType(name="pixel_values", shape=(1, 3, 32, 32))
    return Entry(module, inputs, spec, "pixel_values", "logits")


@model("roberta", WITH_NN)
def roberta(rng, full):
    config = transformers.RobertaConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=72, pad_token_id=1)
    return text(transformers.RobertaModel(config, add_pooling_layer=False), rng, 96, [10, 33])


@model("albert", WITH_NN)
def albert(rng, full):
    config = transformers.AlbertConfig(vocab_size=96, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    return text(transformers.AlbertModel(config, add_pooling_layer=False), rng, 96, [7, 25])


@model("electra", FP32_ONLY + ("nn",))
def electra(rng, full):
    config = transformers.ElectraConfig(vocab_size=96, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    return text(transformers.ElectraModel(config), rng, 96, [8, 19])


@model("llama", ("fp32", "fp16", "nn", "pal6", "lut4g", "int4b", "splut4"))
def llama(rng, full):
    # Rotary position embeddings, RMSNorm, SiLU-gated MLP, grouped-query attention. coremltools
    # 9.0 cannot convert its traced graph (`x.shape[-1] // 2` in rotate_half becomes an `int` of
    # a tensor): converted from torch.export with a fixed sequence of 11 tokens.
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      use_cache=False, attn_implementation="eager")
    module = Outputs(transformers.LlamaForCausalLM(config), "logits")
    return Entry(module, token_input(rng, 96, [11, 11]), None, "input_ids", "logits", export=True)


@model("opt", FP32_ONLY)
def opt(rng, full):
    config = transformers.OPTConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                                    num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32,
                                    use_cache=False, attn_implementation="eager")
    return text(transformers.OPTForCausalLM(config), rng, 96, [13, 30], "logits")


@model("gpt_neo", FP32_ONLY + ("nn",))
def gpt_neo(rng, full):
    config = transformers.GPTNeoConfig(vocab_size=96, hidden_size=32, num_layers=2, num_heads=4,
                                       attention_types=[[["global", "local"], 1]], window_size=8,
                                       max_position_embeddings=64, intermediate_size=64, use_cache=False)
    return text(transformers.GPTNeoForCausalLM(config), rng, 96, [14, 27], "logits")


@model("deit", WITH_NN)
def deit(rng, full):
    config = transformers.DeiTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, num_labels=10,
                                     initializer_range=0.2)
    return image(Outputs(transformers.DeiTForImageClassificationWithTeacher(config), "logits"), rng, (1, 3, 32, 32))


@model("convnext_hf", WITH_NN)
def convnext_hf(rng, full):
    config = transformers.ConvNextConfig(num_channels=3, patch_size=4, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 2, 1],
                                         num_labels=10, initializer_range=0.2)
    return image(Outputs(transformers.ConvNextForImageClassification(config), "logits"), rng, (1, 3, 32, 32))


@model("mobilevit")
def mobilevit(rng, full):
    config = transformers.MobileViTConfig(image_size=64, patch_size=2, hidden_sizes=[16, 24, 32],
                                          neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_attention_heads=2,
                                          num_labels=10, initializer_range=0.2)
    # coremltools 9.0 cannot convert its traced graph (an `int` of a tensor): torch.export.
    return image(Outputs(transformers.MobileViTForImageClassification(config), "logits"), rng, (1, 3, 64, 64),
                 export=True)


@model("swin", WITH_NN)
def swin(rng, full):
    # Shifted windows: torch.roll and window partition/merge.
    config = transformers.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                     window_size=4, num_labels=10, initializer_range=0.2)
    # coremltools 9.0 cannot convert its traced graph (an `int` of a tensor): torch.export.
    return image(Outputs(transformers.SwinForImageClassification(config), "logits"), rng, (1, 3, 32, 32),
                 export=True)


@model("whisper_encoder", WITH_NN + ("ios18",))
def whisper_encoder(rng, full):
    config = transformers.WhisperConfig(vocab_size=96, num_mel_bins=16, d_model=32, encoder_layers=2,
                                        encoder_attention_heads=4, encoder_ffn_dim=64, decoder_layers=1,
                                        decoder_attention_heads=4, decoder_ffn_dim=64, max_source_positions=24,
                                        max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                        decoder_start_token_id=1)
    encoder = transformers.models.whisper.modeling_whisper.WhisperEncoder(config)
    spec = ct.TensorType(name="input_features", shape=(1, 16, 48))
    return Entry(Outputs(encoder, "last_hidden_state"), image_input(rng, (1, 16, 48), 2), spec, "input_features",
                 "last_hidden_state")


@model("wav2vec2", WITH_NN)
def wav2vec2(rng, full):
    # Convolutional feature extractor with group norm, positional convolution, encoder.
    config = transformers.Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                         conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=4, feat_extract_norm="group")
    spec = ct.TensorType(name="input_values", shape=(1, 400))
    inputs = [(np.round(rng.standard_normal((1, 400)) * 64) / 64).astype(np.float32) for _ in range(2)]
    return Entry(Outputs(transformers.Wav2Vec2Model(config), "last_hidden_state"), inputs, spec, "input_values",
                 "last_hidden_state")


# ---- torchvision ---------------------------------------------------------------------------
# Committed: the published architectures with width multipliers (or small stage settings of
# the same classes where torchvision has no multiplier), 10 classes, 32 x 32 inputs; --full:
# as published. ResNet-18, GoogLeNet and FCN-ResNet50 have no width setting (5 million
# parameters and more even cut down): --full only.

from torchvision import models as tvm  # noqa: E402
from torchvision.models import segmentation as tvs  # noqa: E402

CNN = ("fp32", "fp16", "nn")


def trained_norms(module):
    """Batch norms with the statistics and scales of a trained model instead of the identity
    torchvision initializes (so that the converter's batch-norm folding is exercised), and
    fully connected layers with weights of variance 1/fan-in instead of torchvision's 0.01
    standard deviation (so that the outputs are of order one, not 1e-3)."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.normal_(0, 0.2)
                layer.running_mean.normal_(0, 0.2)
                layer.running_var.uniform_(0.5, 1.5)
            elif isinstance(layer, torch.nn.Linear):
                layer.weight.normal_(0, layer.in_features ** -0.5)
    module.eval()


def classifier(module, rng, full, size=32):
    trained_norms(module)
    shape = (1, 3, 224, 224) if full else (1, 3, size, size)
    return image(module, rng, shape, output="logits", variants=CNN)


@model("resnet18", (), CNN)
def resnet18(rng, full):
    return classifier(tvm.resnet18(), rng, full)


@model("mobilenet_v2", ("fp16", "nn"), CNN)
def mobilenet_v2(rng, full):
    return classifier(tvm.mobilenet_v2() if full else tvm.mobilenet_v2(width_mult=0.25, num_classes=10), rng, full)


@model("mobilenet_v3_small", CNN, CNN)
def mobilenet_v3_small(rng, full):
    return classifier(tvm.mobilenet_v3_small() if full else tvm.mobilenet_v3_small(width_mult=0.25, num_classes=10),
                      rng, full)


@model("mobilenet_v3_large", ("fp16",), CNN)
def mobilenet_v3_large(rng, full):
    return classifier(tvm.mobilenet_v3_large() if full else tvm.mobilenet_v3_large(width_mult=0.25, num_classes=10),
                      rng, full)


@model("efficientnet_b0", ("fp32", "fp16"), CNN)
def efficientnet_b0(rng, full):
    if full:
        return classifier(tvm.efficientnet_b0(), rng, full)
    setting, last = tvm.efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
    return classifier(tvm.efficientnet.EfficientNet(setting, 0.2, num_classes=10, last_channel=last), rng, full)


@model("densenet121", CNN, CNN)
def densenet121(rng, full):
    if full:
        return classifier(tvm.densenet121(), rng, full)
    return classifier(tvm.densenet.DenseNet(growth_rate=8, block_config=(2, 3, 2, 2), num_init_features=16,
                                            num_classes=10), rng, full)


@model("squeezenet1_1", ("fp16", "pal4", "int8"), CNN)
def squeezenet1_1(rng, full):
    # max_pool with ceil_mode=True.
    return classifier(tvm.squeezenet1_1() if full else tvm.squeezenet1_1(num_classes=10), rng, full, size=48)


@model("googlenet", (), CNN)
def googlenet(rng, full):
    return classifier(tvm.googlenet(aux_logits=False, init_weights=True), rng, full)


@model("shufflenet_v2", ("fp16", "nn"), CNN)
def shufflenet_v2(rng, full):
    # Channel shuffle (reshape/transpose) and interleaved concatenation. coremltools 9.0 cannot
    # convert its traced graph (an `int` of a tensor in channel_shuffle): torch.export.
    entry = classifier(tvm.shufflenet_v2_x0_5() if full else tvm.shufflenet_v2_x0_5(num_classes=10), rng, full)
    entry.export = True
    return entry


@model("regnet", CNN, CNN)
def regnet(rng, full):
    if full:
        return classifier(tvm.regnet_y_400mf(), rng, full)
    params = tvm.regnet.BlockParams.from_init_params(depth=6, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return classifier(tvm.regnet.RegNet(params, num_classes=10, stem_width=8), rng, full)


@model("convnext_tiny", ("fp32", "fp16", "nn", "pal6", "sparse"), CNN)
def convnext_tiny(rng, full):
    if full:
        return classifier(tvm.convnext_tiny(), rng, full)
    config = tvm.convnext.CNBlockConfig
    setting = [config(8, 16, 1), config(16, 24, 1), config(24, 32, 2), config(32, None, 1)]
    return classifier(tvm.convnext.ConvNeXt(setting, stochastic_depth_prob=0.0, num_classes=10), rng, full)


@model("mnasnet", ("fp16",), CNN)
def mnasnet(rng, full):
    return classifier(tvm.mnasnet1_0() if full else tvm.mnasnet.MNASNet(0.25, num_classes=10), rng, full)


def segmentation(module, rng, full, size=32):
    trained_norms(module)
    shape = (1, 3, 224, 224) if full else (1, 3, size, size)
    return image(Key(module, "out"), rng, shape, output="out", variants=CNN)


@model("lraspp_mobilenet_v3", ("fp32",), CNN)
def lraspp(rng, full):
    if full:
        return segmentation(tvs.lraspp_mobilenet_v3_large(weights_backbone=None), rng, full)
    backbone = tvm.mobilenet_v3_large(width_mult=0.25, dilated=True)
    return segmentation(tvs.lraspp._lraspp_mobilenetv3(backbone, 3), rng, full)


@model("deeplabv3_mobilenet_v3", ("fp16",), CNN)
def deeplabv3(rng, full):
    if full:
        return segmentation(tvs.deeplabv3_mobilenet_v3_large(weights_backbone=None, aux_loss=False), rng, full)
    # The committed one: torchvision's DeepLabV3 over a MobileNetV3-large backbone at width 0.25
    # (dilated); its head has DeepLabHead's layers (torchvision's ASPP, rates 12, 24, 36, then
    # 3 x 3 convolution, batch norm, ReLU, 1 x 1 convolution) at 32 channels instead of 256.
    module = tvs.deeplabv3._deeplabv3_mobilenetv3(tvm.mobilenet_v3_large(width_mult=0.25, dilated=True), 3, False)
    inputs = module.classifier[0].convs[0][0].in_channels
    module.classifier = torch.nn.Sequential(
        tvs.deeplabv3.ASPP(inputs, [12, 24, 36], out_channels=32), torch.nn.Conv2d(32, 32, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.Conv2d(32, 3, 1))
    return segmentation(module, rng, full)


@model("fcn_resnet50", (), CNN)
def fcn_resnet50(rng, full):
    return segmentation(tvs.fcn_resnet50(weights_backbone=None, aux_loss=False), rng, full)


# ---- compression ---------------------------------------------------------------------------

def compressible(module, variant):
    """The weights ct.optimize.coreml compresses: convolution, linear and embedding weights."""
    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear, torch.nn.Embedding)
    return [m.weight for m in module.modules() if isinstance(m, kinds) and m.weight.numel() > threshold(variant)]


def make_representable(module, variant, rng):
    """Changes the PyTorch weights so that `variant`'s compression keeps them exactly."""
    with torch.no_grad():
        for weight in compressible(module, variant):
            w = weight.detach().numpy().astype(np.float64)
            if variant == "splut4":
                w = np.where(rng.random(w.shape) < 0.6, 0.0, w)
            if variant in ("pal4", "pal6", "lut4g", "splut4"):
                levels = 1 << (int(variant[3:]) if variant.startswith("pal") else 4)
                # Zeros (pruned weights) stay zero; the others take one of `levels` values.
                nonzero = w.ravel()[w.ravel() != 0]
                lut = np.sort(rng.choice(nonzero, levels, replace=False))
                snapped = lut[np.abs(w.ravel()[:, None] - lut[None, :]).argmin(axis=1)].reshape(w.shape)
                w = np.where(w == 0, 0.0, snapped)
            elif variant == "int8":
                scale = np.float32(np.abs(w).max() / 127)
                w = np.clip(np.round(w / scale), -127, 127) * scale
                w.ravel()[np.abs(w).argmax()] = 127 * scale
            elif variant == "sparse":
                w = np.where(rng.random(w.shape) < 0.6, 0.0, w)
            weight.copy_(torch.from_numpy(w.astype(np.float32)))


def compress(mlmodel, variant):
    if variant in ("pal4", "pal6"):
        op = cto.OpPalettizerConfig(mode="kmeans", nbits=int(variant[3:]), granularity="per_tensor",
                                    weight_threshold=threshold(variant))
        return cto.palettize_weights(mlmodel, cto.OptimizationConfig(global_config=op))
    if variant == "int8":
        op = cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8", granularity="per_tensor",
                                         weight_threshold=threshold(variant))
        return cto.linear_quantize_weights(mlmodel, cto.OptimizationConfig(global_config=op))
    if variant == "lut4g":
        op = cto.OpPalettizerConfig(mode="kmeans", nbits=4, granularity="per_grouped_channel", group_size=8,
                                    weight_threshold=threshold(variant))
        return cto.palettize_weights(mlmodel, cto.OptimizationConfig(global_config=op))
    if variant == "splut4":
        pruned = cto.prune_weights(mlmodel, cto.OptimizationConfig(global_config=cto.OpThresholdPrunerConfig(
            threshold=1e-30, minimum_sparsity_percentile=0.3, weight_threshold=threshold(variant))))
        op = cto.OpPalettizerConfig(mode="kmeans", nbits=4, granularity="per_tensor", weight_threshold=threshold(variant))
        return cto.palettize_weights(pruned, cto.OptimizationConfig(global_config=op), joint_compression=True)
    if variant == "int4b":
        op = cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=16,
                                         weight_threshold=threshold(variant))
        return cto.linear_quantize_weights(mlmodel, cto.OptimizationConfig(global_config=op))
    op = cto.OpThresholdPrunerConfig(threshold=1e-30, minimum_sparsity_percentile=0.3,
                                     weight_threshold=threshold(variant))
    return cto.prune_weights(mlmodel, cto.OptimizationConfig(global_config=op))


def constants(mlmodel, variant):
    values = {}
    for function in mlmodel._mil_program.functions.values():
        for op in function.operations:
            if op.op_type == "const" and op.outputs[0].val is not None and np.size(op.outputs[0].val) > threshold(variant):
                values[op.name] = np.asarray(op.outputs[0].val, dtype=np.float64)
    return values


def adopt_decompressed(module, compressed, variant):
    """Copies the decompressed program's weights into the PyTorch model.

    Each compressed PyTorch weight takes the program constant of its shape that is closest to it
    (convolution, linear and embedding weights keep PyTorch's layout in the program). Returns
    the largest change: zero when the compression kept the weights exactly, else k-means or
    rounding moved them and the reference now uses the decompressed weights."""
    restored = list(constants(cto.decompress_weights(compressed), variant).values())
    worst = 0.0
    with torch.no_grad():
        for weight in compressible(module, variant):
            w = weight.detach().numpy().astype(np.float64)
            match = [v for v in restored if v.shape == w.shape]
            if not match:
                continue
            best = min(match, key=lambda v: float(np.abs(v - w).max()))
            change = float(np.abs(best - w).max())
            if change <= 0.25 * max(1e-12, float(np.abs(w).max())):
                worst = max(worst, change)
                weight.copy_(torch.from_numpy(best.astype(np.float32)))
    return worst


# ---- writing and checking ------------------------------------------------------------------

def rounded(array):
    """Nine significant digits: float64 references shortened for JSON, far below every tolerance."""
    flat = [float("%.9g" % v) for v in np.asarray(array, dtype=np.float64).ravel()]
    return np.array(flat).reshape(np.shape(array)).tolist()


def convert(traced, entry, variant, target=ct.target.iOS17):
    if entry.export:
        if variant == "nn":
            return ct.convert(traced, convert_to="neuralnetwork", skip_model_load=True)
        precision = ct.precision.FLOAT16 if variant == "fp16" else ct.precision.FLOAT32
        return ct.convert(traced, convert_to="mlprogram", compute_precision=precision,
                          minimum_deployment_target=target, skip_model_load=True)
    # ct.convert sets an fp16 program's unspecified input type to fp16 in the given TensorType.
    kwargs = dict(inputs=[copy.deepcopy(entry.spec)], outputs=[ct.TensorType(name=entry.output_name)], skip_model_load=True)
    if variant == "nn":
        return ct.convert(traced, convert_to="neuralnetwork", **kwargs)
    precision = ct.precision.FLOAT16 if variant == "fp16" else ct.precision.FLOAT32
    return ct.convert(traced, convert_to="mlprogram", compute_precision=precision,
                      minimum_deployment_target=target, **kwargs)


def references(module, inputs):
    out = []
    reference = module.double()
    with torch.no_grad():
        for x in inputs:
            given = torch.from_numpy(x.astype(np.int64)) if x.dtype == np.int32 else torch.from_numpy(x.astype(np.float64))
            out.append(reference(given).numpy())
    module.float()
    return out


def worst_error(module, inputs, refs, as_input):
    """The largest |module(x) - reference| / max(1, |reference|) over the inputs, each float input fed
    as as_input(x) (token ids as they are)."""
    worst = 0.0
    with torch.no_grad():
        for x, r in zip(inputs, refs):
            given = torch.from_numpy(x.astype(np.int64)) if x.dtype == np.int32 else torch.from_numpy(as_input(x))
            got = module(given).numpy().astype(np.float64)
            worst = max(worst, float((np.abs(got - r) / np.maximum(1, np.abs(r))).max()))
    return worst


def float32_error(module, inputs, refs):
    """PyTorch's own float32 error against its float64 outputs, relative to max(1, |reference|)."""
    return worst_error(module, inputs, refs, lambda x: x)


def float16_error(module, inputs, refs):
    """How far rounding the weights and the input to fp16 alone moves PyTorch's float64 outputs,
    relative to max(1, |reference|): the error an fp16 program starts from (it stores them so),
    whatever engine computes it."""
    rounded_module = copy.deepcopy(module).double()
    with torch.no_grad():
        for tensor in list(rounded_module.parameters()) + list(rounded_module.buffers()):
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().double())
    return worst_error(rounded_module, inputs, refs, lambda x: x.astype(np.float16).astype(np.float64))


def describe(entry):
    inner = entry.module.inner if isinstance(entry.module, (Outputs, Key)) else entry.module
    library = "transformers" if type(inner).__module__.startswith("transformers") else "torchvision"
    return library, type(inner).__name__


def build(name, factory, variants, out, full, only_variants):
    results = []
    seed = sum(map(ord, name))
    for group in ("plain",) + COMPRESSED:
        wanted = [v for v in variants if (v == group if group != "plain" else v in ("fp32", "fp16", "nn", "ios18"))]
        wanted = [v for v in wanted if only_variants is None or v in only_variants]
        if not wanted:
            continue
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        try:
            entry = factory(rng, full)
        except Exception as error:  # noqa: BLE001 - reported, the others still build
            print("%s: not built: %s" % (name, str(error).strip().splitlines()[-1][:200]))
            results.append((name, group, None, "not built: " + str(error).strip().splitlines()[-1][:200]))
            return results
        if entry is None:
            return results
        entry.module.eval()
        if group != "plain":
            make_representable(entry.module, group, np.random.default_rng(seed + 1))
        refs = references(entry.module, entry.inputs)
        if entry.export:
            traced = torch.export.export(entry.module, (example_of(entry),)).run_decompositions({})
        else:
            traced = torch.jit.trace(entry.module, example_of(entry), strict=False)
        library, cls = describe(entry)
        for variant in wanted:
            note = "%s %s with seeded weights, traced and converted by coremltools %s" % (library, cls, ct.__version__)
            try:
                if group == "plain":
                    if variant == "ios18":
                        converted = convert(traced, entry, "fp32", ct.target.iOS18)
                    else:
                        converted = convert(traced, entry, variant)
                    note += {"fp32": " computing in fp32", "fp16": " computing in fp16", "nn": " to a neural network",
                             "ios18": " computing in fp32 for iOS18"}[variant]
                else:
                    target = ct.target.iOS18 if variant in IOS18 else ct.target.iOS17
                    converted = compress(convert(traced, entry, "fp32", target), variant)
                    difference = adopt_decompressed(entry.module, converted, variant)
                    refs = references(entry.module, entry.inputs)
                    note += " computing in fp32, weights compressed by ct.optimize.coreml (%s); the PyTorch " \
                            "weights were made representable first, and the reference runs on the program's " \
                            "decompressed weights (they differed from the representable ones by at most %.3g)" \
                            % (variant, difference)
            except Exception as error:  # noqa: BLE001 - a converter refusal is a result
                message = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
                print("%s_%s: coremltools refused: %s" % (name, variant, message))
                results.append((name, variant, None, "converter: " + message))
                continue
            if entry.export:
                description = converted.get_spec().description
                entry.input_name, entry.output_name = description.input[0].name, description.output[0].name
            suffix = ".mlmodel" if variant == "nn" else ".mlpackage"
            path = os.path.join(out, "%s_%s%s" % (name, variant, suffix))
            if variant == "nn":
                save_spec(converted.get_spec(), path)
            else:
                save_ml_package(converted, path)
            cases = [{"inputs": {entry.input_name: x.tolist()}, "outputs": {entry.output_name: rounded(r)}}
                     for x, r in zip(entry.inputs, refs)]
            tolerance = TOLERANCE[variant]
            if variant == "fp16":
                # Deep models with large activations (MobileViT, ResNet-18 and DenseNet-121 at their
                # published sizes) move by more than 5e-3 from fp16 storage alone: then the tolerance
                # is twice that movement.
                own = float16_error(entry.module, entry.inputs, refs)
                if 2 * own > tolerance:
                    tolerance = float("%.2g" % (2 * own))
                    note += ("; tolerance twice the error of PyTorch float64 on the weights and input rounded "
                             "to fp16 (%.3g)" % own)
            else:
                # Large activations (the published sizes) make float32 itself err by more than 1e-5:
                # then the tolerance is 4 times PyTorch's own float32 error on the same inputs.
                own = float32_error(entry.module, entry.inputs, refs)
                if 4 * own > tolerance:
                    tolerance = float("%.2g" % (4 * own))
                    note += "; tolerance 4 times PyTorch float32's own error (%.3g)" % own
            document = {"kind": "neuralNetwork" if variant == "nn" else "mlProgram", "model": os.path.basename(path),
                        "reference": VERSIONS + ", same weights", "tolerance": tolerance, "note": note, "cases": cases}
            with open(os.path.join(out, "%s_%s.json" % (name, variant)), "w") as f:
                json.dump(document, f, sort_keys=True, separators=(",", ":"))
                f.write("\n")
            print("wrote", path)
            results.append((name, variant, path, None))
    return results


def example_of(entry):
    x = entry.inputs[0]
    return torch.from_numpy(x.astype(np.int64) if x.dtype == np.int32 else x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--variants", default=None, help="comma-separated variants (fp32, fp16, nn, pal4, ...)")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--check", default=None, metavar="MODELC")
    args = parser.parse_args()
    out = args.out or (os.path.join(ROOT, ".build", "zoo") if args.full else os.path.join(ROOT, "Fixtures", "Parity", "Zoo"))
    os.makedirs(out, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    only_variants = set(args.variants.split(",")) if args.variants else None
    failed = False
    rows = []
    for name, factory, variants, full_variants in MODELS:
        if only is not None and name not in only:
            continue
        if args.full:
            variants = full_variants or ()
        for model_name, variant, path, problem in build(name, factory, variants, out, args.full, only_variants):
            worst = None
            if path is not None and args.check:
                worst, problem = check(args.check, out, "%s_%s" % (model_name, variant))
                failed = failed or problem is not None
            rows.append(("%s_%s" % (model_name, variant), worst, problem))
    if args.check:
        print()
        print(table(rows))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
