#!/usr/bin/env python3
"""More per-operation fixtures of modelc's tensor engine (Fixtures/Parity/TensorOps, files op_*):
the MIL operations Fixtures/tensor_ops.py does not exercise, and more shapes, data types,
broadcasting and edge cases for the ones it does; and programs with bad parameters the engine
must refuse (Fixtures/Parity/TensorOps/BadParameters).

Usage:
    tensor_op_cases.py [--out DIR] [--only NAME]   (default DIR: the folder of this script;
                                                   NAME: op_… or bad_parameters)

Same format and helpers as tensor_ops.py (imported, not copied): small ML programs built with
coremltools' MIL builder, NumPy float64 references written here from the operation definitions
of coremltools 9.0 (coremltools/converters/mil/mil/ops/defs/iOS15..iOS18). Each case names the
operation types its converted program must still hold (coremltools folds constant-only
operations such as `shape` of a fixed shape away): generation fails otherwise, so that
OperationCoverageTests' count of exercised operations is real.
"""

import argparse
import json
import math
import os
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types, get_new_symbol

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensor_ops  # noqa: E402
from tensor_ops import SUBDIR, erf, rand, write_case  # noqa: E402
from generate import package_root_model_path, parse_model, read_bytes, save_ml_package, save_spec  # noqa: E402

CASES = []


def case(name, ops, tolerance=1e-5, target=ct.target.iOS17):
    """A fixture op_NAME whose converted program must hold every operation type in `ops`."""
    def register(function):
        CASES.append(("op_" + name, set(ops), tolerance, target, function))
        return function
    return register


def program_operations(package):
    spec = parse_model(read_bytes(package_root_model_path(package)))
    found = set()

    def visit(block):
        for op in block.operations:
            found.add(op.type)
            for inner in op.blocks:
                visit(inner)
    for function in spec.mlProgram.functions.values():
        for block in function.block_specializations.values():
            visit(block)
    return found


def f64(v):
    return np.asarray(v).astype(np.float64)


@case("unary_float", ["acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "exp2", "sign", "sinh", "tan", "threshold",
                      "softsign", "scaled_tanh", "linear_activation", "thresholded_relu"])
def unary_float(rng):
    """Unary operations on fp32 with a size-1 axis; sign and ceil at exact zeros and integers."""
    a = rng.uniform(-0.9, 0.9, (2, 1, 6)).astype(np.float32)
    a[0, 0, :3] = [0.0, -0.0, 0.5]
    a[1, 0, :2] = [-1.0 + 2 ** -20, 0.75]

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.acos(x=x, name="acos"), mb.asin(x=x, name="asin"), mb.atan(x=mb.mul(x=x, y=4.0), name="atan"),
                mb.atanh(x=x, name="atanh"), mb.ceil(x=mb.mul(x=x, y=3.0), name="ceil"), mb.cos(x=mb.mul(x=x, y=5.0), name="cos"),
                mb.cosh(x=mb.mul(x=x, y=3.0), name="cosh"), mb.exp2(x=mb.mul(x=x, y=6.0), name="exp2"), mb.sign(x=x, name="sign"),
                mb.sinh(x=mb.mul(x=x, y=3.0), name="sinh"), mb.tan(x=x, name="tan"), mb.threshold(x=x, alpha=0.2, name="threshold"),
                mb.softsign(x=mb.mul(x=x, y=5.0), name="softsign"), mb.scaled_tanh(x=x, alpha=1.5, beta=-0.7, name="scaled_tanh"),
                mb.linear_activation(x=x, alpha=-2.0, beta=0.5, name="linear_activation"),
                mb.thresholded_relu(x=x, alpha=0.3, name="thresholded_relu"))
    d = f64(a)
    return prog, [{"x": a}], [{
        "acos": np.arccos(d), "asin": np.arcsin(d), "atan": np.arctan(4 * d), "atanh": np.arctanh(d), "ceil": np.ceil(3 * d),
        "cos": np.cos(5 * d), "cosh": np.cosh(3 * d), "exp2": np.exp2(6 * d), "sign": np.sign(d), "sinh": np.sinh(3 * d),
        "tan": np.tan(d), "threshold": np.maximum(d, 0.2), "softsign": 5 * d / (1 + np.abs(5 * d)),
        "scaled_tanh": 1.5 * np.tanh(-0.7 * d), "linear_activation": -2 * d + 0.5, "thresholded_relu": np.where(d > 0.3, d, 0)}]


@case("unary_int32", ["abs", "sign", "square", "exp2", "threshold"])
def unary_int32(rng):
    """The unary operations MIL defines on int32 (abs, sign, square, exp2, threshold): exact."""
    a = np.array([[-7, -1, 0, 1, 3, 12], [5, -3, 2, 0, -12, 9]], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.abs(x=x, name="abs"), mb.sign(x=x, name="sign"), mb.square(x=x, name="square"),
                mb.exp2(x=mb.abs(x=x), name="exp2"), mb.threshold(x=x, alpha=2, name="threshold"))
    return prog, [{"x": a}], [{"abs": np.abs(a), "sign": np.sign(a), "square": a * a, "exp2": 2 ** np.abs(a).astype(np.int64),
                                "threshold": np.maximum(a, 2)}]


@case("unary_fp16", ["acos", "cosh", "exp2", "softsign", "sign", "tan"], tolerance=2e-3)
def unary_fp16(rng):
    """An fp16 program (fp16 input and output): within fp16 rounding of float64 on the fp16 input."""
    a = rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float16)
    a[0, 0] = 0

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.fp16)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.acos(x=x, name="acos"), mb.cosh(x=x, name="cosh"), mb.exp2(x=x, name="exp2"),
                mb.softsign(x=x, name="softsign"), mb.sign(x=x, name="sign"), mb.tan(x=x, name="tan"))
    prog.compute_precision = ct.precision.FLOAT16
    prog.flexible_inputs = [ct.TensorType(name="x", shape=a.shape, dtype=np.float16)]
    d = f64(a)
    return prog, [{"x": a}], [{"acos": np.arccos(d), "cosh": np.cosh(d), "exp2": np.exp2(d), "softsign": d / (1 + np.abs(d)),
                                "sign": np.sign(d), "tan": np.tan(d)}]


@case("per_channel_activations", ["prelu", "softplus_parametric"])
def per_channel(rng):
    """prelu and softplus_parametric: a parameter per channel (axis 1 of ranks 3, 4 and 5)."""
    a, b, c = rand(rng, 2, 3, 4) * 3, rand(rng, 2, 3, 2, 2) * 3, rand(rng, 1, 3, 1, 2, 2) * 3
    alpha, beta = np.array([0.1, -0.5, 2.0], dtype=np.float32), np.array([1.5, 0.5, -1.0], dtype=np.float32)
    same = np.full(3, 0.3, dtype=np.float32)  # coremltools takes one alpha for all channels at ranks 3 and 5

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape), mb.TensorSpec(shape=c.shape)],
                opset_version=ct.target.iOS17)
    def prog(x, y, z):
        return (mb.prelu(x=x, alpha=same, name="prelu3"), mb.prelu(x=y, alpha=alpha, name="prelu4"),
                mb.prelu(x=z, alpha=same, name="prelu5"),
                mb.softplus_parametric(x=y, alpha=alpha, beta=beta, name="softplus4"),
                mb.softplus_parametric(x=x, alpha=alpha, beta=beta, name="softplus3"))
    al, be = f64(alpha), f64(beta)

    def prelu(v, shape, a=al):
        return np.where(v >= 0, v, a.reshape(shape) * v)

    def softplus(v, shape):
        return al.reshape(shape) * np.log1p(np.exp(be.reshape(shape) * v))
    A, B, C = f64(a), f64(b), f64(c)
    return prog, [{"x": a, "y": b, "z": c}], [{
        "prelu3": prelu(A, (1, 3, 1), f64(same)), "prelu4": prelu(B, (1, 3, 1, 1)), "prelu5": prelu(C, (1, 3, 1, 1, 1), f64(same)),
        "softplus4": softplus(B, (1, 3, 1, 1)), "softplus3": softplus(A, (1, 3, 1))}]


@case("binary_more", ["minimum", "not_equal", "less_equal", "greater", "equal", "pow", "maximum"])
def binary_more(rng):
    """minimum, not_equal, less_equal and friends: broadcasting [2,3,1,4] with [3,5,1], with a
    rank-0 operand, on int32 (comparisons of bool are not defined: equal takes fp16, fp32, int32)."""
    a, b = rand(rng, 2, 3, 1, 4), rand(rng, 3, 5, 1)
    a[0, 0, 0, :2] = b[0, :2, 0]
    i, j = rng.integers(-5, 5, (4, 3)).astype(np.int32), rng.integers(-5, 5, (3,)).astype(np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape),
                             mb.TensorSpec(shape=i.shape, dtype=types.int32), mb.TensorSpec(shape=j.shape, dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, y, m, n):
        to_int = lambda v, name: mb.cast(x=v, dtype="int32", name=name)
        return (mb.minimum(x=x, y=y, name="minimum"), to_int(mb.not_equal(x=x, y=y), "not_equal"),
                to_int(mb.less_equal(x=x, y=y), "less_equal"), mb.minimum(x=x, y=np.float32(0.25), name="minimum_scalar"),
                mb.minimum(x=m, y=n, name="minimum_int"), mb.maximum(x=m, y=np.int32(-1), name="maximum_int"),
                to_int(mb.not_equal(x=m, y=n), "not_equal_int"), to_int(mb.less_equal(x=m, y=n), "less_equal_int"),
                to_int(mb.equal(x=m, y=n), "equal_int"), to_int(mb.greater(x=m, y=np.int32(0)), "greater_int"),
                mb.pow(x=mb.abs(x=x), y=np.float32(0.5), name="pow_scalar"))
    A, B = f64(a), f64(b)
    return prog, [{"x": a, "y": b, "m": i, "n": j}], [{
        "minimum": np.minimum(A, B), "not_equal": A != B, "less_equal": A <= B, "minimum_scalar": np.minimum(A, 0.25),
        "minimum_int": np.minimum(i, j), "maximum_int": np.maximum(i, -1), "not_equal_int": i != j, "less_equal_int": i <= j,
        "equal_int": i == j, "greater_int": i > 0, "pow_scalar": np.sqrt(np.abs(A))}]


@case("reductions_more", ["reduce_l1_norm", "reduce_log_sum", "reduce_sum_square", "reduce_sum", "reduce_max", "reduce_argmax",
                          "reduce_prod", "reduce_min", "reduce_mean"])
def reductions_more(rng):
    """reduce_l1_norm, reduce_log_sum, reduce_sum_square; negative and repeated-sign axes, keep_dims,
    every axis; int32 sums, maxima and argmax (first of equal values); a size-1 axis."""
    a = rng.uniform(0.2, 1.5, (2, 1, 3, 4)).astype(np.float32)
    a[1, 0, 2, :] *= -1
    i = np.array([[3, -2, 7, 7], [0, 5, -9, 5], [1, 1, 1, 1]], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=i.shape, dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, m):
        return (mb.reduce_l1_norm(x=x, axes=[-1, 0], keep_dims=True, name="l1"),
                mb.reduce_log_sum(x=mb.abs(x=x), axes=[2], name="log_sum"),
                mb.reduce_sum_square(x=x, name="sum_square_all"), mb.reduce_sum_square(x=x, axes=[1], keep_dims=False, name="sum_square_unit"),
                mb.reduce_mean(x=x, axes=[-3, -1], keep_dims=True, name="mean_neg"),
                mb.reduce_sum(x=m, axes=[1], name="sum_int"), mb.reduce_max(x=m, axes=[0], keep_dims=True, name="max_int"),
                mb.reduce_min(x=m, name="min_int"), mb.reduce_prod(x=m, axes=[-1], name="prod_int"),
                mb.reduce_argmax(x=m, axis=1, name="argmax_int"), mb.reduce_argmax(x=x, axis=-2, keep_dims=True, name="argmax"))
    d = f64(a)
    return prog, [{"x": a, "m": i}], [{
        "l1": np.abs(d).sum(axis=(0, 3), keepdims=True), "log_sum": np.log(np.abs(d).sum(axis=2)),
        "sum_square_all": (d * d).sum(), "sum_square_unit": (d * d).sum(axis=1), "mean_neg": d.mean(axis=(1, 3), keepdims=True),
        "sum_int": i.sum(axis=1), "max_int": i.max(axis=0, keepdims=True), "min_int": i.min(), "prod_int": i.prod(axis=-1),
        "argmax_int": i.argmax(axis=1).astype(np.int32), "argmax": d.argmax(axis=-2)[:, :, None, :].astype(np.int32)}]


