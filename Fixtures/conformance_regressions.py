#!/usr/bin/env python3
"""Generate the regression fixtures for the defects coremltools' own operation tests found in modelc.

Usage:
    conformance_regressions.py [--out DIR]   write DIR/Parity/Regressions/ (default DIR: the folder of this script)

Each case set is the smallest model that showed one defect (issue 25; and coremltools' converter tests, issue 37), built with coremltools'
builders (`mb.program` for ML programs, `NeuralNetworkBuilder` for neural networks), with inputs
and the outputs a NumPy float64 evaluation of the MIL operation definitions
(coremltools/converters/mil/mil/ops/defs/iOS15..iOS18) or of NeuralNetwork.proto's layer
definitions gives for them. The runtime must reproduce every output with exactly the shape
written here (the nesting of the JSON arrays) and every value within the file's tolerance:
|got - want| <= tolerance * max(1, |want|).

Neural-network outputs are declared without a shape, so that what is checked is the shape the
runtime computes, not the declared one it could reshape into.

The files use network_parity.py's format and helpers. Everything is deterministic: fixed seeds,
deterministic protobuf serialization, no dates, stable package identifiers. Running the script
twice gives byte-identical files.
"""

import argparse
import contextlib
import io
import os
import shutil
import sys
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import get_new_symbol, types
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import network_parity as npar  # noqa: E402
from network_lowering import lstm_reference  # noqa: E402

SUBDIR = os.path.join("Parity", "Regressions")
NUMPY = npar.NUMPY
TOLERANCE = 1e-5
README_HEADING = "## Regressions"


class Writer(npar.Writer):
    """network_parity's writer, into Parity/Regressions/."""

    def __init__(self, out_dir):
        super().__init__(out_dir)
        self.dir = os.path.join(out_dir, SUBDIR)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def nn(inputs, outputs):
    """A neural network with rank-N inputs (EXACT_ARRAY_MAPPING) and outputs of undeclared shape."""
    return NeuralNetworkBuilder([(n, datatypes.Array(*s)) for n, s in inputs],
                                [(n, None) for n in outputs],
                                disable_rank5_shape_mapping=True)


def finish(builder):
    spec = builder.spec
    spec.specificationVersion = max(spec.specificationVersion, 4)
    return spec


# ---------------------------------------------------------------------------
# NumPy references, from NeuralNetwork.proto's layer definitions
# ---------------------------------------------------------------------------

def conv_nchw(x, w, b, pads):
    """Convolution of every item of a batch: w [O, I, kH, kW], pads (top, bottom, left, right)."""
    return np.stack([npar.conv2d(item, w, b, pads=pads) for item in x])


def deconv_nchw(x, w, b, stride):
    return np.stack([npar.deconv2d(item, w, b, stride) for item in x])


def bilinear_align_corners(x, fh, fw):
    """UpsampleLayerParams, linearUpsampleMode ALIGN_CORNERS_TRUE, over the last two axes."""
    h, w = x.shape[-2:]
    oh, ow = h * fh, w * fw

    def grid(n_in, n_out):
        return np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)

    def interpolate(values, points, axis):
        low = np.floor(points).astype(int)
        high = np.minimum(low + 1, values.shape[axis] - 1)
        frac = points - low
        a, b = np.take(values, low, axis=axis), np.take(values, high, axis=axis)
        shape = [1] * values.ndim
        shape[axis] = len(points)
        return a + (b - a) * frac.reshape(shape)

    return interpolate(interpolate(x, grid(h, oh), x.ndim - 2), grid(w, ow), x.ndim - 1)


def bilinear_grid(n_in, n_out, mode):
    """MIL upsample_bilinear's sampling positions (iOS15 notes, iOS16 half_pixel_centers)."""
    i = np.arange(n_out, dtype=np.float64)
    if mode == "align_corners":
        spacing = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        points = i * spacing
    elif mode == "half_pixel":
        spacing = n_in / n_out
        points = i * spacing + 0.5 * spacing - 0.5
    else:  # neither: output position / scale
        points = i * (n_in / n_out)
    return np.clip(points, 0, n_in - 1)


def bilinear(x, oh, ow, mode):
    def along(values, points, axis):
        low = np.floor(points).astype(int)
        high = np.minimum(low + 1, values.shape[axis] - 1)
        frac = points - low
        a, b = np.take(values, low, axis=axis), np.take(values, high, axis=axis)
        shape = [1] * values.ndim
        shape[axis] = len(points)
        return a + (b - a) * frac.reshape(shape)

    h, w = x.shape[-2:]
    y = along(x, bilinear_grid(h, oh, mode), x.ndim - 2)
    return along(y, bilinear_grid(w, ow, mode), x.ndim - 1)


# ---------------------------------------------------------------------------
# Defect 1: channel-first layers keep the rank and the batch (NeuralNetwork.proto)
# ---------------------------------------------------------------------------

def channel_layer_sweep(writer, name, lead, seed):
    """Every channel-first layer kind on an input lead + [3, 4, 4]: the proto reads the last
    three dimensions as [C, H, W], every one before them as batch, and keeps them."""
    rng = np.random.default_rng(seed)
    batch = int(np.prod(lead))
    c, h, w = 3, 4, 4
    conv_w, conv_b = npar.rand(rng, 2, c, 3, 3, scale=0.5), npar.rand(rng, 2)
    deconv_w, deconv_b = npar.rand(rng, c, 2, 2, 2, scale=0.5), npar.rand(rng, 2)
    fc_w, fc_b = npar.rand(rng, 5, c * h * w, scale=0.3), npar.rand(rng, 5)
    gamma, beta = 1 + npar.rand(rng, c), npar.rand(rng, c)
    mean, var = npar.rand(rng, c), 0.5 + np.abs(npar.rand(rng, c))
    outputs = ["conv", "deconv", "max_pool", "avg_pool", "global_pool", "crop", "upsample",
               "reduce_hw", "reduce_chw", "inner_product", "batchnorm"]
    shape = tuple(lead) + (c, h, w)
    b = nn([("x", shape)], outputs)
    b.add_convolution("conv", kernel_channels=c, output_channels=2, height=3, width=3,
                      stride_height=1, stride_width=1, border_mode="same", groups=1,
                      W=conv_w.transpose(2, 3, 1, 0), b=conv_b, has_bias=True,
                      input_name="x", output_name="conv")
    b.add_convolution("deconv", kernel_channels=c, output_channels=2, height=2, width=2,
                      stride_height=2, stride_width=2, border_mode="valid", groups=1,
                      W=deconv_w.transpose(2, 3, 0, 1), b=deconv_b, has_bias=True,
                      is_deconv=True, input_name="x", output_name="deconv")
    b.add_pooling("max_pool", height=2, width=2, stride_height=2, stride_width=2,
                  layer_type="MAX", padding_type="VALID", input_name="x", output_name="max_pool")
    b.add_pooling("avg_pool", height=1, width=2, stride_height=1, stride_width=2,
                  layer_type="AVERAGE", padding_type="VALID", input_name="x", output_name="avg_pool")
    b.add_pooling("global_pool", height=1, width=1, stride_height=1, stride_width=1,
                  layer_type="AVERAGE", padding_type="VALID", input_name="x",
                  output_name="global_pool", is_global=True)
    b.add_crop("crop", left=1, right=0, top=0, bottom=1, offset=[0, 0], input_names=["x"],
               output_name="crop")
    b.add_upsample("upsample", scaling_factor_h=2, scaling_factor_w=2, input_name="x",
                   output_name="upsample", mode="BILINEAR", linear_upsample_mode="ALIGN_CORNERS_TRUE")
    b.add_reduce("reduce_hw", input_name="x", output_name="reduce_hw", axis="HW", mode="avg")
    b.add_reduce("reduce_chw", input_name="x", output_name="reduce_chw", axis="CHW", mode="sum")
    b.add_inner_product("inner_product", W=fc_w, b=fc_b, input_channels=c * h * w,
                        output_channels=5, has_bias=True, input_name="x",
                        output_name="inner_product")
    b.add_batchnorm("batchnorm", channels=c, gamma=gamma, beta=beta, mean=mean, variance=var,
                    input_name="x", output_name="batchnorm", epsilon=1e-5)
    spec = finish(b)

    def forward(v):
        x = v["x"].reshape(batch, c, h, w)
        pooled = x.reshape(batch, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
        flat = x.reshape(batch, -1)
        out = {
            "conv": conv_nchw(x, f32(conv_w), f32(conv_b), (1, 1, 1, 1)),
            "deconv": deconv_nchw(x, f32(deconv_w), f32(deconv_b), (2, 2)),
            "max_pool": pooled,
            "avg_pool": x.reshape(batch, c, h, w // 2, 2).mean(axis=4),
            "global_pool": x.mean(axis=(2, 3), keepdims=True),
            "crop": x[:, :, 0:h - 1, 1:w],
            "upsample": bilinear_align_corners(x, 2, 2),
            "reduce_hw": x.mean(axis=(2, 3), keepdims=True),
            "reduce_chw": x.sum(axis=(1, 2, 3), keepdims=True),
            "inner_product": (flat @ f32(fc_w).T + f32(fc_b)).reshape(batch, 5, 1, 1),
            "batchnorm": ((x - f32(mean)[:, None, None]) / np.sqrt(f32(var)[:, None, None] + 1e-5)
                          * f32(gamma)[:, None, None] + f32(beta)[:, None, None]),
        }
        return {k: y.reshape(tuple(lead) + y.shape[1:]) for k, y in out.items()}

    cases = [{"inputs": {"x": f32(rng.standard_normal(shape))}} for _ in range(2)]
    for case in cases:
        case["outputs"] = forward(case["inputs"])
    writer.write(name, spec, NUMPY, cases,
                 "defect 1: convolution, deconvolution, pooling (max, average, global), crop, "
                 "bilinear upsample, reduce (HW, CHW), inner product and batchnorm on a rank-%d "
                 "%s input keep the rank and the leading dimensions" % (len(shape), list(shape)),
                 "NeuralNetwork.proto: a rank-4 blob is [Batch, C, H, W], a rank-5 one [Seq, Batch, "
                 "C, H, W]; dimensions before the last three are batch and the output keeps them "
                 "(inner product: rank 4 (x1, C_out, 1, 1), rank 5 (x1, x2, C_out, 1, 1)).",
                 tolerance=TOLERANCE)


def nn_pooling_leading_ones(writer):
    """The sampled case: an average pool over (1, 2, 1, 2) gave (2, 1, 1)."""
    b = nn([("x", (1, 2, 1, 2))], ["y"])
    b.add_pooling("pool", height=1, width=2, stride_height=1, stride_width=1, layer_type="AVERAGE",
                  padding_type="VALID", input_name="x", output_name="y")
    spec = finish(b)
    rng = np.random.default_rng(2503)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((1, 2, 1, 2)))
        cases.append({"inputs": {"x": x}, "outputs": {"y": x.mean(axis=3, keepdims=True)}})
    writer.write("nn_pool_leading_ones", spec, NUMPY, cases,
                 "defect 1: an average pool over a (1, 2, 1, 2) input gives (1, 2, 1, 1)",
                 "Leading size-1 dimensions stay.", tolerance=TOLERANCE)


def nn_upsample_batch(writer):
    """The sampled case: upsample_bilinear on (2, 5, 30, 88) folded the batch into channels."""
    shape = (2, 5, 3, 4)
    b = nn([("x", shape)], ["y"])
    b.add_upsample("up", scaling_factor_h=2, scaling_factor_w=3, input_name="x", output_name="y",
                   mode="BILINEAR", linear_upsample_mode="ALIGN_CORNERS_TRUE")
    spec = finish(b)
    rng = np.random.default_rng(2504)
    x = f32(rng.standard_normal(shape))
    writer.write("nn_upsample_batch", spec, NUMPY,
                 [{"inputs": {"x": x}, "outputs": {"y": bilinear_align_corners(x, 2, 3)}}],
                 "defect 1: bilinear upsample of a (2, 5, 3, 4) input gives (2, 5, 6, 12)",
                 "The batch is not folded into the channels.", tolerance=TOLERANCE)


# ---------------------------------------------------------------------------
# Defects 2, 4, 5, 7, 8, 9: ML programs (MIL operation definitions)
# ---------------------------------------------------------------------------

def nn_pad_rank2(writer):
    """Found by the same tests (TestPad, neural network): padding a (3, 5) blob gave (1, 4, 7)."""
    b = nn([("x", (3, 5))], ["y"])
    b.add_padding("pad", left=1, right=1, top=1, bottom=0, value=0.5, input_name="x", output_name="y")
    spec = finish(b)
    rng = np.random.default_rng(2515)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((3, 5)))
        cases.append({"inputs": {"x": x},
                      "outputs": {"y": np.pad(x, ((1, 0), (1, 1)), constant_values=0.5)}})
    writer.write("nn_pad_rank2", spec, NUMPY, cases,
                 "defect 1: constant padding of a rank-2 (3, 5) blob gives rank 2 (4, 7)",
                 "NeuralNetwork.proto: padding takes rank 2 and up and keeps the rank.",
                 tolerance=TOLERANCE)