@case("shape_ops_flexible", ["shape", "fill", "fill_like", "range_1d", "flatten2d"])
def shape_ops(rng):
    """shape, fill, fill_like, range_1d, flatten2d on an input of a flexible first
    dimension (1…4), so that coremltools cannot fold them away; run with 1 and 3."""
    n = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(n, 3, 4)), mb.TensorSpec(shape=(n, 12, 2))], opset_version=ct.target.iOS17)
    def prog(x, r):
        shape = mb.shape(x=x)
        count = mb.gather(x=shape, indices=0)
        return (mb.cast(x=shape, dtype="int32", name="shape"), mb.fill(shape=shape, value=2.5, name="fill"),
                mb.fill_like(ref_tensor=x, value=-1.0, name="fill_like"),
                mb.range_1d(start=0, end=mb.mul(x=count, y=3), step=2, name="range"),
                mb.range_1d(start=mb.cast(x=count, dtype="fp32"), end=-1.0, step=-0.75, name="range_float"),
                mb.flatten2d(x=x, axis=1, name="flatten_1"), mb.flatten2d(x=x, axis=-1, name="flatten_neg"),
                mb.flatten2d(x=x, axis=0, name="flatten_0"), mb.mul(x=r, y=2.0, name="doubled"))
    prog.flexible_inputs = [ct.TensorType(name="x", shape=(ct.RangeDim(1, 4, default=1), 3, 4)),
                            ct.TensorType(name="r", shape=(ct.RangeDim(1, 4, default=1), 12, 2))]
    inputs, outputs = [], []
    for count in (1, 3):
        x, r = rand(rng, count, 3, 4), rand(rng, count, 12, 2)
        d = f64(x)
        inputs.append({"x": x, "r": r})
        outputs.append({"shape": np.array([count, 3, 4], dtype=np.int32), "fill": np.full((count, 3, 4), 2.5),
                        "fill_like": np.full((count, 3, 4), -1.0), "range": np.arange(0, 3 * count, 2, dtype=np.int32),
                        "range_float": np.arange(float(count), -1.0, -0.75), "flatten_1": d.reshape(count, 12),
                        "flatten_neg": d.reshape(count * 3, 4), "flatten_0": d.reshape(1, -1), "doubled": 2 * f64(r)})
    return prog, inputs, outputs


@case("reshape_like", ["reshape_like"], target=ct.target.iOS16)
def reshape_like(rng):
    """reshape_like to slices of one and of two reference tensors' shapes (end_masks)."""
    x, r, q = rand(rng, 2, 3, 4), rand(rng, 6, 4, 5), rand(rng, 1, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=t.shape) for t in (x, r, q)], opset_version=ct.target.iOS16)
    def prog(x, r, q):
        return (mb.reshape_like(x=x, ref_tensors=(r,), begins=(0,), ends=(2,), end_masks=(False,), name="one"),
                mb.reshape_like(x=x, ref_tensors=(q, r), begins=(1, 0), ends=(0, 1), end_masks=(True, False), name="two"))
    d = f64(x)
    return prog, [{"x": x, "r": r, "q": q}], [{"one": d.reshape(6, 4), "two": d.reshape(4, 6)}]


@case("einsum", ["einsum"], tolerance=1e-5, target=ct.target.iOS15)
def einsum(rng):
    """einsum in the forms MIL defines: rank 4 (nchw,nwhu->nchu, and with B or H of 1 broadcast)
    and rank 3 (chw,whr->chr), and an equivalent equation with other letters."""
    a, b = rand(rng, 2, 3, 4, 5), rand(rng, 2, 5, 4, 6)
    c, d_ = rand(rng, 3, 4, 5), rand(rng, 5, 1, 2)
    e = rand(rng, 1, 5, 4, 6)

    @mb.program(input_specs=[mb.TensorSpec(shape=t.shape) for t in (a, b, c, d_, e)], opset_version=ct.target.iOS15)
    def prog(x, y, z, w, v):
        return (mb.einsum(values=(x, y), equation="nchw,nwhu->nchu", name="rank4"),
                mb.einsum(values=(z, w), equation="chw,whr->chr", name="rank3_broadcast"),
                mb.einsum(values=(x, v), equation="abcd,adce->abce", name="rank4_broadcast"))
    A, B, C, D, E = (f64(t) for t in (a, b, c, d_, e))
    return prog, [{"x": a, "y": b, "z": c, "w": d_, "v": e}], [{
        "rank4": np.einsum("nchw,nwhu->nchu", A, B), "rank3_broadcast": np.einsum("chw,whr->chr", C, np.broadcast_to(D, (5, 4, 2))),
        "rank4_broadcast": np.einsum("abcd,adce->abce", A, np.broadcast_to(E, (2, 5, 4, 6)))}]


@case("pooling_and_upsampling", ["l2_pool", "upsample_nearest_neighbor", "max_pool", "avg_pool"], tolerance=1e-5)
def pooling(rng):
    """l2_pool (2-D, custom pads; 1-D, ceil_mode), upsample_nearest_neighbor (integer and
    fractional scales), max_pool 1-D with negative inputs only, avg_pool 3-D counting pads."""
    a = rand(rng, 1, 2, 5, 6)
    s = rand(rng, 2, 3, 7) - 2
    v = rand(rng, 1, 2, 3, 4, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=s.shape), mb.TensorSpec(shape=v.shape)],
                opset_version=ct.target.iOS17)
    def prog(x, y, z):
        return (mb.l2_pool(x=x, kernel_sizes=[2, 3], strides=[2, 2], pad_type="custom", pad=[1, 0, 1, 1], name="l2_pool"),
                mb.l2_pool(x=y, kernel_sizes=[3], strides=[2], pad_type="valid", ceil_mode=True, name="l2_pool_1d"),
                mb.upsample_nearest_neighbor(x=x, scale_factor_height=2, scale_factor_width=3, name="upsample"),
                mb.upsample_nearest_neighbor(x=x, scale_factor_height=1.5, scale_factor_width=0.5, name="upsample_fraction"),
                mb.max_pool(x=y, kernel_sizes=[2], strides=[3], pad_type="valid", name="max_pool_1d"),
                mb.avg_pool(x=z, kernel_sizes=[2, 3, 3], strides=[1, 2, 2], pad_type="same", exclude_padding_from_average=False,
                            name="avg_pool_3d"))
    d, S, V = f64(a), f64(s), f64(v)
    # l2_pool 2-D: rows padded 1 above, 0 below; columns 1 each side; windows 2x3 at stride 2.
    p = np.pad(d, ((0, 0), (0, 0), (1, 0), (1, 1)))
    oh, ow = (p.shape[2] - 2) // 2 + 1, (p.shape[3] - 3) // 2 + 1
    l2 = np.array([[[[np.sqrt((p[0, c, 2 * i:2 * i + 2, 2 * j:2 * j + 3] ** 2).sum()) for j in range(ow)] for i in range(oh)]
                    for c in range(2)]])
    # 1-D with ceil_mode: out = ceil((7 - 3) / 2) + 1 = 3, the last window clipped to the input.
    l21 = np.stack([np.sqrt((S[:, :, 2 * k:min(2 * k + 3, 7)] ** 2).sum(-1)) for k in range(3)], axis=-1)
    up = d.repeat(2, axis=2).repeat(3, axis=3)
    rows, cols = [int(math.floor(i / 1.5)) for i in range(7)], [int(math.floor(j / 0.5)) for j in range(3)]
    frac = d[:, :, rows][:, :, :, cols]
    mp = np.stack([S[:, :, 3 * k:3 * k + 2].max(-1) for k in range(2)], axis=-1)
    # same padding, counting pads: depth pads (0, 1), rows and columns (1, 1) for kernel 3 at stride 2 on 4.
    pv = np.pad(V, ((0, 0), (0, 0), (0, 1), (0, 1), (0, 1)))
    ap = np.zeros((1, 2, 3, 2, 2))
    for dd in range(3):
        for i in range(2):
            for j in range(2):
                ap[0, :, dd, i, j] = pv[0, :, dd:dd + 2, 2 * i:2 * i + 3, 2 * j:2 * j + 3].sum(axis=(1, 2, 3)) / 18
    return prog, [{"x": a, "y": s, "z": v}], [{"l2_pool": l2, "l2_pool_1d": l21, "upsample": up, "upsample_fraction": frac,
                                               "max_pool_1d": mp, "avg_pool_3d": ap}]


def pack_bits(values, nbits):
    """Indices packed into bytes, lowest bits first (constexpr_lut_to_dense of iOS16)."""
    bits = []
    for v in values:
        bits += [(int(v) >> k) & 1 for k in range(nbits)]
    bits += [0] * (-len(bits) % 8)
    return np.array([sum(bits[i + k] << k for k in range(8)) for i in range(0, len(bits), 8)], dtype=np.uint8)


@case("constexpr_ios16", ["constexpr_affine_dequantize", "constexpr_cast", "constexpr_lut_to_dense", "constexpr_sparse_to_dense"],
      target=ct.target.iOS16)
def constexpr_ios16(rng):
    """Weights stored compressed in the iOS16 forms: affine dequantization per output channel
    (uint8 with zero points) and one scale for all (int8), an fp16 weight cast to fp32, a
    2-bit look-up table, and a bit mask of nonzero elements; each feeding a linear layer."""
    x = rand(rng, 2, 6)
    q8 = rng.integers(0, 256, (4, 6)).astype(np.uint8)
    zp, scale = np.array([128, 120, 135, 127], dtype=np.uint8), np.array([0.01, 0.02, 0.015, 0.03], dtype=np.float32)
    qi = rng.integers(-128, 128, (3, 6)).astype(np.int8)
    half = rand(rng, 5, 6).astype(np.float16)
    codes = rng.integers(0, 4, 3 * 6)
    lut = np.array([-0.5, -0.1, 0.2, 0.7], dtype=np.float32)
    present = rng.random(5 * 6) < 0.4
    nonzero = rand(rng, int(present.sum()))

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape)], opset_version=ct.target.iOS16)
    def prog(x):
        w1 = mb.constexpr_affine_dequantize(quantized_data=q8, zero_point=zp, scale=scale, axis=0)
        w2 = mb.constexpr_affine_dequantize(quantized_data=qi, zero_point=np.int8(-3), scale=np.float32(0.02), axis=1)
        w3 = mb.constexpr_cast(source_val=half, output_dtype="fp32")
        w4 = mb.constexpr_lut_to_dense(indices=pack_bits(codes, 2), lut=lut, shape=np.array([3, 6], dtype=np.uint32))
        w5 = mb.constexpr_sparse_to_dense(nonzero_data=nonzero, mask=pack_bits(present, 1), shape=np.array([5, 6], dtype=np.uint32))
        return (mb.linear(x=x, weight=w1, name="affine_per_channel"), mb.linear(x=x, weight=w2, name="affine_scalar"),
                mb.linear(x=x, weight=w3, name="cast"), mb.linear(x=x, weight=w4, name="lut"), mb.linear(x=x, weight=w5, name="sparse"))
    X = f64(x)
    W1 = (f64(q8) - f64(zp)[:, None]) * f64(scale)[:, None]
    W2 = (f64(qi) + 3) * np.float64(np.float32(0.02))
    W4 = f64(lut)[codes].reshape(3, 6)
    W5 = np.zeros(30)
    W5[present] = f64(nonzero)
    return prog, [{"x": x}], [{"affine_per_channel": X @ W1.T, "affine_scalar": X @ W2.T, "cast": X @ f64(half).T, "lut": X @ W4.T,
                                "sparse": X @ W5.reshape(5, 6).T}]


@case("constexpr_ios18", ["constexpr_blockwise_shift_scale", "constexpr_lut_to_dense", "constexpr_cast"], target=ct.target.iOS18)
def constexpr_ios18(rng):
    """iOS18 weight forms: blockwise int8 data with a scale and offset per block of 3 input
    columns, a 4-bit look-up table per group of 2 output rows (uint4 indices), and the iOS18
    constexpr_cast (parameters as inputs rather than attributes)."""
    x = rand(rng, 2, 6)
    data = rng.integers(-8, 8, (4, 6)).astype(np.int8)
    scale = rng.uniform(0.05, 0.2, (4, 2)).astype(np.float32)
    offset = rng.integers(-2, 3, (4, 2)).astype(np.int8)
    idx = rng.integers(0, 16, (4, 6)).astype(types.np_uint4_dtype)
    lut = rand(rng, 2, 1, 16, 1)
    half = rand(rng, 3, 6).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape)], opset_version=ct.target.iOS18)
    def prog(x):
        w1 = mb.constexpr_blockwise_shift_scale(data=data, scale=scale, offset=offset)
        w2 = mb.constexpr_lut_to_dense(indices=idx, lut=lut)
        w3 = mb.constexpr_cast(source_val=half, output_dtype="fp32")
        return mb.linear(x=x, weight=w1, name="blockwise"), mb.linear(x=x, weight=w2, name="lut"), mb.linear(x=x, weight=w3, name="cast")
    X = f64(x)
    W1 = (f64(data) - f64(offset).repeat(3, axis=1)) * f64(scale).repeat(3, axis=1)
    table = f64(lut)[:, 0, :, 0]
    W2 = np.array([[table[r // 2, int(idx[r, c])] for c in range(6)] for r in range(4)])
    return prog, [{"x": x}], [{"blockwise": X @ W1.T, "lut": X @ W2.T, "cast": X @ f64(half).T}]


@case("state", ["read_state", "write_state"], tolerance=1e-3, target=ct.target.iOS18)
def state(rng):
    """A stateful fp16 program (states are fp16) run with a fresh (zero) state: read_state before
    and after an update (coreml_update_state, which coremltools writes as write_state + read_state)."""
    a = rand(rng, 2, 3).astype(np.float16)

    @mb.program(input_specs=[mb.StateTensorSpec(shape=a.shape, dtype=types.fp16), mb.TensorSpec(shape=a.shape, dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(s, x):
        before = mb.read_state(input=s)
        updated = mb.coreml_update_state(state=s, value=mb.add(x=before, y=x))
        # (A second read_state(s) would be merged into the first by coremltools' passes.)
        return mb.add(x=before, y=np.float16(1), name="before"), mb.mul(x=updated, y=np.float16(2), name="after"), mb.identity(x=updated, name="updated")
    prog.compute_precision = ct.precision.FLOAT16
    d = f64(a)
    return prog, [{"x": a}], [{"before": np.ones((2, 3)), "after": 2 * d, "updated": d}]


@case("classify", ["classify", "softmax"])
def classify(rng):
    """A classifier program: softmax probabilities over three string labels, ended by classify."""
    w = rand(rng, 3, 4) * 3
    inputs = [rand(rng, 1, 4) for _ in range(3)]

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.softmax(x=mb.linear(x=x, weight=w), axis=-1, name="probabilities")
    prog.classifier_config = ct.ClassifierConfig(["cat", "dog", "emu"])
    outputs = []
    for x in inputs:
        h = f64(x) @ f64(w).T
        e = np.exp(h - h.max())
        p = (e / e.sum())[0]
        outputs.append({"classLabel": ["cat", "dog", "emu"][int(p.argmax())], "classLabel_probs": {k: float(v) for k, v in zip(["cat", "dog", "emu"], p)}})
    return prog, [{"x": x} for x in inputs], outputs


@case("int32_tensors", ["gather", "concat", "transpose", "slice_by_index", "tile", "select", "stack", "split", "reverse",
                       "cumsum", "topk", "argsort", "one_hot", "squeeze", "expand_dims", "reshape", "gather_along_axis",
                       "scatter", "band_part", "reduce_argmin"])
def int32_tensors(rng):
    """Operations that move elements, on int32 data (exact): gather with negative indices,
    concat, transpose, slicing with a negative stride, tile (pad is fp16/fp32 only), select with
    a broadcast condition, stack, split, reverse, cumsum, topk, argsort, one_hot, and the rest."""
    a = rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)
    a[1, 2, :] = [7, 7, -3, 7]

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x):
        cond = mb.greater(x=mb.slice_by_size(x=x, begin=[0, 0, 0], size=[1, 3, 4]), y=np.int32(0))
        values, indices = mb.topk(x=x, k=2, axis=-1, ascending=True, name="topk")
        first, second = mb.split(x=x, num_splits=2, axis=-1)
        return (mb.gather(x=x, indices=np.array([-1, 0, 2], dtype=np.int32), axis=1, name="gather"),
                mb.concat(values=(x, mb.mul(x=x, y=np.int32(2))), axis=0, name="concat"),
                mb.transpose(x=x, perm=[2, -3, 1], name="transpose"),
                mb.slice_by_index(x=x, begin=[0, 2, 3], end=[2, 0, 0], stride=[1, -1, -2], end_mask=[False, True, True], name="slice"),
                mb.tile(x=x, reps=[2, 1, 2], name="tile"),
                mb.select(cond=cond, a=x, b=np.int32(-1), name="select"), mb.stack(values=(x, x), axis=-1, name="stack"),
                mb.identity(x=first, name="split_0"), mb.identity(x=second, name="split_1"),
                mb.reverse(x=x, axes=[-1], name="reverse"), mb.cumsum(x=x, axis=1, name="cumsum"),
                mb.identity(x=values, name="topk_values"), mb.identity(x=indices, name="topk_indices"),
                mb.argsort(x=x, axis=-1, ascending=False, name="argsort"),
                mb.one_hot(indices=mb.reduce_argmin(x=x, axis=2), one_hot_vector_size=4, axis=0, on_value=5, off_value=-1, name="one_hot"),
                mb.squeeze(x=mb.expand_dims(x=x, axes=[-1, 1]), axes=[1, -1], name="squeeze"),
                mb.reshape(x=x, shape=[-1, 6], name="reshape"),
                mb.gather_along_axis(x=x, indices=np.array([[[3], [0], [1]]] * 2, dtype=np.int32), axis=2, name="gather_along_axis"),
                mb.scatter(data=x, indices=np.array([2, 0], dtype=np.int32), updates=mb.slice_by_size(x=x, begin=[0, 0, 0], size=[2, 2, 4]),
                           axis=1, mode="add", name="scatter"),
                mb.band_part(x=x, lower=0, upper=1, name="band_part"))
    order = np.argsort(a, axis=-1, kind="stable")[..., :2]
    desc = np.argsort(-a.astype(np.int64), axis=-1, kind="stable")
    added = a.copy()
    added[:, 2] += a[:, 0]
    added[:, 0] += a[:, 1]
    one_hot = np.full((4, 2, 3), -1, dtype=np.int32)
    arg = a.argmin(axis=2)
    for b in range(2):
        for c in range(3):
            one_hot[arg[b, c], b, c] = 5
    return prog, [{"x": a}], [{
        "gather": a[:, [2, 0, 2]], "concat": np.concatenate([a, 2 * a], 0), "transpose": np.transpose(a, (2, 0, 1)),
        "slice": a[0:2, 2::-1, 3::-2], "tile": np.tile(a, (2, 1, 2)), "select": np.where(a[:1] > 0, a, -1),
        "stack": np.stack([a, a], -1), "split_0": a[..., :2], "split_1": a[..., 2:], "reverse": a[..., ::-1],
        "cumsum": np.cumsum(a, 1), "topk_values": np.take_along_axis(a, order, -1), "topk_indices": order,
        "argsort": desc, "one_hot": one_hot, "squeeze": a, "reshape": a.reshape(-1, 6),
        "gather_along_axis": np.take_along_axis(a, np.array([[[3], [0], [1]]] * 2), 2), "scatter": added,
        "band_part": a * np.triu(np.tril(np.ones((3, 4), dtype=np.int32), 1), 0)}]


@case("bool_logic", ["logical_and", "logical_or", "logical_xor", "logical_not", "select", "cast", "equal", "less"])
def bool_logic(rng):
    """Logical operations on bool values with broadcasting ([2, 1, 4] with [3, 1]), select with a
    bool condition and branches of different shapes broadcast together (coremltools declares
    select's output as the broadcast of a and b alone, so the condition's shape stays inside
    theirs), casts between bool, int32 and fp32."""
    a, b = rand(rng, 2, 1, 4), rand(rng, 3, 1)
    a[0, 0, 0] = 0

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape)], opset_version=ct.target.iOS17)
    def prog(x, y):
        p, q = mb.less(x=x, y=0.0), mb.greater(x=y, y=0.0)
        to_int = lambda v, name: mb.cast(x=v, dtype="int32", name=name)
        as_bool = mb.cast(x=x, dtype="bool")
        return (to_int(mb.logical_and(x=p, y=q), "and"), to_int(mb.logical_or(x=p, y=q), "or"),
                to_int(mb.logical_xor(x=p, y=q), "xor"), to_int(mb.logical_not(x=q), "not"),
                mb.select(cond=q, a=mb.add(x=x, y=y), b=mb.mul(x=x, y=-1.0), name="select"), to_int(as_bool, "cast_bool"),
                mb.cast(x=mb.cast(x=as_bool, dtype="int32"), dtype="fp32", name="bool_int_fp32"),
                to_int(mb.equal(x=mb.cast(x=p, dtype="int32"), y=np.int32(1)), "equal"))
    A, B = f64(a), f64(b)
    p, q = A < 0, B > 0
    return prog, [{"x": a, "y": b}], [{"and": p & q, "or": p | q, "xor": p ^ q, "not": ~q, "select": np.where(q, A + B, -A),
                                        "cast_bool": A != 0, "bool_int_fp32": (A != 0).astype(np.float64), "equal": p}]


@case("rounding_and_division", ["round", "floor_div", "mod", "real_div", "floor", "ceil", "clip", "cast"])
def rounding(rng):
    """Rounding halves to even, floor_div and mod with negative operands (Python's rules), real_div
    by negative divisors, clip at its bounds, cast of halves and negatives to int32 (toward zero)."""
    a = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [-7.0, -3.25, 3.25, 7.0, -0.0, 6.0]], dtype=np.float32)
    b = np.array([2.0, -2.0, 3.0, -3.0, 0.5, -0.75], dtype=np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape)], opset_version=ct.target.iOS17)
    def prog(x, y):
        return (mb.round(x=x, name="round"), mb.floor_div(x=x, y=y, name="floor_div"), mb.mod(x=x, y=y, name="mod"),
                mb.real_div(x=x, y=y, name="real_div"), mb.floor(x=x, name="floor"), mb.ceil(x=x, name="ceil"),
                mb.clip(x=x, alpha=-1.5, beta=2.5, name="clip"), mb.cast(x=x, dtype="int32", name="to_int32"))
    A, B = f64(a), f64(b)
    return prog, [{"x": a, "y": b}], [{"round": np.round(A), "floor_div": np.floor(A / B), "mod": np.mod(A, B), "real_div": A / B,
                                        "floor": np.floor(A), "ceil": np.ceil(A), "clip": np.clip(A, -1.5, 2.5),
                                        "to_int32": np.trunc(A).astype(np.int32)}]


@case("indexing_modes", ["gather", "gather_nd", "scatter", "scatter_nd", "scatter_along_axis", "one_hot"], target=ct.target.iOS17)
def indexing_modes(rng):
    """gather with batch_dims 1, gather_nd with batch_dims 1, every scatter mode not in tensor_ops
    (div, max, min, sub on scatter; add, max on scatter_along_axis; update, min, div on scatter_nd),
    one_hot on axis 0 of rank-2 indices."""
    a = rng.uniform(0.5, 2.0, (2, 4, 3)).astype(np.float32)
    u = rng.uniform(0.5, 2.0, (2, 2, 3)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=u.shape)], opset_version=ct.target.iOS17)
    def prog(x, v):
        idx = np.array([[3, 0], [1, 1]], dtype=np.int32)
        outs = [mb.gather(x=x, indices=idx, axis=1, batch_dims=1, name="gather_batch"),
                mb.gather_nd(x=x, indices=np.array([[[2], [0]], [[1], [3]]], dtype=np.int32), batch_dims=1, name="gather_nd_batch")]
        for mode in ("div", "max", "min", "sub"):
            outs.append(mb.scatter(data=x, indices=np.array([2, 0], dtype=np.int32), updates=v, axis=1, mode=mode, name="scatter_" + mode))
        along = np.array([[[0, 3, 1], [2, 2, 0]], [[1, 0, 3], [3, 1, 2]]], dtype=np.int32)
        for mode in ("add", "max"):
            outs.append(mb.scatter_along_axis(data=x, indices=along, updates=v, axis=1, mode=mode, name="along_" + mode))
        nd = np.array([[0, 3], [1, 2]], dtype=np.int32)
        for mode in ("update", "min", "div"):
            first = mb.reshape(x=mb.slice_by_size(x=v, begin=[0, 0, 0], size=[1, 2, 3]), shape=[2, 3])
            outs.append(mb.scatter_nd(data=x, indices=nd, updates=first, mode=mode, name="scatter_nd_" + mode))
        outs.append(mb.one_hot(indices=idx, one_hot_vector_size=4, axis=0, on_value=2.0, off_value=0.5, name="one_hot"))
        return tuple(outs)
    d, w = f64(a), f64(u)
    idx = np.array([[3, 0], [1, 1]])
    expected = {"gather_batch": np.stack([d[b][idx[b]] for b in range(2)]),
                "gather_nd_batch": np.stack([d[b][[2, 0]] if b == 0 else d[b][[1, 3]] for b in range(2)])}
    ops = {"div": np.divide, "max": np.maximum, "min": np.minimum, "sub": np.subtract, "add": np.add, "mul": np.multiply}
    for mode in ("div", "max", "min", "sub"):
        r = d.copy()
        for k, i in enumerate([2, 0]):
            r[:, i] = ops[mode](r[:, i], w[:, k])
        expected["scatter_" + mode] = r
    along = np.array([[[0, 3, 1], [2, 2, 0]], [[1, 0, 3], [3, 1, 2]]])
    for mode in ("add", "max"):
        r = d.copy()
        for b in range(2):
            for k in range(2):
                for c in range(3):
                    r[b, along[b, k, c], c] = ops[mode](r[b, along[b, k, c], c], w[b, k, c])
        expected["along_" + mode] = r
    upd = w[0]
    for mode in ("update", "min", "div"):
        r = d.copy()
        for k, (i, j) in enumerate([(0, 3), (1, 2)]):
            r[i, j] = upd[k] if mode == "update" else ops[mode](r[i, j], upd[k])
        expected["scatter_nd_" + mode] = r
    oh = np.full((4, 2, 2), 0.5)
    for i in range(2):
        for j in range(2):
            oh[idx[i, j], i, j] = 2.0
    expected["one_hot"] = oh
    return prog, [{"x": a, "v": u}], [expected]