def program_gather_batch_dims(writer):
    indices = np.array([[2, 0], [1, 1]], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3, 4))], opset_version=ct.target.iOS16)
    def prog(x):
        return mb.gather(x=x, indices=indices, axis=1, batch_dims=1, name="y")

    model = npar.finish_program(prog, ct.target.iOS16)
    rng = np.random.default_rng(2505)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((2, 3, 4)))
        y = np.stack([x[b][indices[b]] for b in range(2)])  # x[b, indices[b, j], :]
        cases.append({"inputs": {"x": x}, "outputs": {"y": y}})
    writer.write_package("program_gather_batch_dims", model, NUMPY, cases,
                         "defect 2: iOS16 gather axis 1, batch_dims 1: (2, 3, 4) with indices "
                         "(2, 2) gives (2, 2, 4)",
                         "output shape x.shape[:axis] + indices.shape[batch_dims:] + "
                         "x.shape[axis + 1:]", tolerance=TOLERANCE)


def program_upsample_modes(writer):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 1, 2))], opset_version=ct.target.iOS16)
    def prog(x):
        return (mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=3,
                                     align_corners=False, half_pixel_centers=False, name="neither"),
                mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=3,
                                     align_corners=False, half_pixel_centers=True, name="half_pixel"),
                mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=3,
                                     align_corners=True, half_pixel_centers=False, name="align_corners"))

    model = npar.finish_program(prog, ct.target.iOS16)
    rng = np.random.default_rng(2506)
    xs = [f32([[[[1, 2]]]]), f32(rng.standard_normal((1, 1, 1, 2)))]
    cases = [{"inputs": {"x": x},
              "outputs": {mode: bilinear(x, 2, 6, mode)
                          for mode in ("neither", "half_pixel", "align_corners")}} for x in xs]
    writer.write_package("program_upsample_bilinear_modes", model, NUMPY, cases,
                         "defect 4: iOS16 upsample_bilinear with align_corners / "
                         "half_pixel_centers False/False, False/True, True/False",
                         "Neither: input position = output position x Xin / Xout (clamped); "
                         "[1, 2] x3 gives [1, 1.33, 1.67, 2, 2, 2].", tolerance=TOLERANCE)