@case("size_one_and_rank_edges", ["softmax", "reduce_sum", "matmul", "squeeze", "expand_dims", "layer_norm", "batch_norm",
                                  "instance_norm", "l2_norm", "cumsum", "linear", "concat"])
def size_one(rng):
    """Edges of shapes: softmax and reductions over a size-1 axis, matmul of a vector by a matrix
    (coremltools' builder takes no rank-1 y, and declares a vector by a batch of matrices as
    [1, N] where the definition gives [B, N]), transpose_x, squeeze of a rank-1 size-1
    tensor, norms on rank 3, cumsum on a size-1 axis, linear without bias, concat of one value."""
    a, v, m = rand(rng, 2, 1, 5), rand(rng, 5), rand(rng, 3, 5, 2)
    mean, var = rand(rng, 1), rng.uniform(0.5, 1.5, 1).astype(np.float32)
    weight = rand(rng, 6, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=v.shape), mb.TensorSpec(shape=m.shape)],
                opset_version=ct.target.iOS17)
    def prog(x, y, z):
        return (mb.softmax(x=x, axis=1, name="softmax_unit"), mb.reduce_sum(x=x, axes=[-2], keep_dims=False, name="sum_unit"),
                mb.matmul(x=y, y=mb.reshape(x=z, shape=[5, 6]), name="vector_matrix"),
                mb.matmul(x=z, y=z, transpose_x=True, name="transpose_x"),
                mb.squeeze(x=mb.slice_by_size(x=y, begin=[2], size=[1]), name="squeeze_scalar"),
                mb.expand_dims(x=y, axes=[-2], name="expand_neg"),
                mb.layer_norm(x=x, axes=[-1], epsilon=1e-5, name="layer_norm"),
                mb.batch_norm(x=x, mean=mean, variance=var, epsilon=1e-5, name="batch_norm_rank3"),
                mb.instance_norm(x=mb.reshape(x=x, shape=[1, 2, 5]), epsilon=1e-5, name="instance_norm_rank3"),
                mb.l2_norm(x=mb.reshape(x=x, shape=[2, 5, 1]), epsilon=1e-12, name="l2_norm_rank3"),
                mb.cumsum(x=x, axis=1, exclusive=True, name="cumsum_unit"),
                mb.linear(x=y, weight=weight, name="linear_vector"),
                mb.concat(values=(x,), axis=0, name="concat_one"))
    A, V, M = f64(a), f64(v), f64(m)
    norm = (A - A.mean(-1, keepdims=True)) / np.sqrt(A.var(-1, keepdims=True) + 1e-5)
    r = A.reshape(1, 2, 5)
    inorm = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + 1e-5)
    l2 = A.reshape(2, 5, 1) / np.sqrt((A * A).sum() + 1e-12)  # rank 3: every element is one vector
    return prog, [{"x": a, "y": v, "z": m}], [{
        "softmax_unit": np.ones_like(A), "sum_unit": A[:, 0, :], "vector_matrix": V @ M.reshape(5, 6),
        "transpose_x": np.swapaxes(M, -1, -2) @ M, "squeeze_scalar": np.float64(V[2]), "expand_neg": V[None, :],
        "layer_norm": norm, "batch_norm_rank3": (A - f64(mean)) / np.sqrt(f64(var) + 1e-5), "instance_norm_rank3": inorm,
        "l2_norm_rank3": l2, "cumsum_unit": np.zeros_like(A), "linear_vector": f64(weight) @ V, "concat_one": A}]


@case("fp16_program", ["conv", "matmul", "softmax", "layer_norm", "gelu", "reduce_mean", "avg_pool"], tolerance=5e-3)
def fp16_program(rng):
    """An fp16 program (fp16 input, weights and outputs) through a convolution, pooling, a matrix
    product, layer norm, gelu and softmax: within fp16 rounding of float64 on the same fp16 values."""
    a = rand(rng, 1, 3, 6, 6).astype(np.float16)
    w = (rand(rng, 4, 3, 3, 3) / 3).astype(np.float16)
    p = (rand(rng, 9, 5) / 2).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.fp16)], opset_version=ct.target.iOS17)
    def prog(x):
        h = mb.conv(x=x, weight=w, pad_type="valid", name="conv")
        pooled = mb.avg_pool(x=h, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="avg_pool")
        flat = mb.reshape(x=pooled, shape=[4, 4])
        proj = mb.matmul(x=mb.slice_by_size(x=mb.reshape(x=h, shape=[4, 16]), begin=[0, 0], size=[4, 9]), y=p, name="matmul")
        normed = mb.layer_norm(x=proj, axes=[-1], epsilon=np.float16(1e-3), name="layer_norm")
        return (h, pooled, proj, normed, mb.gelu(x=normed, name="gelu"), mb.softmax(x=proj, axis=-1, name="softmax"),
                mb.reduce_mean(x=flat, axes=[0], name="reduce_mean"))
    prog.compute_precision = ct.precision.FLOAT16
    prog.flexible_inputs = [ct.TensorType(name="x", shape=a.shape, dtype=np.float16)]
    X, W, P = f64(a), f64(w), f64(p)
    conv = np.zeros((1, 4, 4, 4))
    for o in range(4):
        for i in range(4):
            for j in range(4):
                conv[0, o, i, j] = (X[0, :, i:i + 3, j:j + 3] * W[o]).sum()
    pooled = conv.reshape(1, 4, 2, 2, 2, 2).mean(axis=(3, 5))
    proj = conv.reshape(4, 16)[:, :9] @ P
    normed = (proj - proj.mean(-1, keepdims=True)) / np.sqrt(proj.var(-1, keepdims=True) + np.float64(np.float16(1e-3)))
    e = np.exp(proj - proj.max(-1, keepdims=True))
    return prog, [{"x": a}], [{"conv": conv, "avg_pool": pooled, "matmul": proj, "layer_norm": normed,
                                "gelu": 0.5 * normed * (1 + erf(normed / math.sqrt(2))), "softmax": e / e.sum(-1, keepdims=True),
                                "reduce_mean": pooled.reshape(4, 4).mean(0)}]


def conv_nd(x, w, b, strides, pads, dilations, groups):
    """N-D convolution (cross-correlation) of x [N, C, *D] with w [O, C / groups, *K]; pads [(lo, hi)] per axis."""
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    out_dims = [(x.shape[2 + i] - (k[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(len(k))]
    out = np.zeros((n, o) + tuple(out_dims))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for pos in np.ndindex(*out_dims):
            window = tuple(slice(pos[i] * strides[i], pos[i] * strides[i] + (k[i] - 1) * dilations[i] + 1, dilations[i])
                           for i in range(len(k)))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            out[(slice(None), oc) + pos] = (patch * w[oc]).reshape(n, -1).sum(1) + (b[oc] if b is not None else 0)
    return out


def conv_transpose_nd(x, w, strides, dilations, groups):
    """N-D transposed convolution, valid padding: x [N, C, *D], w [C, O / groups, *K]."""
    n, c = x.shape[:2]
    og = w.shape[1]
    k = w.shape[2:]
    dims = x.shape[2:]
    out_dims = [(dims[i] - 1) * strides[i] + (k[i] - 1) * dilations[i] + 1 for i in range(len(k))]
    out = np.zeros((n, og * groups) + tuple(out_dims))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for pos in np.ndindex(*dims):
            window = tuple(slice(pos[i] * strides[i], pos[i] * strides[i] + (k[i] - 1) * dilations[i] + 1, dilations[i])
                           for i in range(len(k)))
            out[(slice(None), slice(g * og, (g + 1) * og)) + window] += x[(slice(None), ci) + pos][:, None] * w[ci]
    return out


def same_pads(dims, kernel, strides, dilations, lower=False):
    pads = []
    for d, k, s_, dl in zip(dims, kernel, strides, dilations):
        out = -(-d // s_)
        total = max((out - 1) * s_ + (k - 1) * dl + 1 - d, 0)
        small = total // 2
        pads.append((total - small, small) if lower else (small, total - small))
    return pads


@case("convolution_edges", ["conv", "conv_transpose", "max_pool", "avg_pool"], tolerance=1e-4)
def convolution_edges(rng):
    """conv 3-D (groups, same padding, strides per axis), depthwise 2-D with same_lower, dilated
    2-D with uneven custom pads; conv_transpose 1-D dilated and 3-D; max_pool 3-D with same
    padding (pads never win), avg_pool with ceil_mode excluding pads."""
    v, a = rand(rng, 1, 2, 4, 5, 5), rand(rng, 1, 3, 5, 6)
    w3, b3 = rand(rng, 4, 1, 2, 3, 3), rand(rng, 4)
    wd, wdil = rand(rng, 3, 1, 2, 2), rand(rng, 2, 3, 2, 2)
    s, wt1 = rand(rng, 1, 2, 5), rand(rng, 2, 3, 3)
    t, wt3 = rand(rng, 1, 2, 2, 2, 2), rand(rng, 2, 2, 2, 2, 2)

    @mb.program(input_specs=[mb.TensorSpec(shape=z.shape) for z in (v, a, s, t)], opset_version=ct.target.iOS17)
    def prog(x3, x2, x1, xt):
        return (mb.conv(x=x3, weight=w3, bias=b3, strides=[1, 2, 2], pad_type="same", groups=2, name="conv3d"),
                mb.conv(x=x2, weight=wd, strides=[2, 2], pad_type="same_lower", groups=3, name="depthwise_same_lower"),
                mb.conv(x=x2, weight=wdil, dilations=[2, 2], pad_type="custom", pad=[0, 1, 2, 0], name="dilated"),
                mb.conv_transpose(x=x1, weight=wt1, strides=[2], dilations=[2], name="transpose1d"),
                mb.conv_transpose(x=xt, weight=wt3, strides=[2, 1, 2], name="transpose3d"),
                mb.max_pool(x=mb.mul(x=x3, y=-1.0), kernel_sizes=[2, 2, 2], strides=[2, 2, 2], pad_type="same", name="max_pool3d"),
                mb.avg_pool(x=x2, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", ceil_mode=True,
                            exclude_padding_from_average=True, name="avg_pool_ceil"))
    V, A, S, T = f64(v), f64(a), f64(s), f64(t)
    conv3 = conv_nd(V, f64(w3), f64(b3), (1, 2, 2), same_pads((4, 5, 5), (2, 3, 3), (1, 2, 2), (1, 1, 1)), (1, 1, 1), 2)
    depth = conv_nd(A, f64(wd), None, (2, 2), same_pads((5, 6), (2, 2), (2, 2), (1, 1), lower=True), (1, 1), 3)
    dil = conv_nd(A, f64(wdil), None, (1, 1), [(0, 1), (2, 0)], (2, 2), 1)
    neg = -V
    pads = same_pads((4, 5, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1))
    padded = np.pad(neg, [(0, 0), (0, 0)] + pads, constant_values=-np.inf)
    mp = np.zeros((1, 2, 2, 3, 3))
    for pos in np.ndindex(2, 3, 3):
        mp[(0, slice(None)) + pos] = padded[0, :, 2 * pos[0]:2 * pos[0] + 2, 2 * pos[1]:2 * pos[1] + 2, 2 * pos[2]:2 * pos[2] + 2].max(axis=(1, 2, 3))
    ap = np.zeros((1, 3, 3, 3))
    for i in range(3):
        for j in range(3):
            ap[0, :, i, j] = A[0, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2].mean(axis=(1, 2))
    return prog, [{"x3": v, "x2": a, "x1": s, "xt": t}], [{
        "conv3d": conv3, "depthwise_same_lower": depth, "dilated": dil,
        "transpose1d": conv_transpose_nd(S, f64(wt1), (2,), (2,), 1), "transpose3d": conv_transpose_nd(T, f64(wt3), (2, 1, 2), (1, 1, 1), 1),
        "max_pool3d": mp, "avg_pool_ceil": ap}]


@case("numerics", ["softmax", "reduce_log_sum_exp", "softplus", "log", "rsqrt", "inverse", "sigmoid", "cumsum",
                   "slice_by_index", "gather", "upsample_bilinear", "resize_nearest_neighbor"])
def numerics(rng):
    """Large magnitudes where a naive formula overflows (softmax and log-sum-exp over values near
    80, softplus of ±60, sigmoid of ±90), the epsilon of log, rsqrt and inverse, cumsum reversed
    on a negative axis, range_1d with a fractional step (folded to a constant by coremltools), slice_by_index with masks and negative
    begins, gather of a scalar index (the axis dropped), upsample_bilinear with align_corners and
    a fractional scale, resize_nearest_neighbor shrinking."""
    a = (rand(rng, 2, 5) * 5 + 80).astype(np.float32)
    b = np.array([[-90.0, -60.0, 0.0, 60.0, 90.0]], dtype=np.float32)
    c = rand(rng, 1, 2, 3, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape), mb.TensorSpec(shape=c.shape)],
                opset_version=ct.target.iOS17)
    def prog(x, y, z):
        count = mb.gather(x=mb.shape(x=x), indices=1)
        return (mb.softmax(x=x, axis=-1, name="softmax"), mb.reduce_log_sum_exp(x=x, axes=[-1], name="logsumexp"),
                mb.softplus(x=y, name="softplus"), mb.sigmoid(x=y, name="sigmoid"),
                mb.log(x=mb.abs(x=y), epsilon=0.5, name="log_eps"), mb.rsqrt(x=mb.abs(x=y), epsilon=1.0, name="rsqrt_eps"),
                mb.inverse(x=y, epsilon=0.25, name="inverse_eps"),
                mb.cumsum(x=x, axis=-1, reverse=True, name="cumsum_reverse"),
                mb.range_1d(start=0.5, end=3.0, step=0.75, name="range_fraction"),
                mb.slice_by_index(x=x, begin=[0, -4], end=[0, -1], begin_mask=[True, False], end_mask=[True, False], name="slice_masks"),
                mb.gather(x=x, indices=np.int32(-1), axis=0, name="gather_scalar"),
                mb.upsample_bilinear(x=z, scale_factor_height=1.5, scale_factor_width=2.0, align_corners=True, name="upsample_align"),
                mb.resize_nearest_neighbor(x=z, target_size_height=2, target_size_width=3, name="nearest_shrink"),
                mb.mul(x=mb.cast(x=count, dtype="fp32"), y=1.0, name="count"))
    A, B, C = f64(a), f64(b), f64(c)
    e = np.exp(A - A.max(-1, keepdims=True))

    def bilinear_at(img, ys, xs):
        out = np.zeros(img.shape[:2] + (len(ys), len(xs)))
        for i, yy in enumerate(ys):
            y0 = int(math.floor(yy)); y1 = min(y0 + 1, img.shape[2] - 1); fy = yy - y0
            for j, xx in enumerate(xs):
                x0 = int(math.floor(xx)); x1 = min(x0 + 1, img.shape[3] - 1); fx = xx - x0
                out[:, :, i, j] = ((img[:, :, y0, x0] * (1 - fx) + img[:, :, y0, x1] * fx) * (1 - fy)
                                   + (img[:, :, y1, x0] * (1 - fx) + img[:, :, y1, x1] * fx) * fy)
        return out
    # align_corners: output 4 x 8 from 3 x 4, positions i * (in - 1) / (out - 1).
    up = bilinear_at(C, [i * 2 / 3 for i in range(4)], [j * 3 / 7 for j in range(8)])
    nearest = C[:, :, [int(i * 3 / 2) for i in range(2)]][:, :, :, [int(j * 4 / 3) for j in range(3)]]
    return prog, [{"x": a, "y": b, "z": c}], [{
        "softmax": e / e.sum(-1, keepdims=True), "logsumexp": A.max(-1) + np.log(e.sum(-1)), "softplus": np.logaddexp(0, B),
        "sigmoid": 1 / (1 + np.exp(-B)), "log_eps": np.log(np.abs(B) + 0.5), "rsqrt_eps": 1 / np.sqrt(np.abs(B) + 1.0),
        "inverse_eps": 1 / (B + 0.25), "cumsum_reverse": np.flip(np.cumsum(np.flip(A, -1), -1), -1),
        "range_fraction": np.arange(0.5, 3.0, 0.75), "slice_masks": A[:, 1:4], "gather_scalar": A[-1],
        "upsample_align": up, "nearest_shrink": nearest, "count": np.float64(5)}]


@case("gru_ios18", ["gru"], target=ct.target.iOS18)
def gru_ios18(rng):
    """The iOS18 gru: input_bias added to the input's projection, and reset_after (the reset gate
    applied to R_o·h + bias_o, as PyTorch's GRU does), forward and reverse."""
    S, B, I, H = 4, 2, 3, 5
    x, h0 = rand(rng, S, B, I), rand(rng, B, H)
    w_ih, w_hh, bias, input_bias = rand(rng, 3 * H, I), rand(rng, 3 * H, H), rand(rng, 3 * H), rand(rng, 3 * H)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=h0.shape)], opset_version=ct.target.iOS18)
    def prog(x, h):
        after_y, after_h = mb.gru(x=x, initial_h=h, weight_ih=w_ih, weight_hh=w_hh, bias=bias, input_bias=input_bias,
                                  reset_after=True, output_sequence=True)
        before_y, before_h = mb.gru(x=x, initial_h=h, weight_ih=w_ih, weight_hh=w_hh, bias=bias, input_bias=input_bias,
                                    direction="reverse", output_sequence=False)
        return (mb.identity(x=after_y, name="after_y"), mb.identity(x=after_h, name="after_h"),
                mb.identity(x=before_y, name="before_y"), mb.identity(x=before_h, name="before_h"))
    X = f64(x)
    sig = lambda v: 1 / (1 + np.exp(-v))
    Wr, Wo, Wz = np.split(f64(w_ih), 3)
    Rr, Ro, Rz = np.split(f64(w_hh), 3)
    br, bo, bz = np.split(f64(bias), 3)
    ir, io, iz = np.split(f64(input_bias), 3)

    def run(after, order):
        h, ys = f64(h0), []
        for t in order:
            r = sig(X[t] @ Wr.T + ir + h @ Rr.T + br)
            z = sig(X[t] @ Wz.T + iz + h @ Rz.T + bz)
            o = np.tanh(X[t] @ Wo.T + io + (r * (h @ Ro.T + bo) if after else (r * h) @ Ro.T + bo))
            h = (1 - z) * o + z * h
            ys.append(h)
        return np.stack(ys), h
    ay, ah = run(True, range(S))
    _, bh = run(False, reversed(range(S)))
    return prog, [{"x": x, "h": h0}], [{"after_y": ay, "after_h": ah, "before_y": bh[None], "before_h": bh}]