def program_upsample_fractional(writer):
    """Found by iOS14 TestUpsampleBilinear (scale 2.6, align_corners False): the spacing is
    Xin / Xout of the floored output size, not 1 / scale (0.4, not 1 / 2.6, for 2 -> 5)."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 4, 2))], opset_version=ct.target.iOS16)
    def prog(x):
        return (mb.upsample_bilinear(x=x, scale_factor_height=0.75, scale_factor_width=2.6,
                                     align_corners=False, half_pixel_centers=False, name="neither"),
                mb.upsample_bilinear(x=x, scale_factor_height=0.75, scale_factor_width=2.6,
                                     align_corners=False, half_pixel_centers=True, name="half_pixel"),
                mb.upsample_bilinear(x=x, scale_factor_height=0.75, scale_factor_width=2.6,
                                     align_corners=True, half_pixel_centers=False, name="align_corners"))

    model = npar.finish_program(prog, ct.target.iOS16)
    rng = np.random.default_rng(2531)
    xs = [f32(np.arange(8).reshape(1, 1, 4, 2)), f32(rng.standard_normal((1, 1, 4, 2)))]
    cases = [{"inputs": {"x": x},
              "outputs": {mode: bilinear(x, 3, 5, mode)
                          for mode in ("neither", "half_pixel", "align_corners")}} for x in xs]
    writer.write_package("program_upsample_bilinear_fractional", model, NUMPY, cases,
                         "iOS16 upsample_bilinear with fractional scales (0.75, 2.6): (4, 2) gives "
                         "(3, 5), sampled Xin / Xout apart",
                         "Half-pixel: input position = (i + 0.5) x Xin / Xout - 0.5 (clamped); "
                         "[0, 1] x2.6 gives [0, 0.1, 0.5, 0.9, 1].", tolerance=TOLERANCE)


def nn_upsample_fractional(writer):
    """The same on the neural-network backend (fractionalScalingFactor, lowered onto the MIL op)."""
    shape = (2, 3, 4, 2)
    rng = np.random.default_rng(2532)
    cases, outputs = [], ["half_pixel", "align_corners"]
    b = nn([("x", shape)], outputs)
    b.add_upsample("half_pixel", scaling_factor_h=0.75, scaling_factor_w=2.6, input_name="x",
                   output_name="half_pixel", mode="BILINEAR", linear_upsample_mode="ALIGN_CORNERS_FALSE")
    b.add_upsample("align_corners", scaling_factor_h=0.75, scaling_factor_w=2.6, input_name="x",
                   output_name="align_corners", mode="BILINEAR", linear_upsample_mode="ALIGN_CORNERS_TRUE")
    spec = finish(b)
    for _ in range(2):
        x = f32(rng.standard_normal(shape))
        cases.append({"inputs": {"x": x},
                      "outputs": {mode: bilinear(x, 3, 5, mode) for mode in outputs}})
    writer.write("nn_upsample_fractional", spec, NUMPY, cases,
                 "upsample with fractional scaling factors (0.75, 2.6), ALIGN_CORNERS_FALSE / TRUE: "
                 "(2, 3, 4, 2) gives (2, 3, 3, 5)",
                 "ALIGN_CORNERS_FALSE: spacing Xin / Xout (NeuralNetwork.proto), not 1 / scale.",
                 tolerance=TOLERANCE)


def nn_tile_dynamic_reps(writer):
    """Found by iOS14 TestDynamicTile (neural network): a tile layer whose repetitions are its
    second input (computed at run time) was refused (exit 94)."""
    b = nn([("x", (2, 3)), ("reps", (2,))], ["y"])
    b.add_tile("tile", input_name=["x", "reps"], output_name="y")
    spec = finish(b)
    rng = np.random.default_rng(2533)
    cases = []
    for reps in ([1, 1], [2, 1], [2, 3], [1, 2]):
        x = f32(rng.standard_normal((2, 3)))
        cases.append({"inputs": {"x": x, "reps": f32(reps)}, "outputs": {"y": np.tile(x, reps)}})
    writer.write("nn_tile_dynamic_reps", spec, NUMPY, cases,
                 "tile with repetitions as a second input: (2, 3) x [2, 3] gives (4, 9)",
                 "The output's shape follows the repetitions of each prediction.", tolerance=TOLERANCE)


def nn_slice_dynamic_defaults(writer):
    """Found by iOS14 TestSliceBySize (neural network): the converter's sliceDynamic keeps
    coremltools' builder defaults, five values per parameter (masks false, strides 1), for a
    rank-3 input; the lowering refused the five strides ("stride has 5 values for rank 3")."""
    b = nn([("x", (2, 3, 4)), ("begin", (3,)), ("end", (3,))], ["y"])
    b.add_slice_dynamic("slice", input_names=["x", "begin", "end"], output_name="y")
    spec = finish(b)
    x = f32(np.arange(24).reshape(2, 3, 4))
    cases = []
    for begin, end in (([1, 1, 1], [2, 3, 4]), ([0, 1, 0], [2, 2, 3]), ([0, 0, 2], [1, 3, 3])):
        cases.append({"inputs": {"x": x, "begin": f32(begin), "end": f32(end)},
                      "outputs": {"y": x[begin[0]:end[0], begin[1]:end[1], begin[2]:end[2]]}})
    writer.write("nn_slice_dynamic_defaults", spec, NUMPY, cases,
                 "sliceDynamic with the builder's default parameters (5 values) on a rank-3 input",
                 "x[1:2, 1:3, 1:4] of arange(24).reshape(2, 3, 4) is [[[17, 18, 19], [21, 22, 23]]].",
                 tolerance=TOLERANCE)


def nn_rank_from_values(writer):
    """Found by iOS14 TestFill and TestReshape (symbolic, neural network): fillDynamic and
    reshapeDynamic whose shape input has a flexible length, so that the output's rank is known
    only at prediction, were refused (exit 94, "the rank of its output depends on values computed
    at run time"), although no layer reads the result: the network only returns it."""
    from coremltools.models.neural_network import flexible_shape_utils

    outputs = ["filled", "reshaped", "broadcast"]
    b = nn([("x", (2, 3)), ("row", (1, 3)), ("shape", (3,)), ("target", (2,)), ("wide", (2,))], outputs)
    b.add_fill_dynamic("fill", input_name="shape", output_name="filled", value=1.5)
    b.add_reshape_dynamic("reshape", input_names=["x", "target"], output_name="reshaped")
    b.add_broadcast_to_dynamic("broadcast", input_names=["row", "wide"], output_name="broadcast")
    spec = finish(b)
    for name in ("shape", "target", "wide"):
        flexible_shape_utils.set_multiarray_ndshape_range(spec, name, lower_bounds=[1], upper_bounds=[5])
    rng = np.random.default_rng(2534)
    cases = []
    for shape, target, wide in (([2, 1, 3], [3, 2], [2, 3]), ([4], [6], [2, 2, 3]),
                                ([1, 2, 1, 2], [1, 2, 3], [3]), ([3, 2], [1, 1, 3, 2], [2, 1, 1, 3])):
        x = f32(rng.standard_normal((2, 3)))
        row = f32(rng.standard_normal((1, 3)))
        cases.append({"inputs": {"x": x, "row": row, "shape": f32(shape), "target": f32(target), "wide": f32(wide)},
                      "outputs": {"filled": np.full(shape, 1.5), "reshaped": x.reshape(target),
                                  "broadcast": np.broadcast_to(row, np.broadcast_shapes(row.shape, tuple(wide)))}})
    writer.write("nn_rank_from_values", spec, NUMPY, cases,
                 "fillDynamic, reshapeDynamic and broadcastToDynamic whose shape input has a flexible "
                 "length: [2, 1, 3] gives a rank-3 result, [4] a rank-1 one",
                 "Each output's rank follows the length of its shape input in each prediction.",
                 tolerance=TOLERANCE)


def program_instance_norm_defaults(writer):
    rng = np.random.default_rng(2507)
    gamma = 1 + npar.rand(rng, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 5, 4, 3)), mb.TensorSpec(shape=(2, 5, 6))],
                opset_version=ct.target.iOS15)
    def prog(x, z):
        return (mb.instance_norm(x=x, epsilon=1e-5, name="plain"),
                mb.instance_norm(x=x, gamma=gamma, epsilon=1e-5, name="gamma_only"),
                mb.instance_norm(x=z, epsilon=1e-5, name="rank3"))

    model = npar.finish_program(prog, ct.target.iOS15)

    def norm(v):
        axes = tuple(range(2, v.ndim))
        m = v.mean(axis=axes, keepdims=True)
        return (v - m) / np.sqrt(((v - m) ** 2).mean(axis=axes, keepdims=True) + 1e-5)

    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((1, 5, 4, 3)))
        z = f32(rng.standard_normal((2, 5, 6)))
        cases.append({"inputs": {"x": x, "z": z},
                      "outputs": {"plain": norm(x), "gamma_only": norm(x) * f32(gamma)[:, None, None],
                                  "rank3": norm(z)}})
    writer.write_package("program_instance_norm_defaults", model, NUMPY, cases,
                         "defect 5: iOS15 instance_norm without gamma and beta, with gamma only, "
                         "and on a rank-3 [N, C, L] input",
                         "gamma defaults to 1, beta to 0; each (n, c) normalized over the rest.",
                         tolerance=TOLERANCE)


def program_transpose_negative(writer):
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3)), mb.TensorSpec(shape=(2, 3, 4, 5))],
                opset_version=ct.target.iOS15)
    def prog(a, b):
        return (mb.transpose(x=a, perm=[-1, 0], name="two"),
                mb.transpose(x=b, perm=[0, 2, -1, -3], name="four"))

    model = npar.finish_program(prog, ct.target.iOS15)
    rng = np.random.default_rng(2508)
    cases = []
    for _ in range(2):
        a, b = f32(rng.standard_normal((2, 3))), f32(rng.standard_normal((2, 3, 4, 5)))
        cases.append({"inputs": {"a": a, "b": b},
                      "outputs": {"two": a.transpose(1, 0), "four": b.transpose(0, 2, 3, 1)}})
    writer.write_package("program_transpose_negative_axes", model, NUMPY, cases,
                         "defect 7: transpose with perm [-1, 0] and [0, 2, -1, -3]",
                         "Negative axes count from the end.", tolerance=TOLERANCE)


def program_matmul_broadcast(writer):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 1, 2, 3)), mb.TensorSpec(shape=(1, 4, 3, 2))],
                opset_version=ct.target.iOS15)
    def prog(x, y):
        return mb.matmul(x=x, y=y, name="z")

    model = npar.finish_program(prog, ct.target.iOS15)
    rng = np.random.default_rng(2509)
    cases = []
    for _ in range(2):
        x, y = f32(rng.standard_normal((1, 3, 1, 2, 3))), f32(rng.standard_normal((1, 4, 3, 2)))
        cases.append({"inputs": {"x": x, "y": y}, "outputs": {"z": np.matmul(x, y)}})
    writer.write_package("program_matmul_batch_broadcast", model, NUMPY, cases,
                         "defect 8: matmul of (1, 3, 1, 2, 3) and (1, 4, 3, 2): batch dimensions "
                         "[1, 3, 1] and [1, 4] broadcast to [1, 3, 4]",
                         "As numpy.matmul.", tolerance=TOLERANCE)


def program_reshape_zeros(writer):
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.reshape(x=x, shape=[1, 0, -1, 0], name="from_end"),
                mb.reshape(x=x, shape=[0, -1], name="same_rank"))

    model = npar.finish_program(prog, ct.target.iOS17)
    rng = np.random.default_rng(2510)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((2, 3)))
        cases.append({"inputs": {"x": x},
                      "outputs": {"from_end": x.reshape(1, 1, 2, 3), "same_rank": x.reshape(2, 3)}})
    writer.write_package("program_reshape_zero_dims", model, NUMPY, cases,
                         "defect 9: iOS17 reshape of (2, 3) to [1, 0, -1, 0] gives (1, 1, 2, 3)",
                         "iOS17: each 0 copies the input dimension at the same distance from the "
                         "end, 1 where there is none.", tolerance=TOLERANCE)


# ---------------------------------------------------------------------------
# Defects 3 and 6: neural networks
# ---------------------------------------------------------------------------

def nn_matmul_constant_transpose(writer):
    """What coremltools' MIL-to-neural-network converter writes for
    matmul(x, y=const, transpose_x=True): a transpose layer, then a batched matmul with
    one input, the weights and transposeA set, which NeuralNetwork.proto says is ignored."""
    y = np.array([[1.0, -7.0], [-1.0, -8.0]], dtype=np.float32)
    b = nn([("x", (2, 2))], ["z"])
    b.add_transpose("x_transpose", axes=[1, 0], input_name="x", output_name="x_transpose")
    b.add_batched_mat_mul("matmul", input_names=["x_transpose"], output_name="z",
                          transpose_a=True, weight_matrix_rows=2, weight_matrix_columns=2, W=y)
    spec = finish(b)
    rng = np.random.default_rng(2511)
    xs = [f32([[-4.0, 13.0], [-3.0, 9.0]]), f32(rng.standard_normal((2, 2)))]
    cases = [{"inputs": {"x": x}, "outputs": {"z": x.T @ f32(y)}} for x in xs]
    writer.write("nn_batched_matmul_constant_transpose", spec, NUMPY, cases,
                 "defect 3: batched matmul with constant weights and transposeA set (ignored "
                 "with one input), after a transpose layer",
                 "NeuralNetwork.proto: transposeA/transposeB are ignored when there is one input.",
                 tolerance=TOLERANCE)


def nn_batched_matmul_rank1(writer):
    """Refused by the layer engine: a rank-1 first operand of a two-input batched matmul is read as (1, D)."""
    b = nn([("a", (3,)), ("b", (3, 2))], ["y"])
    b.add_batched_mat_mul("matmul", input_names=["a", "b"], output_name="y")
    spec = finish(b)
    rng = np.random.default_rng(2513)
    cases = []
    for _ in range(2):
        a, m = f32(rng.standard_normal(3)), f32(rng.standard_normal((3, 2)))
        cases.append({"inputs": {"a": a, "b": m}, "outputs": {"y": a.reshape(1, 3) @ m}})
    writer.write("nn_batched_matmul_rank1", spec, NUMPY, cases,
                 "a (3,) by (3, 2) batched matmul gives (1, 2)",
                 "NeuralNetwork.proto reads a rank-1 first operand as (1, D); the tensor engine runs it.",
                 tolerance=TOLERANCE)


def nn_squeeze_all_rank1(writer):
    """Issue 37, from test_numpy_nn_layers' test_squeeze_all: a squeeze of every size-1 axis of a
    (1,) input gave a rank-0 result; a neural network has no rank-0 blob, Core ML gives (1,)."""
    b = nn([("one", (1,)), ("ones", (1, 1, 1)), ("x", (3, 1, 7))], ["a", "b", "c"])
    for source, target in (("one", "a"), ("ones", "b"), ("x", "c")):
        b.add_squeeze("squeeze_" + source, input_name=source, output_name=target, squeeze_all=True)
    spec = finish(b)
    rng = np.random.default_rng(3701)
    cases = []
    for _ in range(2):
        one, ones, x = f32(rng.standard_normal(1)), f32(rng.standard_normal((1, 1, 1))), f32(rng.standard_normal((3, 1, 7)))
        cases.append({"inputs": {"one": one, "ones": ones, "x": x},
                      "outputs": {"a": one.reshape(1), "b": ones.reshape(1), "c": x.reshape(3, 7)}})
    writer.write("nn_squeeze_all_rank1", spec, NUMPY, cases,
                 "issue 37: squeezeAll of (1,) and (1, 1, 1) gives (1,), of (3, 1, 7) gives (3, 7)",
                 "np.squeeze, made rank 1 where it would be rank 0.", tolerance=TOLERANCE)


def nn_split_nd_uneven(writer):
    """Issue 37, from test_numpy_nn_layers' test_split_nd_cpu: splitND into numSplits parts of an
    axis they do not divide gives NumPy's array_split (the first size % n parts one longer); the
    engine made every part but the last one longer (7 into 3: 3, 3, 1 instead of 3, 2, 2)."""
    b = nn([("x", (2, 7, 3))], ["p0", "p1", "p2"])
    b.add_split_nd("split", input_name="x", output_names=["p0", "p1", "p2"], axis=1, num_splits=3)
    spec = finish(b)
    rng = np.random.default_rng(3702)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((2, 7, 3)))
        parts = np.array_split(x, 3, axis=1)
        cases.append({"inputs": {"x": x}, "outputs": {"p%d" % i: part for i, part in enumerate(parts)}})
    writer.write("nn_split_nd_uneven", spec, NUMPY, cases,
                 "issue 37: splitND of an axis of 7 into 3 gives 3, 2, 2 (np.array_split)",
                 "test_split_nd_cpu compares with np.array_split when the parts are uneven.", tolerance=TOLERANCE)


def nn_batched_matmul_rank1_second(writer):
    """Issue 37, from test_numpy_nn_layers' test_batched_mat_mul_cpu: a rank-1 second operand is
    read as (D, 1) and its axis kept: (10,) by (10,) gives (1, 1), (4, 10) by (10,) gives (4, 1)."""
    b = nn([("a", (10,)), ("m", (4, 10)), ("v", (10,))], ["dot", "column"])
    b.add_batched_mat_mul("dot", input_names=["a", "v"], output_name="dot")
    b.add_batched_mat_mul("column", input_names=["m", "v"], output_name="column")
    spec = finish(b)
    rng = np.random.default_rng(3703)
    cases = []
    for _ in range(2):
        a, m, v = f32(rng.standard_normal(10)), f32(rng.standard_normal((4, 10))), f32(rng.standard_normal(10))
        cases.append({"inputs": {"a": a, "m": m, "v": v},
                      "outputs": {"dot": a.reshape(1, 10) @ v.reshape(10, 1), "column": m @ v.reshape(10, 1)}})
    writer.write("nn_batched_matmul_rank1_second", spec, NUMPY, cases,
                 "issue 37: batched matmul of (10,) by (10,) gives (1, 1), of (4, 10) by (10,) gives (4, 1)",
                 "NeuralNetwork.proto reads a rank-1 second operand as (D, 1) and keeps both axes.",
                 tolerance=TOLERANCE)


def nn_batched_matmul_quantized_per_channel(writer):
    """Issue 37, from test_nn_builder's test_linear_quant_batchedmatmul_5bit: weights quantized
    with one scale and bias per output channel (3 of them) were refused at compile ("3 scales for
    1 channels"). The values are stored [output, input], so a channel is a row of them."""
    from coremltools.models.neural_network.quantization_utils import _convert_array_to_nbit_quantized_bytes
    codes = np.array([[31, 20, 11], [1, 0, 8]], dtype=np.uint8)  # [input 2, output 3]
    scale, shift = np.array([10.0, 2.0, 3.0]), np.array([-2.0, -10.0, 6.0])
    bias = np.array([1.0, 2.0, 3.0])
    b = nn([("x", (2, 2))], ["y"])
    b.add_batched_mat_mul("matmul", input_names=["x"], output_name="y", weight_matrix_rows=2,
                          weight_matrix_columns=3,
                          W=_convert_array_to_nbit_quantized_bytes(codes.flatten(), 5).tobytes(),
                          bias=bias, is_quantized_weight=True, quantization_type="linear", nbits=5,
                          quant_scale=scale, quant_bias=shift)
    spec = finish(b)
    weights = codes.astype(np.float64) * scale + shift
    rng = np.random.default_rng(3704)
    xs = [f32([[5, 6], [10, 12]]), f32(rng.standard_normal((2, 2)))]
    cases = [{"inputs": {"x": x}, "outputs": {"y": x @ weights + bias}} for x in xs]
    writer.write("nn_batched_matmul_quantized_per_channel", spec, NUMPY, cases,
                 "issue 37: batched matmul with 5-bit weights, one linear scale and bias per output channel",
                 "Dequantized in float64 as scale[o] * code + bias[o], o the output channel.", tolerance=TOLERANCE)


def nms_reference(boxes, scores, iou_threshold, score_threshold, max_boxes, per_class):
    """NeuralNetwork.proto's NonMaximumSuppression in NumPy float64, as test_numpy_nn_layers'
    reference computes it: per batch, boxes in descending order of their best class score, those
    above the score threshold kept unless a kept box (of the same best class, per class) overlaps
    them by more than the IoU threshold; none kept gives the best box; at most max_boxes."""
    batches, count, classes = scores.shape
    out_boxes, out_scores = np.zeros((batches, max_boxes, 4)), np.zeros((batches, max_boxes, classes))
    out_ids, out_counts = -np.ones((batches, max_boxes)), np.zeros(batches)
    for n in range(batches):
        cx, cy, w, h = (boxes[n, :, k] for k in range(4))
        x1, x2, y1, y2 = cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2
        best, label = scores[n].max(axis=1), scores[n].argmax(axis=1)
        kept = []
        for i in sorted(range(count), key=lambda i: (-best[i], i)):
            if len(kept) == max_boxes or not best[i] > score_threshold:
                continue
            def iou(j):
                inter = max(0, min(x2[i], x2[j]) - max(x1[i], x1[j])) * max(0, min(y2[i], y2[j]) - max(y1[i], y1[j]))
                with np.errstate(divide="ignore", invalid="ignore"):  # 0 / 0: NaN, never above the threshold
                    return inter / (w[i] * h[i] + w[j] * h[j] - inter)
            if not any((not per_class or label[j] == label[i]) and iou(j) > iou_threshold for j in kept):
                kept.append(i)
        if not kept:
            kept = [int(np.argmax(best))]
        out_boxes[n, :len(kept)] = boxes[n, kept]
        out_scores[n, :len(kept)] = scores[n, kept]
        out_ids[n, :len(kept)] = kept
        out_counts[n] = len(kept)
    return out_boxes, out_scores, out_ids, out_counts


def nn_non_maximum_suppression(writer):
    """Issue 37, from test_numpy_nn_layers' test_nms_cpu: the NonMaximumSuppression layer was refused
    ("the lowering has no rule for this layer kind yet"). Thresholds and the box count as parameters
    (with and without per-class suppression) and, in the second model, as inputs."""
    rng = np.random.default_rng(3705)
    count, classes, limit = 12, 3, 5
    names = ["boxes_out", "scores_out", "ids", "counts"]
    b = nn([("boxes", (2, count, 4)), ("scores", (2, count, classes))], names + [n + "_per_class" for n in names])
    b.add_nms("nms", ["boxes", "scores"], names, iou_threshold=0.3, score_threshold=0.25, max_boxes=limit,
              per_class_suppression=False)
    b.add_nms("nms_per_class", ["boxes", "scores"], [n + "_per_class" for n in names], iou_threshold=0.3,
              score_threshold=0.25, max_boxes=limit, per_class_suppression=True)
    spec = finish(b)
    cases = []
    for high in (1.0, 0.2):  # the second case: no score above the threshold, the best box kept
        boxes = f32(np.concatenate([rng.uniform(0, 1, (2, count, 2)), rng.uniform(0.1, 0.5, (2, count, 2))], axis=2))
        scores = f32(rng.uniform(0, high, (2, count, classes)))
        outputs = dict(zip(names, nms_reference(boxes, scores, f32(0.3), f32(0.25), limit, False)))
        outputs.update(zip([n + "_per_class" for n in names], nms_reference(boxes, scores, f32(0.3), f32(0.25), limit, True)))
        cases.append({"inputs": {"boxes": boxes, "scores": scores}, "outputs": outputs})
    writer.write("nn_non_maximum_suppression", spec, NUMPY, cases,
                 "issue 37: NonMaximumSuppression, 2 batches of 12 boxes and 3 classes, at most 5 kept, "
                 "with and without per-class suppression",
                 "The reference is test_numpy_nn_layers' rule in NumPy float64 (no TensorFlow).", tolerance=TOLERANCE)

    b = nn([("boxes", (1, count, 4)), ("scores", (1, count, classes)), ("iou", (1,)), ("score", (1,)), ("limit", (1,))], names)
    b.add_nms("nms", ["boxes", "scores", "iou", "score", "limit"], names, per_class_suppression=False)
    spec = finish(b)
    cases = []
    for iou, score, limit in ((0.2, 0.5, 4), (0.6, 0.1, 7)):
        boxes = f32(np.concatenate([rng.uniform(0, 1, (1, count, 2)), rng.uniform(0.1, 0.5, (1, count, 2))], axis=2))
        scores = f32(rng.uniform(0, 1, (1, count, classes)))
        cases.append({"inputs": {"boxes": boxes, "scores": scores, "iou": f32([iou]), "score": f32([score]), "limit": f32([limit])},
                      "outputs": dict(zip(names, nms_reference(boxes, scores, f32(iou), f32(score), limit, False)))})
    writer.write("nn_non_maximum_suppression_inputs", spec, NUMPY, cases,
                 "issue 37: NonMaximumSuppression whose thresholds and box count are inputs (4 then 7 boxes)",
                 "The output's box count follows the max-boxes input of each prediction.", tolerance=TOLERANCE)