@case("later_opset_forms", ["upsample_bilinear", "quantize", "dequantize", "scaled_dot_product_attention", "cast", "gather", "topk"],
      target=ct.target.iOS18)
def later_opset_forms(rng):
    """Parameters later opsets added: upsample_bilinear's half_pixel_centers (iOS16), quantize and
    dequantize per axis with uint8 zero points (iOS17), scaled_dot_product_attention with an
    additive float mask on rank 3 (iOS18), cast to fp16 and back (rounding to fp16), gather with
    validate_indices (iOS17), topk without indices (iOS16 return_indices)."""
    x = rand(rng, 1, 2, 3, 4)
    q, k, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 4), rand(rng, 2, 5, 3)
    mask = rng.uniform(-2, 0, (3, 5)).astype(np.float32)
    scale = np.array([0.02, 0.05], dtype=np.float32)
    zero = np.array([100, 140], dtype=np.uint8)

    @mb.program(input_specs=[mb.TensorSpec(shape=t.shape) for t in (x, q, k, v)], opset_version=ct.target.iOS18)
    def prog(x, query, key, value):
        quantized = mb.quantize(input=x, scale=scale, zero_point=zero, axis=1, output_dtype="uint8")
        return (mb.upsample_bilinear(x=x, scale_factor_height=2.0, scale_factor_width=1.5, align_corners=False,
                                     half_pixel_centers=False, name="upsample_legacy"),
                mb.dequantize(input=quantized, scale=scale, zero_point=zero, axis=1, name="quantized_per_axis"),
                mb.scaled_dot_product_attention(query=query, key=key, value=value, attn_mask=mask, name="attention_additive"),
                mb.cast(x=mb.cast(x=mb.mul(x=x, y=1000.0), dtype="fp16"), dtype="fp32", name="through_fp16"),
                mb.gather(x=x, indices=np.array([1, 0, 1], dtype=np.int32), axis=1, validate_indices=True, name="gather_validated"),
                mb.topk(x=x, k=2, axis=-1, return_indices=False, name="topk_values"))
    X = f64(x)

    def bilinear_at(img, ys, xs):
        out = np.zeros(img.shape[:2] + (len(ys), len(xs)))
        for i, yy in enumerate(ys):
            y0 = int(math.floor(yy)); y1 = min(y0 + 1, img.shape[2] - 1); fy = yy - y0
            for j, xx in enumerate(xs):
                x0 = int(math.floor(xx)); x1 = min(x0 + 1, img.shape[3] - 1); fx = xx - x0
                out[:, :, i, j] = ((img[:, :, y0, x0] * (1 - fx) + img[:, :, y0, x1] * fx) * (1 - fy)
                                   + (img[:, :, y1, x0] * (1 - fx) + img[:, :, y1, x1] * fx) * fy)
        return out
    # Neither aligned nor half-pixel: source position = output position / scale, clamped to the input.
    up = bilinear_at(X, [min(i / 2.0, 2) for i in range(6)], [min(j / 1.5, 3) for j in range(6)])
    sc, zp = f64(scale).reshape(1, 2, 1, 1), f64(zero).reshape(1, 2, 1, 1)
    quant = (np.clip(np.round(X / sc) + zp, 0, 255) - zp) * sc
    Q, K, V = f64(q), f64(k), f64(v)
    sc_ = Q @ np.swapaxes(K, -1, -2) / math.sqrt(4) + f64(mask)
    e = np.exp(sc_ - sc_.max(-1, keepdims=True))
    attention = (e / e.sum(-1, keepdims=True)) @ V
    order = np.argsort(-X, axis=-1, kind="stable")[..., :2]
    return prog, [{"x": x, "query": q, "key": k, "value": v}], [{
        "upsample_legacy": up, "quantized_per_axis": quant, "attention_additive": attention,
        "through_fp16": f64((x * 1000).astype(np.float16)), "gather_validated": X[:, [1, 0, 1]],
        "topk_values": np.take_along_axis(X, order, -1)}]


def recurrent_reference(kind, X, h, c, w_ih, w_hh, b):
    """Forward rnn (tanh), gru or lstm (no peepholes) over X [S, B, I], in MIL's gate orders
    (gru: r, o, z; lstm: i, f, o, g); the outputs of every step and the last states."""
    sig = lambda v: 1 / (1 + np.exp(-v))
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    W, R, B = np.split(f64(w_ih), gates), np.split(f64(w_hh), gates), np.split(f64(b), gates)
    ys = []
    for t in range(X.shape[0]):
        x = X[t]
        if kind == "rnn":
            h = np.tanh(x @ W[0].T + h @ R[0].T + B[0])
        elif kind == "gru":
            r = sig(x @ W[0].T + h @ R[0].T + B[0])
            z = sig(x @ W[2].T + h @ R[2].T + B[2])
            o = np.tanh(x @ W[1].T + (r * h) @ R[1].T + B[1])
            h = (1 - z) * o + z * h
        else:
            i, f = sig(x @ W[0].T + h @ R[0].T + B[0]), sig(x @ W[1].T + h @ R[1].T + B[1])
            o, g = sig(x @ W[2].T + h @ R[2].T + B[2]), np.tanh(x @ W[3].T + h @ R[3].T + B[3])
            c = f * c + i * g
            h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h, c