def nn_non_maximum_suppression_inverted_boxes(writer):
    """Found running test_torch_ops' TestNms in full (issue 37's audit): torchvision.ops.nms on random
    integer corners (x1 > x2 or y1 > y2 in most boxes) converts to boxes of negative width or
    height (x1 + (x2 - x1) / 2, ...), and 32 of the 48 neural-network and ML-program cases gave other
    indices than PyTorch. modelc put such a box's corners in order, making it a real box; by
    coremltools' own IoU reference (test_nms_cpu's _compute_iou_matrix) and torchvision, the corners
    stay as the center and size give them, so such a box overlaps no other (its intersection is 0)."""
    rng = np.random.default_rng(3712)
    count = 12
    names = ["boxes_out", "scores_out", "ids", "counts"]
    b = nn([("boxes", (1, count, 4)), ("scores", (1, count, 1)), ("iou", (1,)), ("score", (1,)), ("limit", (1,))], names)
    b.add_nms("nms", ["boxes", "scores", "iou", "score", "limit"], names, per_class_suppression=False)
    spec = finish(b)

    def ordered_corners_reference(boxes, scores, iou_threshold):
        """modelc's former rule: each box's corners sorted first."""
        cx, cy, w, h = (boxes[0, :, k] for k in range(4))
        fixed = np.stack([cx, cy, np.abs(w), np.abs(h)], axis=1)[None]
        return nms_reference(fixed, scores, iou_threshold, f32(-1e30), count, False)[2]

    cases, differs = [], 0
    for iou in (0.0, 0.2, 0.5):
        while True:
            corners = rng.integers(0, count, (count, 4)).astype(np.float64)  # x1, y1, x2, y2 as test_nms draws them
            width, height = corners[:, 2] - corners[:, 0], corners[:, 3] - corners[:, 1]
            boxes = f32(np.stack([corners[:, 0] + width / 2, corners[:, 1] + height / 2, width, height], axis=1)[None])
            scores = f32(rng.permutation(count).reshape(1, count, 1))
            cx, cy, w, h = (boxes[0, :, k] for k in range(4))
            lo_x, hi_x, lo_y, hi_y = cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2
            inter = (np.maximum(0, np.minimum(hi_x[:, None], hi_x) - np.maximum(lo_x[:, None], lo_x))
                     * np.maximum(0, np.minimum(hi_y[:, None], hi_y) - np.maximum(lo_y[:, None], lo_y)))
            with np.errstate(divide="ignore", invalid="ignore"):
                ious = inter / ((w * h)[:, None] + w * h - inter)
            if iou == 0 or not np.any(np.isclose(ious, iou)):  # no pair at the threshold (test_nms avoids it too)
                break
        outputs = dict(zip(names, nms_reference(boxes, scores, f32(iou), f32(-1e30), count, False)))
        differs += not np.array_equal(outputs["ids"], ordered_corners_reference(boxes, scores, f32(iou)))
        cases.append({"inputs": {"boxes": boxes, "scores": scores, "iou": f32([iou]), "score": f32([-1e30]),
                                 "limit": f32([count])}, "outputs": outputs})
    assert differs >= 2, differs
    writer.write("nn_non_maximum_suppression_inverted_boxes", spec, NUMPY, cases,
                 "audit of issue 37: NonMaximumSuppression of boxes of negative width or height (torchvision's nms "
                 "of unordered corners), IoU thresholds 0, 0.2, 0.5",
                 "nms_reference (test_nms_cpu's IoU in NumPy float64): corners cx -/+ w/2, cy -/+ h/2 as given, "
                 "so a box of negative width or height intersects none.", tolerance=TOLERANCE)


def nn_scatter_rank2_indices(writer):
    """Issue 37, from test_numpy_nn_layers' test_scatter_cpu: scatter whose indices have rank 2 (as
    TensorFlow's scatter_update takes them: updates are [indices..., rest of ref]) was refused."""
    b = nn([("ref", (5, 3)), ("distinct", (2, 2)), ("repeated", (2, 2)), ("updates", (2, 2, 3)),
            ("ref3", (2, 5, 3)), ("updates3", (2, 2, 2, 3))], ["updated", "added", "axis1"])
    b.add_scatter("update", ["ref", "distinct", "updates"], "updated", axis=0, mode="UPDATE")
    b.add_scatter("add", ["ref", "repeated", "updates"], "added", axis=0, mode="ADD")
    b.add_scatter("axis1", ["ref3", "repeated", "updates3"], "axis1", axis=1, mode="ADD")
    spec = finish(b)
    rng = np.random.default_rng(3706)
    cases = []
    for distinct, repeated in (([[4, 0], [2, 1]], [[1, 3], [1, 0]]), ([[0, 3], [1, 2]], [[2, 2], [2, 4]])):
        distinct, repeated = np.array(distinct), np.array(repeated)
        ref, updates = f32(rng.standard_normal((5, 3))), f32(rng.standard_normal((2, 2, 3)))
        ref3, updates3 = f32(rng.standard_normal((2, 5, 3))), f32(rng.standard_normal((2, 2, 2, 3)))
        updated = ref.copy()
        updated[distinct.reshape(-1)] = updates.reshape(-1, 3)
        added = ref.copy()
        np.add.at(added, repeated.reshape(-1), updates.reshape(-1, 3))
        axis1 = ref3.copy()
        np.add.at(axis1, (slice(None), repeated.reshape(-1)), updates3.reshape(2, -1, 3))
        cases.append({"inputs": {"ref": ref, "distinct": f32(distinct), "repeated": f32(repeated), "updates": updates,
                                 "ref3": ref3, "updates3": updates3},
                      "outputs": {"updated": updated, "added": added, "axis1": axis1}})
    writer.write("nn_scatter_rank2_indices", spec, NUMPY, cases,
                 "issue 37: scatter with (2, 2) indices, UPDATE (distinct indices) and ADD (repeated) on axis 0, ADD on axis 1",
                 "updates[i, j] goes to ref[indices[i, j]] (np.add.at for ADD).", tolerance=TOLERANCE)


def nn_tile_short_reps(writer):
    """Issue 37, from test_numpy_nn_layers' test_tile_cpu and test_dynamic_tile_cpu: fewer repetitions
    than axes repeat the last axes as np.tile does; one repetition was applied to every axis (static)
    or refused (as an input)."""
    b = nn([("x", (2, 3)), ("x3", (2, 3, 2)), ("reps", (1,))], ["static", "dynamic"])
    b.add_tile("static", "x", "static", [4])
    b.add_tile("dynamic", ["x3", "reps"], "dynamic")
    spec = finish(b)
    rng = np.random.default_rng(3707)
    cases = []
    for reps in (3, 1):
        x, x3 = f32(rng.standard_normal((2, 3))), f32(rng.standard_normal((2, 3, 2)))
        cases.append({"inputs": {"x": x, "x3": x3, "reps": f32([reps])},
                      "outputs": {"static": np.tile(x, [4]), "dynamic": np.tile(x3, [reps])}})
    writer.write("nn_tile_short_reps", spec, NUMPY, cases,
                 "issue 37: tile of (2, 3) by [4] gives (2, 12); of (2, 3, 2) by a reps input [3] gives (2, 3, 6)",
                 "np.tile: missing leading repetitions are ones.", tolerance=TOLERANCE)


def nn_slice_by_size_input_begin(writer):
    """Issue 37, from test_numpy_nn_layers' test_slice_by_size_cpu: sliceBySize whose begin is an input
    read the begin as the bits of a float (begin 1077936128 for 3)."""
    b = nn([("x", (4, 5, 3)), ("begin", (1,))], ["y"])
    b.add_slice_by_size("slice", ["x", "begin"], "y", axis=1, size=2)
    spec = finish(b)
    rng = np.random.default_rng(3708)
    cases = []
    for begin in (3, 0, 1):
        x = f32(rng.standard_normal((4, 5, 3)))
        cases.append({"inputs": {"x": x, "begin": f32([begin])}, "outputs": {"y": x[:, begin:begin + 2]}})
    writer.write("nn_slice_by_size_input_begin", spec, NUMPY, cases,
                 "issue 37: sliceBySize of (4, 5, 3) on axis 1, size 2, begin from an input (3, 0, 1)",
                 "x[:, begin:begin + 2].", tolerance=TOLERANCE)


def nn_rank_kept_by_converter_layers(writer):
    """Issue 37, from the PyTorch converter tests on the neural-network backend (TestSlice, TestIndex,
    TestBroadcastTensors): a `slice` of a rank-1 blob gave rank 3 ((1, 1, 4) for (4,)); `gatherND` with
    constant (3, 2) indices was planned at rank 4 and refused; an identity network whose copy layer
    writes over its input's blob was called invalid ("no layer produces this output")."""
    b = nn([("x", (10,)), ("t", (2, 5, 3, 4)), ("a", (3,))], ["sliced", "gathered", "a"])
    b.add_slice("slice", "x", "sliced", axis="width", start_index=0, end_index=7, stride=2)
    indices = np.array([[0, 3], [1, 3], [1, 4]], dtype=np.float64)
    b.add_load_constant_nd("indices", "indices", constant_value=indices, shape=indices.shape)
    b.add_gather_nd("gather", ["t", "indices"], "gathered")
    b.add_copy("copy_in", "a", "a_copy")
    b.add_copy("copy_out", "a_copy", "a")
    spec = finish(b)
    rng = np.random.default_rng(3709)
    cases = []
    for _ in range(2):
        x, t, a = f32(rng.standard_normal(10)), f32(rng.standard_normal((2, 5, 3, 4))), f32(rng.standard_normal(3))
        gathered = np.stack([t[i, j] for i, j in indices.astype(int)])
        cases.append({"inputs": {"x": x, "t": t, "a": a}, "outputs": {"sliced": x[0:7:2], "gathered": gathered, "a": a}})
    writer.write("nn_rank_kept_by_converter_layers", spec, NUMPY, cases,
                 "issue 37: slice of (10,) gives (4,); gatherND of (2, 5, 3, 4) by constant (3, 2) indices gives "
                 "(3, 3, 4); a copy over the input's blob returns the input",
                 "x[0:7:2]; t[i, j] per index row; a unchanged.", tolerance=TOLERANCE)


def nn_rank5_sequence_length(writer):
    """Issue 37, from test_custom_neural_nets' test_fixed_seq_len: a rank-5 network declares its input
    [C, H, W] = (1, 1, 1) and takes a [Seq, 1, C, H, W] array of 15 steps, which an inner product of
    32 · 15 inputs needs (embedding, permute over (Seq, C, H, W), flatten, inner product). modelc
    planned the declared sequence of 1 at load and refused the model; it now takes the sequence
    length from the input, as Core ML does."""
    steps, channels, vocabulary = 15, 32, 10
    rng = np.random.default_rng(3710)
    table = rng.standard_normal((channels, vocabulary))  # (output channels, input dim)
    dense = rng.standard_normal((2, channels * steps))
    b = NeuralNetworkBuilder([("data", datatypes.Array(1, 1, 1))], [("output", datatypes.Array(1, 1, 1))])
    b.add_embedding("embed", W=table, b=None, input_dim=vocabulary, output_channels=channels, has_bias=0,
                    input_name="data", output_name="embed")
    b.add_permute("permute", dim=[3, 1, 2, 0], input_name="embed", output_name="permute")
    b.add_flatten("flatten", mode=0, input_name="permute", output_name="flatten")
    b.add_inner_product("dense", W=dense, b=None, input_channels=channels * steps, output_channels=2, has_bias=0,
                        input_name="flatten", output_name="output")
    spec = b.spec
    del spec.description.output[0].type.multiArrayType.shape[:]
    cases = []
    for _ in range(2):
        ids = rng.integers(0, vocabulary, steps)
        embedded = table[:, ids]               # [C, Seq]: step s's embedding in column s
        flat = embedded.reshape(-1)            # (Seq, C, H, W) permuted to (W, C, H, Seq), flattened C first
        y = dense @ flat
        cases.append({"inputs": {"data": ids.astype(np.float64).reshape(steps, 1, 1, 1, 1)},
                      "outputs": {"output": y.reshape(1, 1, 2, 1, 1)}})
    writer.write("nn_rank5_sequence_length", spec, NUMPY, cases,
                 "issue 37: a rank-5 network declaring (1, 1, 1) takes a (15, 1, 1, 1, 1) sequence: "
                 "embedding, permute, flatten, inner product of 480 inputs",
                 "NumPy float64: the 15 embeddings as columns, flattened channel-major, times the dense weights.",
                 tolerance=TOLERANCE)


def nn_image_input_nhwc_transpose(writer):
    """Issue 37, from test_model's test_multiarray_to_image_input_util_HWC_format: in a rank-aware
    network an image input is [1, C, H, W], and make_image_input(image_format="NHWC") puts a
    transpose [1, 2, 0] after an image made from an (H, W, C) array (and [0, 2, 3, 1] after one made
    from (1, H, W, C)). modelc refused the first ("perm [1, 2, 0] is not a permutation of 4 axes");
    Core ML runs it, the perm permuting the trailing axes. The outputs are declared (H, W, C) and
    (1, H, W, C) as the test declares its own: that is the shape it checks."""
    height, width, channels = 2, 3, 3
    b = NeuralNetworkBuilder([("data", datatypes.Array(height, width, channels)),
                              ("data4", datatypes.Array(1, height, width, channels))],
                             [("out", datatypes.Array(height, width, channels)),
                              ("out4", datatypes.Array(1, height, width, channels))],
                             disable_rank5_shape_mapping=True)
    b.add_activation("linear", "LINEAR", "data", "out")
    b.add_activation("linear4", "LINEAR", "data4", "out4")
    # What make_image_input does (coremltools.models.neural_network.utils), with the test's parameters.
    b.set_pre_processing_parameters(image_input_names=["data", "data4"], red_bias=-5, green_bias=-6,
                                    blue_bias=-2.5, image_scale=10.0, image_format="NHWC")
    spec = finish(b)
    assert {layer.input[0]: list(layer.transpose.axes) for layer in spec.neuralNetwork.layers
            if layer.HasField("transpose")} == {"data": [1, 2, 0], "data4": [0, 2, 3, 1]}
    rng = np.random.default_rng(3711)
    bias = np.array([-5, -6, -2.5])
    cases = []
    for _ in range(2):
        a, c = npar.random_image(rng, width, height), npar.random_image(rng, width, height)
        cases.append({"inputs": {"data": npar.image_value(a), "data4": npar.image_value(c)},
                      "outputs": {"out": a.astype(np.float64) * 10 + bias,
                                  "out4": (c.astype(np.float64) * 10 + bias)[None]}})
    writer.write("nn_image_input_nhwc_transpose", spec, NUMPY, cases,
                 "issue 37: an RGB image input of a rank-aware network ([1, 3, 2, 3]) transposed by make_image_input's "
                 "NHWC perms [1, 2, 0] and [0, 2, 3, 1] gives (2, 3, 3) and (1, 2, 3, 3)",
                 "pixels (H, W, C) times 10 plus the biases (-5, -6, -2.5): the test's own reference "
                 "([4, 2, 5] gives [35, 14, 47.5]); outputs declared as the test declares them.",
                 tolerance=TOLERANCE)


def nn_loop_break_continue(writer):
    """Found running test_numpy_nn_layers in full (issue 37's audit): CoreML3NetworkStressTest's
    test_power_iteration_cpu stops its loop with a loopBreak inside a branch, which modelc refused
    ("loopBreak: the lowering has no rule for this layer kind yet"). By NeuralNetwork.proto a
    loopBreak ends the loop and a loopContinue the iteration: the layers after them in the body do not
    run. Two loops: doubling a value until it passes a limit, counting the steps after the break's
    branch (at most 50 iterations); adding the even ones of 1..6 (a continue skips the odd ones)."""
    b = nn([("x", (1,)), ("limit", (1,)), ("t0", (1,))], ["value", "steps", "i", "total"])
    b.add_activation("start_value", "LINEAR", "x", "value", params=[1.0, 0.0])
    b.add_load_constant_nd("zero_steps", "steps", constant_value=np.zeros(1), shape=(1,))
    doubling = b.add_loop("doubling", max_iterations=50)
    body = NeuralNetworkBuilder(nn_spec=doubling.loop.bodyNetwork, disable_rank5_shape_mapping=True)
    body.add_activation("double", "LINEAR", "value", "doubled", params=[2.0, 0.0])
    body.add_copy("keep_doubled", "doubled", "value")
    body.add_greater_than("past_limit", ["value", "limit"], "past")
    stop = body.add_branch("stop_when_past", "past")
    NeuralNetworkBuilder(nn_spec=stop.branch.ifBranch, disable_rank5_shape_mapping=True).add_loop_break("break")
    body.add_activation("count_step", "LINEAR", "steps", "steps_plus_1", params=[1.0, 1.0])
    body.add_copy("keep_steps", "steps_plus_1", "steps")

    b.add_load_constant_nd("zero_i", "i", constant_value=np.zeros(1), shape=(1,))
    b.add_load_constant_nd("two", "two", constant_value=np.full(1, 2.0), shape=(1,))
    b.add_activation("start_total", "LINEAR", "t0", "total", params=[1.0, 0.0])
    evens = b.add_loop("evens", max_iterations=6)
    body = NeuralNetworkBuilder(nn_spec=evens.loop.bodyNetwork, disable_rank5_shape_mapping=True)
    body.add_activation("next_i", "LINEAR", "i", "i_plus_1", params=[1.0, 1.0])
    body.add_copy("keep_i", "i_plus_1", "i")
    body.add_mod_broadcastable("parity", ["i", "two"], "odd")
    skip = body.add_branch("skip_odd", "odd")
    NeuralNetworkBuilder(nn_spec=skip.branch.ifBranch, disable_rank5_shape_mapping=True).add_loop_continue("continue")
    body.add_add_broadcastable("add_i", ["total", "i"], "total_plus_i")
    body.add_copy("keep_total", "total_plus_i", "total")
    spec = finish(b)

    def reference(x, limit, t0):
        value, steps = x, 0.0
        for _ in range(50):
            value *= 2
            if value > limit:
                break
            steps += 1
        i, total = 0.0, t0
        for _ in range(6):
            i += 1
            if i % 2:
                continue
            total += i
        return value, steps, i, total

    cases = []
    for x, limit, t0 in ((0.75, 40.0, 0.5), (3.0, 2.0, -1.0), (0.001, 1e9, 10.0)):
        value, steps, i, total = reference(*(float(np.float32(v)) for v in (x, limit, t0)))
        cases.append({"inputs": {"x": f32([x]), "limit": f32([limit]), "t0": f32([t0])},
                      "outputs": {"value": f32([value]), "steps": np.array([steps]), "i": np.array([i]),
                                  "total": f32([total])}})
    writer.write("nn_loop_break_continue", spec, NUMPY, cases,
                 "audit of issue 37: loopBreak in a branch ends the loop, the layers after it skipped (doubling "
                 "0.75 past 40 gives 48, 5 steps counted); loopContinue skips the rest of the iteration (t0 + 2 + 4 + 6)",
                 "NumPy float64 of NeuralNetwork.proto's loop: for up to 50 iterations value *= 2, break when "
                 "value > limit, else steps += 1; i in 1..6, continue on odd i, else total += i.",
                 tolerance=TOLERANCE)