def opset_sweep(rng, target):
    """One program holding the operations whose definitions changed after iOS15, built for an
    earlier opset (`target`), so that every version of a definition is exercised by a fixture."""
    a = rand(rng, 1, 3, 4, 5)
    seq, h0, c0 = rand(rng, 4, 2, 3), rand(rng, 2, 4), rand(rng, 2, 4)
    mean, var, gamma, beta = rand(rng, 3), rng.uniform(0.5, 1.5, 3).astype(np.float32), rand(rng, 3), rand(rng, 3)
    w_conv, w_tconv, w_mat = rand(rng, 2, 3, 2, 2), rand(rng, 3, 2, 2, 2), rand(rng, 5, 2)
    alpha, sp_beta = np.array([0.2, -0.4, 1.5], dtype=np.float32), np.array([1.0, 0.5, -0.7], dtype=np.float32)
    along = rng.integers(0, 5, (1, 3, 4, 2)).astype(np.int32)
    upd_scatter, upd_along, upd_nd = rand(rng, 1, 3, 1, 5), rand(rng, 1, 3, 4, 1), rand(rng, 1, 5)
    along_upd = rng.integers(0, 5, (1, 3, 4, 1)).astype(np.int32)
    rw = {kind: (rand(rng, g * 4, 3), rand(rng, g * 4, 4), rand(rng, g * 4)) for kind, g in (("rnn", 1), ("gru", 3), ("lstm", 4))}
    lengths = np.array([3, 1], dtype=np.int32)
    coords = rng.uniform(-1.2, 1.2, (1, 2, 3, 2)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 2.5, 3.5], [1.0, 0.0, 3.0, 2.0]], dtype=np.float32).reshape(2, 1, 4, 1, 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=seq.shape), mb.TensorSpec(shape=h0.shape),
                             mb.TensorSpec(shape=c0.shape)], opset_version=target)
    def prog(x, s, h, c):
        positive = mb.add(x=mb.abs(x=x), y=0.5)
        values, indices = mb.topk(x=x, k=2, axis=-1)
        outs = {
            "batch_norm": mb.batch_norm(x=x, mean=mean, variance=var, gamma=gamma, beta=beta, epsilon=1e-3),
            "cast": mb.cast(x=mb.cast(x=mb.mul(x=x, y=3.0), dtype="int32"), dtype="fp32"),
            "clamped_relu": mb.clamped_relu(x=x, alpha=0.1, beta=0.5), "clip": mb.clip(x=x, alpha=-0.3, beta=0.4),
            "conv": mb.conv(x=x, weight=w_conv), "conv_transpose": mb.conv_transpose(x=x, weight=w_tconv, strides=[2, 2]),
            "elu": mb.elu(x=x, alpha=0.5), "leaky_relu": mb.leaky_relu(x=x, alpha=0.3),
            "linear_activation": mb.linear_activation(x=x, alpha=2.0, beta=-1.0), "scaled_tanh": mb.scaled_tanh(x=x, alpha=1.2, beta=0.8),
            "sigmoid_hard": mb.sigmoid_hard(x=x, alpha=0.3, beta=0.4), "thresholded_relu": mb.thresholded_relu(x=x, alpha=0.2),
            "prelu": mb.prelu(x=x, alpha=alpha), "softplus_parametric": mb.softplus_parametric(x=x, alpha=alpha, beta=sp_beta),
            "expand_dims": mb.expand_dims(x=x, axes=[-1]), "squeeze": mb.squeeze(x=x, axes=[0]), "reshape": mb.reshape(x=x, shape=[3, -1]),
            "transpose": mb.transpose(x=x, perm=[0, 2, 3, 1]), "reverse": mb.reverse(x=x, axes=[1, -1]),
            "gather": mb.gather(x=x, indices=np.array([2, 0], dtype=np.int32), axis=-1),
            "gather_along_axis": mb.gather_along_axis(x=x, indices=along, axis=3),
            "gather_nd": mb.gather_nd(x=x, indices=np.array([[0, 1], [0, 2]], dtype=np.int32)),
            "instance_norm": mb.instance_norm(x=x, gamma=gamma, beta=beta, epsilon=1e-5), "l2_norm": mb.l2_norm(x=x),
            "layer_norm": mb.layer_norm(x=x, axes=[-1], epsilon=1e-5),
            "local_response_norm": mb.local_response_norm(x=x, size=3, alpha=1e-2, beta=0.75, k=1.0),
            "inverse": mb.inverse(x=positive), "log": mb.log(x=positive), "rsqrt": mb.rsqrt(x=positive),
            "matmul": mb.matmul(x=mb.reshape(x=x, shape=[3, 4, 5]), y=w_mat),
            "reduce_argmax": mb.reduce_argmax(x=x, axis=1), "reduce_argmin": mb.reduce_argmin(x=x, axis=-1),
            "scatter": mb.scatter(data=x, indices=np.array([1], dtype=np.int32), updates=upd_scatter, axis=2, mode="add"),
            "scatter_along_axis": mb.scatter_along_axis(data=x, indices=along_upd, updates=upd_along, axis=3, mode="update"),
            "scatter_nd": mb.scatter_nd(data=x, indices=np.array([[0, 1, 2]], dtype=np.int32), updates=upd_nd, mode="add"),
            "slice_by_index": mb.slice_by_index(x=x, begin=[0, 1, 0, 1], end=[1, 3, 4, 5], stride=[1, 1, 2, 2]),
            "slice_by_size": mb.slice_by_size(x=x, begin=[0, 0, 1, 1], size=[1, 2, -1, 3]),
            "sliding_windows": mb.sliding_windows(x=x, axis=3, size=2, stride=2),
            "topk_values": values, "topk_indices": indices,
            "upsample_bilinear": mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=2, align_corners=True),
            "reverse_sequence": mb.reverse_sequence(x=s, lengths=lengths, seq_axis=0, batch_axis=1),
        }
        for kind in ("rnn", "gru", "lstm"):
            w_ih, w_hh, b = rw[kind]
            kwargs = dict(initial_c=c) if kind == "lstm" else {}
            result = getattr(mb, kind)(x=s, initial_h=h, weight_ih=w_ih, weight_hh=w_hh, bias=b, output_sequence=True, **kwargs)
            outs[kind + "_y"], outs[kind + "_h"] = result[0], result[1]
        if target >= ct.target.iOS16:
            outs["crop_resize"] = mb.crop_resize(x=x, roi=rois, target_height=2, target_width=3, sampling_mode="ALIGN_CORNERS", pad_value=0.0)
            outs["resample"] = mb.resample(x=x, coordinates=coords, sampling_mode="bilinear", padding_mode="border", padding_value=0.0,
                                           coordinates_mode="normalized_minus_one_to_one", align_corners=False)
        return tuple(mb.identity(x=v, name=k) for k, v in outs.items())
    X, S = f64(a), f64(seq)
    ch = lambda v: f64(v).reshape(1, 3, 1, 1)
    positive = np.abs(X) + 0.5
    inst = (X - X.mean((2, 3), keepdims=True)) / np.sqrt(X.var((2, 3), keepdims=True) + 1e-5)
    sq = np.pad(X * X, ((0, 0), (1, 1), (0, 0), (0, 0)))
    order = np.argsort(-X, axis=-1, kind="stable")[..., :2]
    scatter = X.copy(); scatter[:, :, 1:2] += f64(upd_scatter)
    along_r = X.copy()
    for cc in range(3):
        for i in range(4):
            along_r[0, cc, i, along_upd[0, cc, i, 0]] = f64(upd_along)[0, cc, i, 0]
    nd = X.copy(); nd[0, 1, 2] += f64(upd_nd)[0]
    rev = S.copy()
    for b_, n in enumerate(lengths):
        rev[:n, b_] = S[:n, b_][::-1]
    tconv = conv_transpose_nd(X, f64(w_tconv), (2, 2), (1, 1), 1)
    align = lambda n_in, n_out: [i * (n_in - 1) / (n_out - 1) for i in range(n_out)]
    expected = {
        "batch_norm": (X - ch(mean)) / np.sqrt(ch(var) + 1e-3) * ch(gamma) + ch(beta), "cast": np.trunc(3 * X),
        "clamped_relu": np.minimum(0.5, np.where(X >= 0, X, 0.1 * X)), "clip": np.clip(X, -0.3, 0.4),
        "conv": conv_nd(X, f64(w_conv), None, (1, 1), [(0, 0), (0, 0)], (1, 1), 1), "conv_transpose": tconv,
        "elu": np.where(X > 0, X, 0.5 * (np.exp(X) - 1)), "leaky_relu": np.where(X >= 0, X, 0.3 * X),
        "linear_activation": 2 * X - 1, "scaled_tanh": 1.2 * np.tanh(0.8 * X), "sigmoid_hard": np.clip(0.3 * X + 0.4, 0, 1),
        "thresholded_relu": np.where(X > 0.2, X, 0), "prelu": np.where(X >= 0, X, ch(alpha) * X),
        "softplus_parametric": ch(alpha) * np.log1p(np.exp(ch(sp_beta) * X)),
        "expand_dims": X[..., None], "squeeze": X[0], "reshape": X.reshape(3, -1), "transpose": X.transpose(0, 2, 3, 1),
        "reverse": X[:, ::-1, :, ::-1], "gather": X[..., [2, 0]], "gather_along_axis": np.take_along_axis(X, along, 3),
        "gather_nd": X[0, [1, 2]], "instance_norm": inst * ch(gamma) + ch(beta),
        "l2_norm": X / np.sqrt((X * X).sum() + 1e-6), "layer_norm": (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5),
        "local_response_norm": X / (1.0 + 1e-2 / 3 * (sq[:, 0:3] + sq[:, 1:4] + sq[:, 2:5])) ** 0.75,
        "inverse": 1 / (positive + 1e-4), "log": np.log(positive), "rsqrt": 1 / np.sqrt(positive + 1e-12),
        "matmul": X.reshape(3, 4, 5) @ f64(w_mat), "reduce_argmax": X.argmax(1).astype(np.int32), "reduce_argmin": X.argmin(-1).astype(np.int32),
        "scatter": scatter, "scatter_along_axis": along_r, "scatter_nd": nd, "slice_by_index": X[0:1, 1:3, 0:4:2, 1:5:2],
        "slice_by_size": X[0:1, 0:2, 1:, 1:4], "sliding_windows": np.stack([X[..., 0:2], X[..., 2:4]], axis=3),
        "topk_values": np.take_along_axis(X, order, -1), "topk_indices": order.astype(np.int32),
        "upsample_bilinear": bilinear_at(X, align(4, 8), align(5, 10)), "reverse_sequence": rev,
    }
    for kind in ("rnn", "gru", "lstm"):
        w_ih, w_hh, b = rw[kind]
        ys, hh, _ = recurrent_reference(kind, S, f64(h0), f64(c0), w_ih, w_hh, b)
        expected[kind + "_y"], expected[kind + "_h"] = ys, hh
    if target >= ct.target.iOS16:
        crop = tensor_ops.crop_one
        expected["crop_resize"] = np.array([[[crop(X[0, cc], rois[n, 0, :, 0, 0], 2, 3, "CORNERS_HEIGHT_FIRST", False, 1.0, "ALIGN_CORNERS")
                                              for cc in range(3)]] for n in range(2)])
        expected["resample"] = tensor_ops.resample_reference(X, f64(coords), "bilinear", "border", 0.0, "normalized_minus_one_to_one", False)
    return prog, [{"x": a, "s": seq, "h": h0, "c": c0}], [expected]


def bilinear_at(img, ys, xs):
    """Bilinear samples of img [N, C, H, W] at rows ys and columns xs (positions inside the image)."""
    out = np.zeros(img.shape[:2] + (len(ys), len(xs)))
    for i, yy in enumerate(ys):
        y0 = int(math.floor(yy)); y1 = min(y0 + 1, img.shape[2] - 1); fy = yy - y0
        for j, xx in enumerate(xs):
            x0 = int(math.floor(xx)); x1 = min(x0 + 1, img.shape[3] - 1); fx = xx - x0
            out[:, :, i, j] = ((img[:, :, y0, x0] * (1 - fx) + img[:, :, y0, x1] * fx) * (1 - fy)
                               + (img[:, :, y1, x0] * (1 - fx) + img[:, :, y1, x1] * fx) * fy)
    return out


SWEPT = ["batch_norm", "cast", "clamped_relu", "clip", "conv", "conv_transpose", "elu", "expand_dims", "gather", "gather_along_axis",
         "gather_nd", "gru", "instance_norm", "inverse", "l2_norm", "layer_norm", "leaky_relu", "linear_activation",
         "local_response_norm", "log", "lstm", "matmul", "prelu", "reduce_argmax", "reduce_argmin", "reshape", "reverse",
         "reverse_sequence", "rnn", "rsqrt", "scaled_tanh", "scatter", "scatter_along_axis", "scatter_nd", "sigmoid_hard",
         "slice_by_index", "slice_by_size", "sliding_windows", "softplus_parametric", "squeeze", "thresholded_relu", "topk",
         "transpose", "upsample_bilinear"]


@case("opset_ios15", SWEPT, tolerance=1e-4, target=ct.target.iOS15)
def opset_ios15(rng):
    return opset_sweep(rng, ct.target.iOS15)


@case("opset_ios16", SWEPT + ["crop_resize", "resample"], tolerance=1e-4, target=ct.target.iOS16)
def opset_ios16(rng):
    return opset_sweep(rng, ct.target.iOS16)


@case("opset_ios17", ["reshape_like", "resample"], target=ct.target.iOS17)
def opset_ios17(rng):
    """The iOS17 definitions of reshape_like and resample (op_reshape_like is iOS16, resample's other fixtures iOS15 and 16)."""
    x, r = rand(rng, 2, 3, 4), rand(rng, 4, 6)
    img, coords = rand(rng, 1, 2, 3, 4), rng.uniform(-1.2, 1.2, (1, 2, 2, 2)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=t.shape) for t in (x, r, img, coords)], opset_version=ct.target.iOS17)
    def prog(x, r, img, g):
        return (mb.reshape_like(x=x, ref_tensors=(r,), begins=(0,), ends=(0,), end_masks=(True,), name="reshape_like"),
                mb.resample(x=img, coordinates=g, sampling_mode="nearest", padding_mode="constant", padding_value=0.5,
                            coordinates_mode="normalized_zero_to_one", align_corners=True, name="resample"))
    return prog, [{"x": x, "r": r, "img": img, "g": coords}], [{
        "reshape_like": f64(x).reshape(4, 6),
        "resample": tensor_ops.resample_reference(f64(img), f64(coords), "nearest", "constant", 0.5, "normalized_zero_to_one", True)}]