def nn_gather_nd_stacked_indices(writer):
    """Found by the converter tests at SAMPLE=0.1 with NumPy 2.3 (TestEinsum::test_binary_einsum,
    jiii,ijjk->jk, dynamic, neural network): the converter takes an einsum's diagonal with a gatherND
    whose indices are a stack of ranges computed from the input's shape. The indices' last dimension K
    (the stack's two inputs) was not known at load, the lowering took K = 1 and gave the result rank 4;
    it computes rank 3, and the prediction was refused. A stack along its last axis has as many
    columns as it has inputs."""
    b = nn([("x", (3, 3, 4, 2))], ["y"])
    b.add_get_shape("shape", "x", "shape")
    b.add_slice_static("first", "shape", "n", begin_ids=[0], end_ids=[1], strides=[1],
                       begin_masks=[False], end_masks=[False])
    b.add_range_dynamic("range", ["n"], "r", start=0, step=1)
    b.add_stack("stack", ["r", "r"], "indices", axis=1)
    b.add_gather_nd("diagonal", ["x", "indices"], "y")
    spec = finish(b)
    rng = np.random.default_rng(2537)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((3, 3, 4, 2)))
        cases.append({"inputs": {"x": x}, "outputs": {"y": np.stack([x[i, i] for i in range(3)])}})
    writer.write("nn_gather_nd_stacked_indices", spec, NUMPY, cases,
                 "converter tests: gatherND of a (3, 3, 4, 2) blob by the indices stack([range(3), range(3)], axis 1) "
                 "gives the diagonal (3, 4, 2), rank 3",
                 "NeuralNetwork.proto's gatherND: indices (..., K) select x[i_1, ..., i_K]; output "
                 "indices.shape[:-1] + x.shape[K:]. NumPy float64.", tolerance=TOLERANCE)


def program_lstm_initial_state_rows(writer):
    """Found by the converter tests at SAMPLE=0.1 with NumPy 2.3 (TestLSTMWithPackedSequence, ML
    programs and neural networks): coremltools converts a packed sequence's LSTM with zero initial
    states of shape (longest sequence, H) made at run time, not (batch, H); modelc refused the
    state ("initial states need 3 × 6 values") where Core ML runs the model. An initial state of
    more rows than the batch is read by its first rows."""
    hidden, inputs, batch, steps = 6, 4, 3, 10
    rng = np.random.default_rng(2538)
    w_ih = rng.standard_normal((4 * hidden, inputs)).astype(np.float32) * 0.5
    w_hh = rng.standard_normal((4 * hidden, hidden)).astype(np.float32) * 0.5
    bias = rng.standard_normal(4 * hidden).astype(np.float32) * 0.1

    @mb.program(input_specs=[mb.TensorSpec(shape=(steps, batch, inputs)), mb.TensorSpec(shape=(batch,), dtype=types.int32)],
                opset_version=ct.target.iOS15)
    def prog(x, lengths):
        longest = mb.slice_by_index(x=lengths, begin=[0], end=[1])
        shape = mb.concat(values=(np.array([1], dtype=np.int32), longest, np.array([hidden], dtype=np.int32)), axis=0)
        zeros = mb.squeeze(x=mb.fill(shape=shape, value=0.0), axes=[0])
        y, _, _ = mb.lstm(x=x, initial_h=zeros, initial_c=zeros, weight_ih=w_ih, weight_hh=w_hh, bias=bias,
                          direction="forward", output_sequence=True, recurrent_activation="sigmoid",
                          cell_activation="tanh", activation="tanh")
        return mb.identity(x=y, name="y")

    model = npar.finish_program(prog, ct.target.iOS15)

    def reference(x):
        # MIL's gate order (input, forget, output, cell) is NeuralNetwork.proto's (i, f, o, z).
        zeros = np.zeros((batch, hidden))
        gates = [np.split(w.astype(np.float64), 4) for w in (w_ih, w_hh, bias)]
        return lstm_reference(x, zeros, zeros, *gates)[0]

    cases = []
    for lengths in ([10, 5, 1], [7, 7, 2]):
        x = f32(rng.standard_normal((steps, batch, inputs)))
        cases.append({"inputs": {"x": x, "lengths": np.array(lengths, dtype=np.int32)}, "outputs": {"y": reference(x)}})
    writer.write_package("program_lstm_initial_state_rows", model, NUMPY, cases,
                         "converter tests: an LSTM of batch 3 whose zero initial states have (lengths[0], 6) rows "
                         "(10 and 7) runs from zero states",
                         "MIL lstm (iOS15): gates input, forget, output (sigmoid), cell (tanh); c = f c + i g, "
                         "h = o tanh(c). NumPy float64.", tolerance=TOLERANCE)


def nn_batchnorm_batch(writer):
    rng = np.random.default_rng(2512)
    c = 4
    gamma, beta = 1 + npar.rand(rng, c), npar.rand(rng, c)
    mean, var = npar.rand(rng, c), 0.5 + np.abs(npar.rand(rng, c))
    b = nn([("x", (4, c, 1, 1))], ["y"])
    b.add_batchnorm("bn", channels=c, gamma=gamma, beta=beta, mean=mean, variance=var,
                    input_name="x", output_name="y", epsilon=1e-5)
    spec = finish(b)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((4, c, 1, 1)))
        y = ((x - f32(mean)[:, None, None]) / np.sqrt(f32(var)[:, None, None] + 1e-5)
             * f32(gamma)[:, None, None] + f32(beta)[:, None, None])
        cases.append({"inputs": {"x": x}, "outputs": {"y": y}})
    writer.write("nn_batchnorm_batch", spec, NUMPY, cases,
                 "defect 6: batchnorm with 4 channels on a (4, 4, 1, 1) input",
                 "The channel axis of a rank-4 input is axis 1 (-3); axis 0 is batch.",
                 tolerance=TOLERANCE)


def program_flexible_channels(writer):
    """Found by the same tests (TestConv::test_type_inference_dynamic_x_with_groups): a
    program whose channel dimension is flexible (default 1) and whose grouped convolution
    needs 8 was refused at load as invalid, planning the default shape."""
    rng = np.random.default_rng(2516)
    w = npar.rand(rng, 6, 4, 2, 2, scale=0.5)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, get_new_symbol(), 4, 4))],
                opset_version=ct.target.iOS15)
    def prog(x):
        return mb.conv(x=x, weight=w, groups=2, name="y")

    pipeline = ct.PassPipeline.DEFAULT
    pipeline.remove_passes([p for p in pipeline.passes if p.startswith("common::fuse_")])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                           minimum_deployment_target=ct.target.iOS15, pass_pipeline=pipeline,
                           compute_precision=ct.precision.FLOAT32,
                           inputs=[ct.TensorType(name="x", shape=(1, ct.RangeDim(1, 16, default=1), 4, 4))])
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((1, 8, 4, 4)))
        cases.append({"inputs": {"x": x},
                      "outputs": {"y": npar.conv2d(x[0], f32(w), None, groups=2)[None]}})
    writer.write_package("program_flexible_channels", model, NUMPY, cases,
                         "a grouped conv whose input's channel dimension is flexible (default 1, "
                         "run with 8) loads and runs",
                         "The declared default of a flexible input is one allowed shape, not a "
                         "promise that it fits the weights.", tolerance=TOLERANCE)


def program_cast_of_constexpr(writer):
    """Found by the same tests (iOS16 TestConstexprCast): converting with float16 compute
    precision casts a constexpr's result, a constant; `cast` of a constant was refused
    (exit 94, "a constant x is not supported here")."""
    w = np.array([[0, 1, -2], [3, -4, 5]], dtype=np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS16)
    def prog(x):
        return mb.add(x=x, y=mb.constexpr_cast(source_val=w, output_dtype="fp32"), name="y")

    model = npar.finish_program(prog, ct.target.iOS16, precision=ct.precision.FLOAT16)
    rng = np.random.default_rng(2517)
    cases = []
    for _ in range(2):
        # Quarters below 8: exact in float16, so the float16 program adds them exactly.
        x = rng.integers(-32, 32, (2, 3)).astype(np.float64) / 4
        cases.append({"inputs": {"x": x}, "outputs": {"y": x + w.astype(np.float64)}})
    writer.write_package("program_cast_of_constexpr", model, NUMPY, cases,
                         "iOS16 constexpr_cast whose result the float16 conversion casts: cast of "
                         "a constant",
                         "Inputs and weights exact in float16, so the sums are exact.",
                         tolerance=TOLERANCE)