@case("recurrent_fp16_data", ["gru", "lstm", "rnn"], tolerance=5e-4)
def recurrent_fp16_data(rng):
    """tensor_ops' recurrent program with fp16 data, states and weights in a program converted
    at fp32 precision, its outputs fp16 (coremltools' iOS17 recurrent tests with dtype float16
    and the fp32 backend). The reference is float64 from the stored fp16 values; the tolerance,
    5e-4 of max(1, |reference|), is half an fp16 unit in the last place (2^-11) and 1.2e-5 for
    fp32 arithmetic: modelc computes in fp32 and rounds once, at the fp16 outputs."""
    return tensor_ops.recurrent(rng, dtype=np.float16)


@case("conv_transpose_fp16_data", ["conv_transpose"], tolerance=5e-4)
def conv_transpose_fp16_data(rng):
    """conv_transpose 2-D (strides, dilations, groups 2, custom pads, bias) on fp16 data and
    weights in a program converted at fp32 precision (coremltools' iOS17 conv_transpose stress
    tests with float16): float64 reference from the stored fp16 values, half an fp16 ulp."""
    x = rng.standard_normal((1, 2, 7, 7)).astype(np.float16)
    w = (rng.uniform(-1, 1, (2, 2, 2, 2)) / 2).astype(np.float16)
    b = rng.uniform(-1, 1, 4).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape, dtype=types.fp16)], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.conv_transpose(x=x, weight=w, bias=b, pad_type="custom", pad=[2, 2, 1, 1], strides=[2, 1], dilations=[2, 1],
                                 groups=2, name="y")
    full = conv_transpose_nd(f64(x), f64(w), (2, 1), (2, 1), 2) + f64(b)[None, :, None, None]
    return prog, [{"x": x}], [{"y": full[:, :, 2:-2, 1:-1]}]


@case("sparse_fp16_data_fp32_sum", ["constexpr_sparse_to_dense", "constexpr_lut_to_sparse", "cast"], tolerance=1e-7,
      target=ct.target.iOS18)
def sparse_fp16_data_fp32_sum(rng):
    """fp16 sparse weights (plain and palettized) cast to fp32 and added to an fp32 input, as
    coremltools' iOS18 sparse compression tests build them: the fp32 sums of fp16 values and 1
    are exact, so the reference is exact (a reference summed in fp16, as those tests' NumPy
    expression `fp16_array + 1` is, differs by up to 4.9e-4)."""
    from coremltools.converters.mil.mil.ops.defs.iOS18 import constexpr_lut_to_sparse, constexpr_sparse_to_dense
    shape = (2, 4, 8)
    mask = (rng.uniform(0, 1, shape) < 0.5).astype(types.np_uint1_dtype)
    data = rng.uniform(0, 1, int(mask.sum())).astype(np.float16)
    lut_mask = (rng.uniform(0, 1, shape) < 0.5).astype(types.np_uint1_dtype)
    indices = rng.integers(0, 4, int(lut_mask.sum())).astype(types.np_uint2_dtype)
    lut = rng.uniform(0, 1, (1, 1, 1, 4, 1)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=shape)], opset_version=ct.target.iOS18)
    def prog(x):
        dense = mb.constexpr_sparse_to_dense(nonzero_data=data, mask=mask)
        lut_mask_out, lut_data = mb.constexpr_lut_to_sparse(indices_mask=lut_mask, indices_nonzero_data=indices, lut=lut)
        palettized = mb.constexpr_sparse_to_dense(nonzero_data=lut_data, mask=lut_mask_out)
        return (mb.add(x=x, y=mb.cast(x=dense, dtype="fp32"), name="sparse"),
                mb.add(x=x, y=mb.cast(x=palettized, dtype="fp32"), name="palettized"))
    ones = np.ones(shape, np.float32)
    out_mask, out_data = constexpr_lut_to_sparse.decompress(lut_mask, indices, lut, None)
    return prog, [{"x": ones}], [{"sparse": f64(constexpr_sparse_to_dense.decompress(data, mask)) + 1,
                                  "palettized": f64(constexpr_sparse_to_dense.decompress(out_data, out_mask)) + 1}]


BAD_PARAMETERS = []


def bad_parameter(name, op, parameter, value, exit_code, message):
    """A program whose operation `op` (named by its output) gets `value` for `parameter` in the
    file: the engine must refuse it at load with `message` (exit 94: a mode or value modelc does not
    run; 76: a value the definition does not allow)."""
    def register(function):
        BAD_PARAMETERS.append((name, op, parameter, value, exit_code, message, function))
        return function
    return register


def rank3(function):
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        return function(x)
    return prog


@bad_parameter("transpose_perm_repeats", "y", "perm", [0, 0, 2], 76, 'operation "y" (transpose): perm [0, 0, 2] is not a permutation of 3 axes')
def bad_transpose():
    return rank3(lambda x: mb.transpose(x=x, perm=[0, 2, 1], name="y"))


@bad_parameter("reduce_axis_outside", "y", "axes", [3], 76, 'operation "y" (reduce_sum): axes 3 is outside a rank-3 tensor')
def bad_reduce():
    return rank3(lambda x: mb.reduce_sum(x=x, axes=[1], name="y"))


@bad_parameter("softmax_axis_outside", "y", "axis", -4, 76, 'operation "y" (softmax): axis -4 is outside a rank-3 tensor')
def bad_softmax():
    return rank3(lambda x: mb.softmax(x=x, axis=-1, name="y"))


@bad_parameter("concat_axis_outside", "y", "axis", 3, 76, 'operation "y" (concat): axis 3 is outside a rank-3 tensor')
def bad_concat():
    return rank3(lambda x: mb.concat(values=(x, x), axis=2, name="y"))


@bad_parameter("gelu_mode_unknown", "y", "mode", "CUBIC", 94, 'layer "y" (gelu): gelu mode CUBIC is not one MIL defines')
def bad_gelu():
    return rank3(lambda x: mb.gelu(x=x, mode="EXACT", name="y"))


@bad_parameter("pad_mode_unknown", "y", "mode", "circular", 94, 'layer "y" (pad): pad mode circular is not supported')
def bad_pad():
    return rank3(lambda x: mb.pad(x=x, pad=[1, 1], mode="reflect", name="y"))


@bad_parameter("reshape_two_unknown", "y", "shape", [-1, -1], 76, 'operation "y" (reshape): shape [-1, -1] has more than one -1')
def bad_reshape():
    return rank3(lambda x: mb.reshape(x=x, shape=[6, 4], name="y"))


@bad_parameter("gather_axis_outside", "y", "axis", 5, 76, 'operation "y" (gather): axis 5 is outside a rank-3 tensor')
def bad_gather():
    return rank3(lambda x: mb.gather(x=x, indices=np.array([1, 0], dtype=np.int32), axis=1, name="y"))


@bad_parameter("split_sizes_do_not_add_up", "y", "split_sizes", [1, 2], 76, 'operation "y_0" (split): split_sizes [1, 2] for axis 2 of size 4 into 2 outputs')
def bad_split():
    return rank3(lambda x: mb.split(x=x, split_sizes=[1, 3], axis=2, name="y")[0])


@bad_parameter("tile_reps_wrong_length", "y", "reps", [2, 2], 76, 'operation "y" (tile): reps needs 3 non-negative values')
def bad_tile():
    return rank3(lambda x: mb.tile(x=x, reps=[1, 2, 1], name="y"))


@bad_parameter("slice_stride_zero", "y", "stride", [1, 0, 1], 76, 'operation "y" (slice_by_index): stride 0 on axis 1')
def bad_slice():
    return rank3(lambda x: mb.slice_by_index(x=x, begin=[0, 0, 0], end=[2, 3, 4], stride=[1, 2, 1], name="y"))


@bad_parameter("topk_k_too_large", "y", "k", 9, 76, 'operation "y_0" (topk): k 9 for an axis of size 4')
def bad_topk():
    return rank3(lambda x: mb.topk(x=x, k=2, axis=-1, name="y")[0])


@bad_parameter("cast_dtype_unknown", "y", "dtype", "complex64", 94, 'layer "y" (cast): dtype "complex64" is not supported')
def bad_cast():
    return rank3(lambda x: mb.cast(x=x, dtype="int32", name="y"))


@bad_parameter("conv_groups_do_not_divide", "y", "groups", 3, 76, 'operation "y" (conv): 4 input channels, weight [4, 2, 1, 1], 3 groups')
def bad_conv():
    w = np.ones((4, 2, 1, 1), dtype=np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4, 3, 3))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.conv(x=x, weight=w, groups=2, name="y")
    return prog


@bad_parameter("expand_dims_axis_outside", "y", "axes", [5], 76, 'operation "y" (expand_dims): axes 5 is outside a rank-4 tensor')
def bad_expand():
    return rank3(lambda x: mb.expand_dims(x=x, axes=[0], name="y"))


@bad_parameter("layer_norm_axis_outside", "y", "axes", [3], 76, 'operation "y" (layer_norm): axes 3 is outside a rank-3 tensor')
def bad_layer_norm():
    return rank3(lambda x: mb.layer_norm(x=x, axes=[2], name="y"))


def image(function, shape=(1, 8, 4, 5)):
    @mb.program(input_specs=[mb.TensorSpec(shape=shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return function(x)
    return prog


@bad_parameter("one_hot_negative_size", "y", "one_hot_vector_size", -1, 76, 'operation "y" (one_hot): one_hot_vector_size -1 is negative')
def bad_one_hot():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3), dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.one_hot(indices=x, one_hot_vector_size=4, name="y")
    return prog


@bad_parameter("space_to_depth_block_does_not_divide", "y", "block_size", 3, 76, 'operation "y" (space_to_depth): block_size 3: spatial size 4 × 6 is not divisible by 3')
def bad_space_to_depth():
    return image(lambda x: mb.space_to_depth(x=x, block_size=2, name="y"), shape=(1, 2, 4, 6))


@bad_parameter("depth_to_space_block_does_not_divide", "y", "block_size", 3, 76, 'operation "y" (depth_to_space): block_size 3: 8 channels are not divisible by 9')
def bad_depth_to_space():
    return image(lambda x: mb.depth_to_space(x=x, block_size=2, name="y"))


@bad_parameter("pixel_shuffle_factor_does_not_divide", "y", "upscale_factor", 3, 76, 'operation "y" (pixel_shuffle): upscale_factor 3: 8 channels are not divisible by 9')
def bad_pixel_shuffle():
    return image(lambda x: mb.pixel_shuffle(x=x, upscale_factor=2, name="y"))


@bad_parameter("tile_negative_reps", "y", "reps", [1, -1, 1], 76, 'operation "y" (tile): reps needs 3 non-negative values')
def bad_tile_negative():
    return rank3(lambda x: mb.tile(x=x, reps=[1, 2, 1], name="y"))


@bad_parameter("pad_reflect_too_wide", "y", "pad", [5, 5], 76, 'operation "y" (pad): pad: reflect padding of 5 on axis 2 of size 4')
def bad_pad_reflect():
    return rank3(lambda x: mb.pad(x=x, pad=[1, 1], mode="reflect", name="y"))


@bad_parameter("max_pool_kernel_larger_than_input", "y", "kernel_sizes", [9, 9], 76, 'operation "y" (max_pool): spatial axis 0 of size 4 gives no output (kernel_sizes [9, 9], dilations [1, 1], pad_type valid)')
def bad_pool_kernel():
    return image(lambda x: mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[1, 1], pad_type="valid", name="y"))


@bad_parameter("avg_pool_stride_zero", "y", "strides", [0, 1], 76, 'operation "y" (avg_pool): strides [0, 1] must be positive')
def bad_pool_stride():
    return image(lambda x: mb.avg_pool(x=x, kernel_sizes=[2, 2], strides=[1, 1], pad_type="valid", name="y"))


@bad_parameter("conv_stride_zero", "y", "strides", [0, 1], 76, 'operation "y" (conv): strides [0, 1] must be positive')
def bad_conv_stride():
    w = np.ones((2, 8, 1, 1), dtype=np.float32)
    return image(lambda x: mb.conv(x=x, weight=w, strides=[1, 1], name="y"))


@bad_parameter("conv_dilation_zero", "y", "dilations", [1, 0], 76, 'operation "y" (conv): dilations [1, 0] must be positive')
def bad_conv_dilation():
    w = np.ones((2, 8, 3, 3), dtype=np.float32)
    return image(lambda x: mb.conv(x=x, weight=w, dilations=[1, 1], name="y"))


@bad_parameter("batch_norm_mean_wrong_length", "y", "mean", [0.0, 0.0], 76, 'operation "y" (batch_norm): mean has 2 values, expected 8')
def bad_batch_norm():
    return image(lambda x: mb.batch_norm(x=x, mean=np.zeros(8, dtype=np.float32), variance=np.ones(8, dtype=np.float32), name="y"))


@bad_parameter("sliding_windows_stride_zero", "y", "stride", 0, 76, 'operation "y" (sliding_windows): size 2 stride 0 on an axis of 4')
def bad_sliding():
    return rank3(lambda x: mb.sliding_windows(x=x, axis=2, size=2, stride=1, name="y"))


@bad_parameter("split_num_splits_does_not_divide", "y", "num_splits", 3, 76, 'operation "y_0" (split): num_splits 3 for 2 outputs')
def bad_num_splits():
    return rank3(lambda x: mb.split(x=x, num_splits=2, axis=2, name="y")[0])


@bad_parameter("squeeze_axis_not_one", "y", "axes", [1], 76, 'operation "y" (squeeze): axes: axis 1 has size 2, not 1')
def bad_squeeze():
    return rank3(lambda x: mb.squeeze(x=mb.expand_dims(x=x, axes=[0]), axes=[0], name="y"))


@bad_parameter("stack_axis_outside", "y", "axis", 5, 76, 'operation "y" (stack): axis 5 is outside a rank-4 tensor')
def bad_stack():
    return rank3(lambda x: mb.stack(values=(x, x), axis=0, name="y"))


@bad_parameter("cumsum_axis_outside", "y", "axis", -4, 76, 'operation "y" (cumsum): axis -4 is outside a rank-3 tensor')
def bad_cumsum():
    return rank3(lambda x: mb.cumsum(x=x, axis=0, name="y"))


@bad_parameter("argmax_axis_outside", "y", "axis", 3, 76, 'operation "y" (reduce_argmax): axis 3 is outside a rank-3 tensor')
def bad_argmax():
    return rank3(lambda x: mb.reduce_argmax(x=x, axis=0, name="y"))


@bad_parameter("transpose_perm_wrong_length", "y", "perm", [1, 0], 76, 'operation "y" (transpose): perm [1, 0] is not a permutation of 3 axes')
def bad_transpose_length():
    return rank3(lambda x: mb.transpose(x=x, perm=[0, 2, 1], name="y"))


@bad_parameter("lstm_direction_unknown", "y", "direction", "sideways", 94, 'layer "y_0" (lstm): direction sideways is not supported for lstm')
def bad_lstm():
    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 1, 2)), mb.TensorSpec(shape=(1, 4)), mb.TensorSpec(shape=(1, 4))],
                opset_version=ct.target.iOS17)
    def prog(x, h, c):
        return mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=np.ones((16, 2), dtype=np.float32),
                       weight_hh=np.ones((16, 4), dtype=np.float32), name="y")[0]
    return prog