def nn_l2_normalize_epsilon(writer):
    """Found by the same tests (TestNormalizationL2Norm): epsilon was applied as
    max(sum, epsilon) instead of the proto's sqrt(sum + epsilon)."""
    eps = 5.7
    b = nn([("x", (2, 3, 2, 2)), ("z", (3, 4, 5))], ["batched", "single"])
    b.add_l2_normalize("batched", "x", "batched", epsilon=eps)
    b.add_l2_normalize("single", "z", "single", epsilon=eps)
    spec = finish(b)
    rng = np.random.default_rng(2514)
    e = float(np.float32(eps))
    cases = []
    for _ in range(2):
        x, z = f32(rng.standard_normal((2, 3, 2, 2))), f32(rng.standard_normal((3, 4, 5)))
        per_item = np.sqrt((x ** 2).sum(axis=(1, 2, 3), keepdims=True) + e)
        cases.append({"inputs": {"x": x, "z": z},
                      "outputs": {"batched": x / per_item, "single": z / np.sqrt((z ** 2).sum() + e)}})
    writer.write("nn_l2_normalize_epsilon", spec, NUMPY, cases,
                 "L2 normalize with epsilon 5.7, on a batch of 2 [3, 2, 2] items and on one "
                 "[3, 4, 5] blob",
                 "NeuralNetwork.proto: x / sqrt(sum of x^2 + epsilon) over C, H, W of each item.",
                 tolerance=TOLERANCE)


def nn_convolution_weights_input(writer):
    """Found by coremltools' iOS14 TestConv::test_builder_to_backend_stress_weights_input:
    specification 4 allows a convolution's weights as its second input blob,
    [outputChannels, kernelChannels, kernelHeight, kernelWidth]; neither engine ran it."""
    groups, c_in, c_out, kh, kw = 2, 4, 6, 3, 2
    pads, strides = (1, 0, 2, 1), (2, 1)
    b = nn([("x", (1, c_in, 5, 6)), ("w", (c_out, c_in // groups, kh, kw))], ["y"])
    rng = np.random.default_rng(2515)
    bias = f32(rng.standard_normal(c_out))
    b.add_convolution("conv", kernel_channels=c_in // groups, output_channels=c_out, height=kh, width=kw,
                      stride_height=strides[0], stride_width=strides[1], border_mode="valid", groups=groups,
                      W=None, b=bias, has_bias=True, input_name=["x", "w"], output_name="y",
                      padding_top=pads[0], padding_bottom=pads[1], padding_left=pads[2], padding_right=pads[3])
    spec = finish(b)
    # The builder stops before the bias when the weights are an input; the proto keeps it.
    spec.neuralNetwork.layers[0].convolution.bias.floatValue.extend(bias.astype(np.float32))

    def conv(x, w):
        x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
        h = (x.shape[2] - kh) // strides[0] + 1
        v = (x.shape[3] - kw) // strides[1] + 1
        y = np.zeros((x.shape[0], c_out, h, v))
        per = c_out // groups
        for o in range(c_out):
            g = o // per
            xs = x[:, g * (c_in // groups):(g + 1) * (c_in // groups)]
            for i in range(h):
                for j in range(v):
                    window = xs[:, :, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
                    y[:, o, i, j] = (window * w[o].astype(np.float64)).sum(axis=(1, 2, 3))
        return y + bias.astype(np.float64).reshape(1, c_out, 1, 1)

    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((1, c_in, 5, 6)))
        w = f32(rng.standard_normal((c_out, c_in // groups, kh, kw)))
        cases.append({"inputs": {"x": x, "w": w}, "outputs": {"y": conv(x, w)}})
    writer.write("nn_convolution_weights_input", spec, NUMPY, cases,
                 "convolution whose weights [6, 2, 3, 2] are its second input: 2 groups, bias, "
                 "padding (1, 0, 2, 1), strides (2, 1)",
                 "NeuralNetwork.proto: grouped cross-correlation of the padded input with the "
                 "weight blob, plus bias, in float64.",
                 tolerance=TOLERANCE)


# ---------------------------------------------------------------------------
# Valid models modelc does not run: refused as unsupported (exit 94), not invalid (exit 76)
# ---------------------------------------------------------------------------

UNSUPPORTED_DIR = "Unsupported"


def unsupported_models(writer):
    """Writes Regressions/Unsupported/NAME.mlmodel: valid by NeuralNetwork.proto, not run."""
    directory = os.path.join(writer.dir, UNSUPPORTED_DIR)
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(2513)

    # A custom layer: valid by the proto, its implementation is the app's own code.
    b = nn([("x", (1, 2, 4, 4))], ["y"])
    from coremltools.proto import NeuralNetwork_pb2
    custom = NeuralNetwork_pb2.CustomLayerParams()
    custom.className = "AppScaleLayer"
    custom.description = "a scale the app implements"
    b.add_custom("scale", ["x"], ["y"], custom)
    spec = finish(b)
    npar.set_metadata(spec, "Regression fixture: a custom layer (the app's own code)")
    npar.write_bytes(os.path.join(directory, "nn_custom_layer.mlmodel"), npar.serialize(spec))

    # A result whose rank comes from a shape input of flexible length, read by another layer
    # (the lowering fixes every rank it computes with when the model loads).
    from coremltools.models.neural_network import flexible_shape_utils
    b = nn([("x", (3,))], ["y"])
    b.add_fill_dynamic("fill", input_name="x", output_name="filled", value=1.0)
    b.add_squeeze("squeeze", input_name="filled", output_name="y", squeeze_all=True)
    spec = finish(b)
    flexible_shape_utils.set_multiarray_ndshape_range(spec, "x", lower_bounds=[1], upper_bounds=[5])
    npar.set_metadata(spec, "Regression fixture: a run-time rank read by another layer")
    npar.write_bytes(os.path.join(directory, "nn_rank_from_values_read.mlmodel"), npar.serialize(spec))
    del rng


def write_readme(writer):
    lines = ["# Conformance regressions", "",
             "Made by `Fixtures/conformance_regressions.py` (run by `Fixtures/generate.py`): the "
             "smallest model for each defect coremltools' own operation tests (issue 25) and "
             "converter tests (issue 37) found, with NumPy float64 references. Shapes must match exactly, values within each file's "
             "tolerance.", "", "| file | kind | cases | checks |", "|---|---|---|---|"]
    for name, kind, _, count, checks in writer.entries:
        lines.append("| `%s` | %s | %d | %s |" % (name, kind, count, checks))
    lines += ["", "`%s/` holds valid networks modelc does not run: they must be refused as "
              "unsupported (exit 94, naming the layer), never as invalid (exit 76)." % UNSUPPORTED_DIR]
    npar.write_bytes(os.path.join(writer.dir, "README.md"), ("\n".join(lines) + "\n").encode())
    # A pointer in Parity/README.md, after network_parity.py's section (which it rewrites
    # from its heading to the end, so this one is written after it, and replaced here).
    path = os.path.join(os.path.dirname(writer.dir), "README.md")
    text = npar.read_bytes(path).decode() if os.path.exists(path) else "# Parity fixtures\n"
    # This section only: the sections after it (model_references.py's) are kept where they are.
    after = ""
    if README_HEADING in text:
        start = text.index(README_HEADING)
        following = text.find("\n## ", start + len(README_HEADING))
        after = text[following:] if following >= 0 else ""
        text = text[:start].rstrip("\n") + "\n"
    section = ["", README_HEADING, "",
               "Made by `Fixtures/conformance_regressions.py` (also run by `Fixtures/generate.py`), "
               "in `Regressions/`: the smallest model for each defect that coremltools' own "
               "operation tests found, in the same JSON format, where every output must have "
               "exactly the reference's shape; `Regressions/Unsupported/` holds valid networks "
               "modelc refuses as unsupported (exit 94). See `Regressions/README.md`."]
    npar.write_bytes(path, (text + "\n".join(section) + "\n" + after).encode())


def generate(out_dir):
    writer = Writer(out_dir)
    if os.path.isdir(writer.dir):
        shutil.rmtree(writer.dir)
    os.makedirs(writer.dir)
    channel_layer_sweep(writer, "nn_channel_layers_batch1", (1,), 2521)
    channel_layer_sweep(writer, "nn_channel_layers_batch2", (2,), 2522)
    channel_layer_sweep(writer, "nn_channel_layers_rank5", (1, 2), 2523)
    nn_pooling_leading_ones(writer)
    nn_upsample_batch(writer)
    nn_pad_rank2(writer)
    program_gather_batch_dims(writer)
    nn_matmul_constant_transpose(writer)
    program_upsample_modes(writer)
    program_instance_norm_defaults(writer)
    nn_batchnorm_batch(writer)
    nn_batched_matmul_rank1(writer)
    program_transpose_negative(writer)
    program_matmul_broadcast(writer)
    program_reshape_zeros(writer)
    nn_l2_normalize_epsilon(writer)
    nn_convolution_weights_input(writer)
    program_flexible_channels(writer)
    program_cast_of_constexpr(writer)
    program_upsample_fractional(writer)
    nn_upsample_fractional(writer)
    nn_tile_dynamic_reps(writer)
    nn_slice_dynamic_defaults(writer)
    nn_rank_from_values(writer)
    nn_squeeze_all_rank1(writer)
    nn_split_nd_uneven(writer)
    nn_batched_matmul_rank1_second(writer)
    nn_batched_matmul_quantized_per_channel(writer)
    nn_non_maximum_suppression(writer)
    nn_non_maximum_suppression_inverted_boxes(writer)
    nn_scatter_rank2_indices(writer)
    nn_tile_short_reps(writer)
    nn_slice_by_size_input_begin(writer)
    nn_rank_kept_by_converter_layers(writer)
    nn_rank5_sequence_length(writer)
    nn_image_input_nhwc_transpose(writer)
    nn_loop_break_continue(writer)
    nn_gather_nd_stacked_indices(writer)
    program_lstm_initial_state_rows(writer)
    unsupported_models(writer)
    write_readme(writer)
    return writer.entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    entries = generate(os.path.abspath(args.out))
    print("wrote %d regression case files to %s"
          % (len(entries), os.path.join(os.path.abspath(args.out), SUBDIR)))


if __name__ == "__main__":
    sys.exit(main())