@bad_parameter("resize_bilinear_mode_unknown", "y", "sampling_mode", "CUBIC", 94, 'layer "y" (resize_bilinear): sampling_mode CUBIC is not one MIL defines')
def bad_resize_mode():
    return image(lambda x: mb.resize_bilinear(x=x, target_size_height=6, target_size_width=6, sampling_mode="DEFAULT", name="y"))


@bad_parameter("upsample_scale_zero", "y", "scale_factor_height", 0.0, 76, 'operation "y" (upsample_nearest_neighbor): scale_factor_height 0.0 and scale_factor_width 2.0 must be positive')
def bad_upsample():
    return image(lambda x: mb.upsample_nearest_neighbor(x=x, scale_factor_height=2.0, scale_factor_width=2.0, name="y"))


@bad_parameter("crop_more_than_the_image", "y", "crop_height", [3, 3], 76, 'operation "y" (crop): crop_height [3, 3] does not fit an axis of size 4')
def bad_crop():
    return image(lambda x: mb.crop(x=x, crop_height=[1, 1], crop_width=[1, 1], name="y"))


@bad_parameter("slice_by_size_beyond_the_axis", "y", "size", [2, 3, 9], 76, 'operation "y" (slice_by_size): begin 1 size 9 do not fit axis 2 of size 4')
def bad_slice_size():
    return rank3(lambda x: mb.slice_by_size(x=x, begin=[0, 0, 1], size=[2, 3, 2], name="y"))


@bad_parameter("local_response_norm_size_zero", "y", "size", 0, 76, 'operation "y" (local_response_norm): size 0 must be positive')
def bad_lrn():
    return image(lambda x: mb.local_response_norm(x=x, size=3, name="y"))


@bad_parameter("space_to_batch_block_zero", "y", "block_shape", [0, 2], 76, 'operation "y" (space_to_batch): block_shape [0, 2] must be positive and paddings [0, 0, 1, 0] non-negative')
def bad_space_to_batch():
    return image(lambda x: mb.space_to_batch(x=x, block_shape=[2, 2], paddings=[[0, 0], [1, 0]], name="y"))


@bad_parameter("batch_to_space_block_zero", "y", "block_shape", [0, 2], 76, 'operation "y" (batch_to_space): block_shape [0, 2] must be positive and crops [0, 0, 0, 0] non-negative')
def bad_batch_to_space():
    return image(lambda x: mb.batch_to_space(x=x, block_shape=[1, 2], crops=[[0, 0], [0, 0]], name="y"), shape=(4, 2, 3, 3))


@bad_parameter("resize_bilinear_target_zero", "y", "target_size_height", 0, 76, 'operation "y" (resize_bilinear): target_size_height 0 and target_size_width 6 must be positive')
def bad_resize_target():
    return image(lambda x: mb.resize_bilinear(x=x, target_size_height=6, target_size_width=6, name="y"))


@bad_parameter("resize_nearest_target_negative", "y", "target_size_width", -2, 76, 'operation "y" (resize_nearest_neighbor): target_size_height 6 and target_size_width -2 must be positive')
def bad_resize_nearest():
    return image(lambda x: mb.resize_nearest_neighbor(x=x, target_size_height=6, target_size_width=6, name="y"))


@bad_parameter("conv_transpose_stride_zero", "y", "strides", [0, 1], 76, 'operation "y" (conv_transpose): strides [0, 1] must be positive')
def bad_conv_transpose():
    w = np.ones((8, 2, 2, 2), dtype=np.float32)
    return image(lambda x: mb.conv_transpose(x=x, weight=w, strides=[2, 2], name="y"))


@bad_parameter("l2_pool_kernel_zero", "y", "kernel_sizes", [0, 2], 76, 'operation "y" (l2_pool): kernel_sizes [0, 2] must be positive')
def bad_l2_pool():
    return image(lambda x: mb.l2_pool(x=x, kernel_sizes=[2, 2], strides=[1, 1], pad_type="valid", name="y"))


@bad_parameter("sliding_windows_size_zero", "y", "size", 0, 76, 'operation "y" (sliding_windows): size 0 stride 1 on an axis of 4')
def bad_sliding_size():
    return rank3(lambda x: mb.sliding_windows(x=x, axis=2, size=2, stride=1, name="y"))


@bad_parameter("pixel_unshuffle_factor_zero", "y", "downscale_factor", 0, 76, 'operation "y" (pixel_unshuffle): x [1, 2, 4, 4] needs rank 4 and downscale_factor ≥ 1')
def bad_pixel_unshuffle():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 4, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(2), name="y")
    return prog


@bad_parameter("crop_resize_target_zero", "y", "target_height", 0, 76, 'operation "y" (crop_resize): target_height and target_width must be positive')
def bad_crop_resize():
    boxes = np.array([[0.0, 0.0, 2.0, 2.0]], dtype=np.float32)
    return image(lambda x: mb.crop_resize(x=x, boxes=boxes, target_height=2, target_width=2, name="y"))


@bad_parameter("one_hot_axis_outside", "y", "axis", 4, 76, 'operation "y" (one_hot): axis 4 is outside a rank-3 tensor')
def bad_one_hot_axis():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3), dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.one_hot(indices=x, one_hot_vector_size=4, axis=-1, name="y")
    return prog


@bad_parameter("scatter_axis_outside", "y", "axis", 3, 76, 'operation "y" (scatter): axis 3 is outside a rank-3 tensor')
def bad_scatter_axis():
    return rank3(lambda x: mb.scatter(data=x, indices=np.array([1], dtype=np.int32), updates=np.ones((2, 1, 4), dtype=np.float32),
                                      axis=1, name="y"))


@bad_parameter("gather_along_axis_axis_outside", "y", "axis", -4, 76, 'operation "y" (gather_along_axis): axis -4 is outside a rank-3 tensor')
def bad_gather_along():
    return rank3(lambda x: mb.gather_along_axis(x=x, indices=np.zeros((2, 3, 1), dtype=np.int32), axis=2, name="y"))


@bad_parameter("reverse_axis_outside", "y", "axes", [3], 76, 'operation "y" (reverse): axes 3 is outside a rank-3 tensor')
def bad_reverse():
    return rank3(lambda x: mb.reverse(x=x, axes=[1], name="y"))


@bad_parameter("argsort_axis_outside", "y", "axis", 7, 76, 'operation "y" (argsort): axis 7 is outside a rank-3 tensor')
def bad_argsort():
    return rank3(lambda x: mb.argsort(x=x, axis=1, name="y"))


@bad_parameter("range_step_zero", "y", "step", 0, 76, 'operation "y" (range_1d): start, end and a non-zero step are required')
def bad_range():
    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(),))], opset_version=ct.target.iOS17)
    def prog(x):
        count = mb.gather(x=mb.shape(x=x), indices=0)
        return mb.range_1d(start=0, end=count, step=1, name="y")
    return prog


def set_parameter(spec, output, parameter, value):
    """Writes `value` for `parameter` of the operation whose first output is `output`, in place
    (in its const operation or its inline value): the builder checks parameters, a file need not."""
    block = list(spec.mlProgram.functions["main"].block_specializations.values())[0]
    op = [o for o in block.operations if o.type != "const" and o.outputs
          and (o.outputs[0].name == output or o.outputs[0].name.startswith(output + "_"))][0]
    argument = op.inputs[parameter].arguments[0]
    if argument.name:
        const = [o for o in block.operations if o.outputs and o.outputs[0].name == argument.name][0]
        tensor = const.attributes["val"].immediateValue.tensor
        value_type = const.attributes["val"].type.tensorType
    else:
        tensor = argument.value.immediateValue.tensor
        value_type = argument.value.type.tensorType
    values = value if isinstance(value, list) else [value]
    if isinstance(values[0], str):
        target = tensor.strings.values
    elif isinstance(values[0], float):
        target = tensor.floats.values
    else:
        target = tensor.ints.values
    del target[:]
    target.extend(values)
    if isinstance(value, list) and value_type.rank == 1:
        value_type.dimensions[0].constant.size = len(values)
    return op.outputs[0].name


def write_bad_parameters(out):
    out = os.path.join(out, "BadParameters")
    os.makedirs(out, exist_ok=True)
    expected = {}
    for name, output, parameter, value, exit_code, message, build in BAD_PARAMETERS:
        model = ct.convert(build(), convert_to="mlprogram", skip_model_load=True, minimum_deployment_target=ct.target.iOS17,
                           compute_precision=ct.precision.FLOAT32)
        package = os.path.join(out, name + ".mlpackage")
        save_ml_package(model, package)
        path = package_root_model_path(package)
        spec = parse_model(read_bytes(path))
        operation = set_parameter(spec, output, parameter, value)
        save_spec(spec, path)
        expected[name] = {"exit": exit_code, "message": message, "operation": operation, "parameter": parameter}
    with open(os.path.join(out, "refusals.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def convert(prog, target):
    return ct.convert(prog, convert_to="mlprogram", skip_model_load=True, minimum_deployment_target=target,
                      compute_precision=getattr(prog, "compute_precision", ct.precision.FLOAT32),
                      inputs=getattr(prog, "flexible_inputs", None),
                      classifier_config=getattr(prog, "classifier_config", None))


def write(out, name, ops, tolerance, target, build):
    labelled = []

    def built(rng):
        prog, inputs, outputs = build(rng)
        if hasattr(prog, "classifier_config"):
            prog = convert(prog, target)
        if any(isinstance(v, (str, dict)) for o in outputs for v in o.values()):
            # A classifier's label and probabilities: written below as a string and an object.
            labelled.extend(outputs)
            outputs = [{} for _ in outputs]
        return prog, inputs, outputs
    write_case(out, name, tolerance, target, built)
    missing = ops - program_operations(os.path.join(out, name + ".mlpackage"))
    if missing:
        raise SystemExit("%s: the converted program lacks %s" % (name, sorted(missing)))
    if labelled:
        path = os.path.join(out, name + ".json")
        with open(path) as f:
            document = json.load(f)
        for entry, outputs in zip(document["cases"], labelled):
            entry["outputs"] = outputs
        with open(path, "w") as f:
            json.dump(document, f, indent=1, sort_keys=True)
            f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    out = os.path.join(args.out, SUBDIR)
    os.makedirs(out, exist_ok=True)
    for name, ops, tolerance, target, build in CASES:
        if args.only and name != args.only:
            continue
        write(out, name, ops, tolerance, target, build)
        print("wrote", name)
    if args.only in (None, "bad_parameters"):
        write_bad_parameters(out)
        print("wrote", len(BAD_PARAMETERS), "programs with bad parameters")


if __name__ == "__main__":
    main()
