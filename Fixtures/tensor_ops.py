#!/usr/bin/env python3
"""Generate the per-operation fixtures of modelc's tensor engine (Fixtures/Parity/TensorOps).

Usage:
    tensor_ops.py [--out DIR]   write DIR/Parity/TensorOps/ (default DIR: the folder of this script)

Each case is a small ML program built with coremltools' MIL builder (mb.program) and converted
by ct.convert, and a JSON file in the format of Fixtures/Parity: inputs, and the outputs that a
NumPy float64 computation written here from the operation definitions of coremltools 9.0
(coremltools/converters/mil/mil/ops/defs/iOS15..iOS18) gives for them. Booleans are returned
as int32 (Core ML outputs are fp16, fp32 or int32 arrays). Deterministic: fixed seeds,
deterministic serialization (see generate.finish_ml_package).
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
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.types.symbolic import is_symbolic  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import save_ml_package  # noqa: E402

SUBDIR = os.path.join("Parity", "TensorOps")
REFERENCE = "NumPy %s float64, from the MIL operation definitions" % np.__version__
CASES = []


def case(name, tolerance=1e-5, target=ct.target.iOS17):
    def register(function):
        CASES.append((name, tolerance, target, function))
        return function
    return register


def erf(x):
    return np.vectorize(math.erf)(x)


def tolist(value):
    value = np.asarray(value)
    if value.dtype == np.bool_:
        value = value.astype(np.int32)
    if np.issubdtype(value.dtype, np.integer):
        return value.astype(int).tolist()
    return value.astype(float).tolist()


def rand(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@case("binary_broadcast")
def binary_broadcast(rng):
    a, b = rand(rng, 2, 3, 4), rand(rng, 3, 1) + 2

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape)], opset_version=ct.target.iOS17)
    def prog(x, y):
        return (mb.add(x=x, y=y, name="add"), mb.sub(x=x, y=y, name="sub"), mb.mul(x=x, y=y, name="mul"),
                mb.real_div(x=x, y=y, name="real_div"), mb.maximum(x=x, y=y, name="maximum"),
                mb.pow(x=y, y=x, name="pow"), mb.floor_div(x=x, y=y, name="floor_div"), mb.mod(x=x, y=y, name="mod"))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return prog, [{"x": a, "y": b}], [{"add": a64 + b64, "sub": a64 - b64, "mul": a64 * b64, "real_div": a64 / b64,
                                        "maximum": np.maximum(a64, b64), "pow": np.power(b64, a64),
                                        "floor_div": np.floor(a64 / b64), "mod": np.mod(a64, b64)}]


@case("integer_arithmetic")
def integer_arithmetic(rng):
    a = rng.integers(-20, 20, (3, 4)).astype(np.int32)
    b = np.array([3, -4, 5, -7], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.floor_div(x=x, y=b, name="floor_div"), mb.mod(x=x, y=b, name="mod"), mb.mul(x=x, y=b, name="mul"),
                mb.sub(x=x, y=b, name="sub"), mb.abs(x=x, name="abs"))
    return prog, [{"x": a}], [{"floor_div": a // b, "mod": np.mod(a, b), "mul": a * b, "sub": a - b, "abs": np.abs(a)}]


@case("comparisons_and_logic")
def comparisons(rng):
    a, b = rand(rng, 2, 5), rand(rng, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape)], opset_version=ct.target.iOS17)
    def prog(x, y):
        less, ge = mb.less(x=x, y=y), mb.greater_equal(x=x, y=0.0)
        out = [mb.cast(x=v, dtype="int32", name=n) for v, n in [
            (less, "less"), (ge, "greater_equal"), (mb.equal(x=x, y=x), "equal"),
            (mb.logical_and(x=less, y=ge), "logical_and"), (mb.logical_or(x=less, y=ge), "logical_or"),
            (mb.logical_xor(x=less, y=ge), "logical_xor"), (mb.logical_not(x=less), "logical_not")]]
        out.append(mb.select(cond=less, a=x, b=mb.mul(x=y, y=10.0), name="select"))
        return tuple(out)
    less, ge = a < b, a >= 0
    return prog, [{"x": a, "y": b}], [{"less": less, "greater_equal": ge, "equal": np.ones_like(less),
                                        "logical_and": less & ge, "logical_or": less | ge, "logical_xor": less ^ ge,
                                        "logical_not": ~less, "select": np.where(less, a.astype(np.float64), b.astype(np.float64) * 10)}]


@case("cast")
def cast(rng):
    a = np.array([[-2.7, -0.5, 0.0, 0.4, 1.6, 3.2]], dtype=np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        as_int = mb.cast(x=x, dtype="int32", name="to_int32")
        as_bool = mb.cast(x=x, dtype="bool")
        return as_int, mb.cast(x=as_bool, dtype="fp32", name="bool_to_fp32"), mb.cast(x=as_int, dtype="fp32", name="int_to_fp32")
    return prog, [{"x": a}], [{"to_int32": np.trunc(a).astype(np.int32), "bool_to_fp32": (a != 0).astype(np.float64),
                                "int_to_fp32": np.trunc(a)}]


@case("unary")
def unary(rng):
    a = rng.uniform(0.1, 2, (3, 4)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.exp(x=x, name="exp"), mb.log(x=x, name="log"), mb.sqrt(x=x, name="sqrt"), mb.rsqrt(x=x, name="rsqrt"),
                mb.square(x=x, name="square"), mb.erf(x=x, name="erf"), mb.tanh(x=x, name="tanh"),
                mb.floor(x=x, name="floor"), mb.round(x=mb.mul(x=x, y=2.0), name="round"), mb.sin(x=x, name="sin"),
                mb.inverse(x=x, name="inverse"), mb.clip(x=x, alpha=0.5, beta=1.5, name="clip"))
    d = a.astype(np.float64)
    return prog, [{"x": a}], [{"exp": np.exp(d), "log": np.log(d), "sqrt": np.sqrt(d), "rsqrt": 1 / np.sqrt(d + 1e-12),
                                "square": d * d, "erf": erf(d), "tanh": np.tanh(d), "floor": np.floor(d),
                                "round": np.round(2 * d), "sin": np.sin(d), "inverse": 1 / (d + 1e-4), "clip": np.clip(d, 0.5, 1.5)}]


@case("activations")
def activations(rng):
    a = rand(rng, 2, 3, 4) * 3

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.gelu(x=x, mode="EXACT", name="gelu_exact"), mb.gelu(x=x, mode="TANH_APPROXIMATION", name="gelu_tanh"),
                mb.gelu(x=x, mode="SIGMOID_APPROXIMATION", name="gelu_sigmoid"), mb.silu(x=x, name="silu"),
                mb.clamped_relu(x=x, alpha=0.1, beta=2.0, name="clamped_relu"), mb.elu(x=x, alpha=0.7, name="elu"),
                mb.leaky_relu(x=x, alpha=0.2, name="leaky_relu"), mb.sigmoid_hard(x=x, alpha=0.3, beta=0.4, name="sigmoid_hard"),
                mb.softplus(x=x, name="softplus"), mb.sigmoid(x=x, name="sigmoid"), mb.relu6(x=x, name="relu6"))
    d = a.astype(np.float64)
    sig = lambda v: 1 / (1 + np.exp(-v))
    return prog, [{"x": a}], [{
        "gelu_exact": 0.5 * d * (1 + erf(d / math.sqrt(2))),
        "gelu_tanh": 0.5 * d * (1 + np.tanh(math.sqrt(2 / math.pi) * (d + 0.044715 * d ** 3))),
        "gelu_sigmoid": d * sig(1.702 * d), "silu": d * sig(d),
        "clamped_relu": np.minimum(2.0, np.where(d >= 0, d, 0.1 * d)), "elu": np.where(d > 0, d, 0.7 * (np.exp(d) - 1)),
        "leaky_relu": np.where(d >= 0, d, 0.2 * d), "sigmoid_hard": np.clip(0.3 * d + 0.4, 0, 1),
        "softplus": np.log1p(np.exp(d)), "sigmoid": sig(d), "relu6": np.clip(d, 0, 6)}]


@case("reductions")
def reductions(rng):
    a = rng.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.reduce_sum(x=x, axes=[0, 2], keep_dims=True, name="sum"), mb.reduce_mean(x=x, axes=[-1], name="mean"),
                mb.reduce_max(x=x, axes=[1], name="max"), mb.reduce_min(x=x, name="min_all"),
                mb.reduce_prod(x=x, axes=[2], name="prod"), mb.reduce_l2_norm(x=x, axes=[0, 1], name="l2"),
                mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True, name="logsumexp"),
                mb.reduce_argmax(x=x, axis=1, name="argmax"), mb.reduce_argmin(x=x, axis=-1, keep_dims=True, name="argmin"),
                mb.softmax(x=x, axis=1, name="softmax"), mb.cumsum(x=x, axis=2, exclusive=True, reverse=True, name="cumsum"))
    d = a.astype(np.float64)
    e = np.exp(d - d.max(axis=1, keepdims=True))
    rev = np.flip(np.cumsum(np.flip(d, 2), 2), 2) - d
    return prog, [{"x": a}], [{"sum": d.sum(axis=(0, 2), keepdims=True), "mean": d.mean(axis=-1), "max": d.max(axis=1),
                                "min_all": d.min(), "prod": d.prod(axis=2), "l2": np.sqrt((d * d).sum(axis=(0, 1))),
                                "logsumexp": np.log(np.exp(d).sum(axis=1, keepdims=True)),
                                "argmax": d.argmax(axis=1).astype(np.int32), "argmin": d.argmin(axis=-1)[..., None].astype(np.int32),
                                "softmax": e / e.sum(axis=1, keepdims=True), "cumsum": rev}]


@case("matmul_and_linear")
def matmul(rng):
    a, b, v = rand(rng, 2, 1, 3, 4), rand(rng, 5, 3, 4), rand(rng, 4)
    w, bias = rand(rng, 6, 4), rand(rng, 6)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=b.shape), mb.TensorSpec(shape=v.shape)],
                opset_version=ct.target.iOS17)
    def prog(x, y, z):
        return (mb.matmul(x=x, y=y, transpose_y=True, name="batched"),
                mb.matmul(x=z, y=mb.reshape(x=y, shape=[15, 4]), transpose_y=True, name="row"), mb.linear(x=x, weight=w, bias=bias, name="linear"))
    A, B, V = a.astype(np.float64), b.astype(np.float64), v.astype(np.float64)
    return prog, [{"x": a, "y": b, "z": v}], [{"batched": A @ np.swapaxes(B, -1, -2),
                                                "row": V @ B.reshape(15, 4).T, "linear": A @ w.astype(np.float64).T + bias}]


@case("normalization")
def normalization(rng):
    a = rand(rng, 2, 3, 4, 5)
    gamma, beta = rand(rng, 4, 5), rand(rng, 4, 5)
    cg, cb, mean, var = rand(rng, 3), rand(rng, 3), rand(rng, 3), rng.uniform(0.5, 2, 3).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.layer_norm(x=x, axes=[-2, -1], gamma=gamma, beta=beta, epsilon=1e-5, name="layer_norm"),
                mb.layer_norm(x=x, axes=[1], name="layer_norm_channels"),
                mb.batch_norm(x=x, mean=mean, variance=var, gamma=cg, beta=cb, epsilon=1e-3, name="batch_norm"),
                mb.instance_norm(x=x, gamma=cg, beta=cb, epsilon=1e-5, name="instance_norm"),
                mb.l2_norm(x=x, epsilon=1e-6, name="l2_norm"),
                mb.local_response_norm(x=x, size=3, alpha=1e-2, beta=0.75, k=1.0, name="lrn"))
    d = a.astype(np.float64)

    def norm(v, axes, eps):
        m = v.mean(axis=axes, keepdims=True)
        return (v - m) / np.sqrt(((v - m) ** 2).mean(axis=axes, keepdims=True) + eps)
    ch = lambda p: p.astype(np.float64).reshape(1, 3, 1, 1)
    sq = np.pad(d * d, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window = sq[:, 0:3] + sq[:, 1:4] + sq[:, 2:5]
    flat = d.reshape(2, -1)
    return prog, [{"x": a}], [{
        "layer_norm": norm(d, (2, 3), 1e-5) * gamma + beta, "layer_norm_channels": norm(d, (1,), 1e-5),
        "batch_norm": (d - ch(mean)) / np.sqrt(ch(var) + 1e-3) * ch(cg) + ch(cb),
        "instance_norm": norm(d, (2, 3), 1e-5) * ch(cg) + ch(cb),
        "l2_norm": (flat / np.sqrt((flat * flat).sum(axis=1, keepdims=True) + 1e-6)).reshape(d.shape),
        "lrn": d / (1.0 + 1e-2 / 3 * window) ** 0.75}]


@case("gathers")
def gathers(rng):
    a = rand(rng, 3, 5, 2)
    idx = np.array([[4, -1, 0], [2, 2, -5]], dtype=np.int32)
    along = rng.integers(0, 5, (3, 2, 2)).astype(np.int32)
    nd = np.array([[0, 4], [2, 1]], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=idx.shape, dtype=types.int32),
                             mb.TensorSpec(shape=along.shape, dtype=types.int32), mb.TensorSpec(shape=nd.shape, dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, i, j, k):
        return (mb.gather(x=x, indices=i, axis=1, name="gather"),
                mb.gather_along_axis(x=x, indices=j, axis=1, name="gather_along_axis"),
                mb.gather_nd(x=x, indices=k, name="gather_nd"),
                mb.gather(x=mb.reshape(x=x, shape=[3, 10]), indices=mb.slice_by_size(x=i, begin=[0, 0], size=[1, 3]),
                          axis=1, batch_dims=0, name="gather_flat"),
                mb.cast(x=mb.one_hot(indices=i, one_hot_vector_size=5, axis=-1), dtype="int32", name="one_hot"))
    d = a.astype(np.float64)
    wrapped = np.where(idx < 0, idx + 5, idx)
    return prog, [{"x": a, "i": idx, "j": along, "k": nd}], [{
        "gather": np.take(d, wrapped, axis=1), "gather_along_axis": np.take_along_axis(d, along, axis=1),
        "gather_nd": d[nd[:, 0], nd[:, 1]], "gather_flat": np.take(d.reshape(3, 10), np.where(idx[:1] < 0, idx[:1] + 10, idx[:1]), axis=1),
        "one_hot": np.eye(5, dtype=np.int32)[wrapped]}]


@case("scatters")
def scatters(rng):
    a, u = rand(rng, 4, 3), rand(rng, 2, 3)
    idx = np.array([3, 1], dtype=np.int32)
    along = np.array([[0, 2, 1], [3, 0, 0]], dtype=np.int32)
    nd = np.array([[1, 2], [3, 0]], dtype=np.int32)
    nu = rand(rng, 2)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=u.shape)], opset_version=ct.target.iOS17)
    def prog(x, y):
        return (mb.scatter(data=x, indices=idx, updates=y, axis=0, mode="add", name="scatter_add"),
                mb.scatter(data=x, indices=idx, updates=y, axis=0, mode="update", name="scatter_update"),
                mb.scatter_along_axis(data=x, indices=along, updates=y, axis=0, mode="mul", name="scatter_along_axis"),
                mb.scatter_nd(data=x, indices=nd, updates=nu, mode="sub", name="scatter_nd"))
    d, v = a.astype(np.float64), u.astype(np.float64)
    add = d.copy(); add[idx] += v
    upd = d.copy(); upd[idx] = v
    mul = d.copy()
    for r in range(2):
        for c in range(3):
            mul[along[r, c], c] *= v[r, c]
    sub = d.copy()
    for n, (r, c) in enumerate(nd):
        sub[r, c] -= nu[n]
    return prog, [{"x": a, "y": u}], [{"scatter_add": add, "scatter_update": upd, "scatter_along_axis": mul, "scatter_nd": sub}]


@case("shapes")
def shapes(rng):
    a = rand(rng, 2, 3, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.reshape(x=x, shape=[0, -1], name="reshape"), mb.transpose(x=x, perm=[-1, 0, -2], name="transpose"),
                mb.expand_dims(x=x, axes=[1, -1], name="expand_dims"), mb.squeeze(x=mb.expand_dims(x=x, axes=[0]), name="squeeze"),
                mb.slice_by_index(x=x, begin=[1, 0, 3], end=[2, 3, 0], stride=[1, 2, -2], begin_mask=[False, False, False],
                                  end_mask=[False, True, True], squeeze_mask=[True, False, False], name="slice_by_index"),
                mb.slice_by_size(x=x, begin=[0, 1, 1], size=[-1, 2, 2], name="slice_by_size"),
                mb.concat(values=(x, mb.mul(x=x, y=2.0)), axis=1, interleave=True, name="concat_interleave"),
                mb.concat(values=(x, x), axis=-1, name="concat"),
                mb.stack(values=(x, x), axis=1, name="stack"), mb.tile(x=x, reps=[1, 2, 1], name="tile"),
                mb.pad(x=x, pad=[1, 2, 0, 1], mode="reflect", name="pad_reflect"),
                mb.pad(x=x, pad=[2, 1], mode="replicate", name="pad_replicate"),
                mb.pad(x=x, pad=[1, 0, 0, 0, 1, 1], mode="constant", constant_val=0.5, name="pad_constant"),
                mb.cast(x=mb.shape(x=x), dtype="int32", name="shape"),
                mb.band_part(x=x, lower=1, upper=0, name="band_part"),
                mb.reverse(x=x, axes=[0, 2], name="reverse"),
                mb.fill(shape=mb.shape(x=x), value=3.0, name="fill"),
                mb.range_1d(start=0, end=mb.gather(x=mb.shape(x=x), indices=2), step=1, name="range"))
    d = a.astype(np.float64)
    inter = np.stack([d, 2 * d], axis=2).reshape(2, 6, 4)
    return prog, [{"x": a}], [{
        "reshape": d.reshape(2, 12), "transpose": np.transpose(d, (2, 0, 1)), "expand_dims": d.reshape(2, 1, 3, 4, 1),
        "squeeze": d, "slice_by_index": d[1, 0::2, 3::-2], "slice_by_size": d[:, 1:3, 1:3],
        "concat_interleave": inter, "concat": np.concatenate([d, d], axis=-1), "stack": np.stack([d, d], axis=1),
        "tile": np.tile(d, (1, 2, 1)), "pad_reflect": np.pad(d, ((0, 0), (1, 2), (0, 1)), mode="reflect"),
        "pad_replicate": np.pad(d, ((0, 0), (0, 0), (2, 1)), mode="edge"),
        "pad_constant": np.pad(d, ((1, 0), (0, 0), (1, 1)), constant_values=0.5), "shape": np.array([2, 3, 4], dtype=np.int32),
        "band_part": d * np.tril(np.triu(np.ones((3, 4)), -1), 0), "reverse": d[::-1, :, ::-1],
        "fill": np.full(d.shape, 3.0), "range": np.arange(4, dtype=np.int32)}]


@case("split_topk_argsort")
def split_topk(rng):
    a = rand(rng, 2, 6)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        s1, s2 = mb.split(x=x, split_sizes=[2, 4], axis=1, name="split")
        values, indices = mb.topk(x=x, k=3, axis=-1, name="topk")
        return (mb.identity(x=s1, name="split_0"), mb.identity(x=s2, name="split_1"), mb.identity(x=values, name="topk_values"),
                mb.identity(x=indices, name="topk_indices"), mb.argsort(x=x, axis=1, ascending=True, name="argsort"))
    d = a.astype(np.float64)
    order = np.argsort(-d, axis=-1, kind="stable")[:, :3]
    return prog, [{"x": a}], [{"split_0": d[:, :2], "split_1": d[:, 2:], "topk_values": np.take_along_axis(d, order, -1),
                                "topk_indices": order.astype(np.int32), "argsort": np.argsort(d, axis=1, kind="stable").astype(np.int32)}]


@case("attention", target=ct.target.iOS18)
def attention(rng):
    q, k, v = rand(rng, 2, 3, 4, 8), rand(rng, 2, 3, 5, 8), rand(rng, 2, 3, 5, 6)
    mask = np.tril(np.ones((4, 5), dtype=bool), 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=q.shape), mb.TensorSpec(shape=k.shape), mb.TensorSpec(shape=v.shape)],
                opset_version=ct.target.iOS18)
    def prog(query, key, value):
        return (mb.scaled_dot_product_attention(query=query, key=key, value=value, name="plain"),
                mb.scaled_dot_product_attention(query=query, key=key, value=value, attn_mask=mask, name="masked"))
    Q, K, V = (t.astype(np.float64) for t in (q, k, v))

    def sdpa(m):
        s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(8)
        if m is not None:
            s = np.where(m, s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ V
    return prog, [{"query": q, "key": k, "value": v}], [{"plain": sdpa(None), "masked": sdpa(mask)}]


@case("convolution_and_pooling", tolerance=1e-4)
def convolution(rng):
    a = rand(rng, 1, 4, 7, 6)
    w = rand(rng, 6, 2, 3, 3)
    b = rand(rng, 6)
    w1 = rand(rng, 3, 4, 2)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.conv(x=x, weight=w, bias=b, strides=[2, 1], pad_type="same", dilations=[1, 2], groups=2, name="conv"),
                mb.conv(x=mb.reshape(x=x, shape=[1, 4, 42]), weight=w1, pad_type="custom", pad=[1, 0], strides=[3], name="conv1d"),
                mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", ceil_mode=True, name="max_pool_ceil"),
                mb.avg_pool(x=x, kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom", pad=[1, 1, 1, 1],
                            exclude_padding_from_average=True, name="avg_pool"))
    d = a.astype(np.float64)

    def conv2d(x, w, b, stride, pads, dil, groups):
        x = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh = (h - (kh - 1) * dil[0] - 1) // stride[0] + 1
        ow = (wd - (kw - 1) * dil[1] - 1) // stride[1] + 1
        out = np.zeros((n, o, oh, ow))
        og = o // groups
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    patch = x[0, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + (kh - 1) * dil[0] + 1:dil[0],
                              j * stride[1]:j * stride[1] + (kw - 1) * dil[1] + 1:dil[1]]
                    out[0, oc, i, j] = (patch * w[oc]).sum() + (b[oc] if b is not None else 0)
        return out
    # same padding: out = ceil(in / stride); total = (out - 1) * stride + effective kernel - in, the extra after.
    conv = conv2d(d, w.astype(np.float64), b.astype(np.float64), (2, 1), [(1, 1), (2, 2)], (1, 2), 2)
    x1 = d.reshape(1, 4, 42)
    conv1 = conv2d(x1[:, :, None, :], w1.astype(np.float64)[:, :, None, :], None, (1, 3), [(0, 0), (1, 0)], (1, 1), 1)[:, :, 0, :]
    mp = np.full((1, 4, 4, 3), -np.inf)
    for i in range(4):
        for j in range(3):
            mp[0, :, i, j] = d[0, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max(axis=(1, 2))
    ap = np.zeros((1, 4, 4, 3))
    for i in range(4):
        for j in range(3):
            r0, r1, c0, c1 = max(2 * i - 1, 0), min(2 * i + 2, 7), max(2 * j - 1, 0), min(2 * j + 2, 6)
            ap[0, :, i, j] = d[0, :, r0:r1, c0:c1].mean(axis=(1, 2))
    return prog, [{"x": a}], [{"conv": conv, "conv1d": conv1, "max_pool_ceil": mp, "avg_pool": ap}]


@case("flexible_sequence")
def flexible(rng):
    """A [batch 1…4, sequence 1…16, 8] input: a layer norm, a projection and a softmax over the sequence."""
    from coremltools.converters.mil.mil import get_new_symbol
    w, b = rand(rng, 8, 8), rand(rng, 8)

    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(), get_new_symbol(), 8))], opset_version=ct.target.iOS17)
    def prog(x):
        h = mb.linear(x=mb.layer_norm(x=x, axes=[-1], epsilon=1e-5), weight=w, bias=b)
        return mb.softmax(x=h, axis=1, name="y")
    prog.flexible_inputs = [ct.TensorType(name="x", shape=(ct.RangeDim(1, 4, default=1), ct.RangeDim(1, 16, default=3), 8))]
    inputs = [rand(rng, 1, 3, 8), rand(rng, 4, 16, 8), rand(rng, 2, 5, 8)]
    outputs = []
    for x in inputs:
        d = x.astype(np.float64)
        n = (d - d.mean(-1, keepdims=True)) / np.sqrt(d.var(-1, keepdims=True) + 1e-5)
        h = n @ w.astype(np.float64).T + b
        e = np.exp(h - h.max(1, keepdims=True))
        outputs.append({"y": e / e.sum(1, keepdims=True)})
    return prog, [{"x": x} for x in inputs], outputs


@case("transposed_convolution_and_resizing", tolerance=1e-4)
def transposed(rng):
    a = rand(rng, 1, 4, 3, 5)
    w = rand(rng, 4, 3, 3, 2)  # [in, out / groups, kH, kW], groups 2 -> 6 outputs
    b = rand(rng, 6)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.conv_transpose(x=x, weight=w, bias=b, strides=[2, 3], pad_type="custom", pad=[1, 0, 0, 1], groups=2,
                                  name="conv_transpose"),
                mb.resize_bilinear(x=x, target_size_height=5, target_size_width=4, sampling_mode="ALIGN_CORNERS", name="align"),
                mb.resize_bilinear(x=x, target_size_height=6, target_size_width=7, sampling_mode="UNALIGN_CORNERS", name="unalign"),
                mb.resize_nearest_neighbor(x=x, target_size_height=6, target_size_width=10, name="nearest"),
                mb.upsample_bilinear(x=x, scale_factor_height=2, scale_factor_width=2, align_corners=False, name="upsample"))
    d = a.astype(np.float64)
    W = w.astype(np.float64)
    full = np.zeros((1, 6, (3 - 1) * 2 + 3, (5 - 1) * 3 + 2))
    for g in range(2):
        for ci in range(2):
            c = g * 2 + ci
            for co in range(3):
                for i in range(3):
                    for j in range(5):
                        full[0, g * 3 + co, 2 * i:2 * i + 3, 3 * j:3 * j + 2] += d[0, c, i, j] * W[c, co]
    convt = full[:, :, 1:, :-1] + b.astype(np.float64).reshape(1, 6, 1, 1)

    def bilinear(x, ys, xs):
        out = np.zeros(x.shape[:2] + (len(ys), len(xs)))
        for a_, y in enumerate(ys):
            y0 = int(np.floor(y)); y1 = min(y0 + 1, x.shape[2] - 1); fy = y - y0
            for b_, z in enumerate(xs):
                x0 = int(np.floor(z)); x1 = min(x0 + 1, x.shape[3] - 1); fx = z - x0
                top = x[:, :, y0, x0] * (1 - fx) + x[:, :, y0, x1] * fx
                bottom = x[:, :, y1, x0] * (1 - fx) + x[:, :, y1, x1] * fx
                out[:, :, a_, b_] = top * (1 - fy) + bottom * fy
        return out
    align = bilinear(d, [i * 2 / 4 for i in range(5)], [i * 4 / 3 for i in range(4)])
    unalign = bilinear(d, [min(2, max(0, i * 0.5 + 0.25 - 0.5)) for i in range(6)], [min(4, max(0, i * 5 / 7 + 2.5 / 7 - 0.5)) for i in range(7)])
    nearest = d[:, :, [i * 3 // 6 for i in range(6)]][:, :, :, [j * 5 // 10 for j in range(10)]]
    up = bilinear(d, [min(2, max(0, (i + 0.5) / 2 - 0.5)) for i in range(6)], [min(4, max(0, (j + 0.5) / 2 - 0.5)) for j in range(10)])
    return prog, [{"x": a}], [{"conv_transpose": convt, "align": align, "unalign": unalign, "nearest": nearest, "upsample": up}]


def resize_positions(mode, n_in, n_out):
    """Where resize_bilinear's sampling modes read an axis (the iOS15 definition), clamped to it."""
    out = []
    for i in range(n_out):
        if mode in ("ALIGN_CORNERS", "STRICT_ALIGN_CORNERS"):
            p = ((n_in - 1) / 2 if mode == "ALIGN_CORNERS" else 0) if n_out == 1 else i * (n_in - 1) / (n_out - 1)
        elif mode == "DEFAULT":
            p = 0 if n_out == 1 else i * (n_in - n_in / n_out) / (n_out - 1)
        elif mode == "OFFSET_CORNERS":
            delta = max(1, n_in - 1) / n_out
            p = 0.5 * delta + i * delta
        else:
            p = (i + 0.5) * n_in / n_out - 0.5
        out.append(min(n_in - 1, max(0, p)))
    return out


def interpolate_axis(x, axis, positions, nearest):
    """x resampled along `axis` at `positions`, linearly or at the nearest (half away from zero) position."""
    x = np.moveaxis(x, axis, -1)
    if nearest:
        y = x[..., [int(math.floor(p + 0.5)) for p in positions]]
    else:
        low = [int(math.floor(p)) for p in positions]
        high = [min(l + 1, x.shape[-1] - 1) for l in low]
        f = np.array([p - l for p, l in zip(positions, low)])
        y = x[..., low] * (1 - f) + x[..., high] * f
    return np.moveaxis(y, -1, axis)


@case("resize_ios17", tolerance=1e-4)
def resize_ios17(rng):
    """iOS 17 resize: one or two resized axes, both interpolations, a target shape given at prediction."""
    a = rand(rng, 1, 2, 3, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=(3,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, s):
        return (mb.resize(x=x, shape=[1, 5], resized_dims=np.uint32(1), interpolation_mode="LINEAR", sampling_mode="DEFAULT",
                          name="linear_1d"),
                mb.resize(x=x, shape=[5, 7], resized_dims=np.uint32(2), interpolation_mode="LINEAR", sampling_mode="ALIGN_CORNERS",
                          name="align"),
                mb.resize(x=x, shape=[0, 6], resized_dims=np.uint32(2), interpolation_mode="LINEAR", sampling_mode="UNALIGN_CORNERS",
                          name="keep_height"),
                mb.resize(x=x, shape=s, resized_dims=np.uint32(2), interpolation_mode="NEAREST_NEIGHBOR", sampling_mode="DEFAULT",
                          name="nearest"))
    d = a.astype(np.float64)

    def resized(x, sizes, mode, nearest):
        for axis, n in zip(range(x.ndim - len(sizes), x.ndim), sizes):
            if n:
                x = interpolate_axis(x, axis, resize_positions(mode, x.shape[axis], n), nearest)
        return x
    cases, outputs = [], []
    for target in ([1, 6, 2], [2, 2, 9]):
        cases.append({"x": a, "s": np.array(target, dtype=np.int32)})
        outputs.append({"linear_1d": resized(d, [5], "DEFAULT", False), "align": resized(d, [5, 7], "ALIGN_CORNERS", False),
                        "keep_height": resized(d, [0, 6], "UNALIGN_CORNERS", False),
                        "nearest": resized(d, target[1:], "DEFAULT", True)})
    return prog, cases, outputs


@case("rearrangements", target=ct.target.iOS18)
def rearrangements(rng):
    a = rand(rng, 2, 8, 4, 6)
    seq = rand(rng, 3, 5, 2)
    lengths = np.array([2, 5, 0], dtype=np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=seq.shape),
                             mb.TensorSpec(shape=lengths.shape, dtype=types.int32)], opset_version=ct.target.iOS18)
    def prog(x, s, n):
        return (mb.depth_to_space(x=x, block_size=2, name="depth_to_space"), mb.space_to_depth(x=x, block_size=2, name="space_to_depth"),
                mb.pixel_shuffle(x=x, upscale_factor=2, name="pixel_shuffle"), mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(2), name="pixel_unshuffle"),
                mb.space_to_batch(x=x, block_shape=[2, 3], paddings=[[0, 2], [1, 2]], name="space_to_batch"),
                mb.batch_to_space(x=x, block_shape=[1, 2], crops=[[1, 0], [0, 1]], name="batch_to_space"),
                mb.sliding_windows(x=s, axis=1, size=3, stride=2, name="sliding_windows"),
                mb.slice_update(x=x, update=mb.mul(x=mb.slice_by_index(x=x, begin=[0, 1, 0, 1], end=[2, 8, 4, 6], stride=[1, 3, 2, 2]), y=-1.0),
                                begin=[0, 1, 0, 1], end=[2, 8, 4, 6], stride=[1, 3, 2, 2], name="slice_update"),
                mb.reverse_sequence(x=s, lengths=n, seq_axis=1, batch_axis=0, name="reverse_sequence"),
                mb.crop(x=x, crop_height=[1, 0], crop_width=[2, 1], name="crop"),
                mb.dequantize(input=mb.quantize(input=x, scale=np.float32(0.05), zero_point=np.int8(3), output_dtype="int8"),
                              scale=np.float32(0.05), zero_point=np.int8(3), name="quantized"))
    d, q = a.astype(np.float64), seq.astype(np.float64)
    n_, c, h, w = d.shape

    def d2s(x, b, dcr):
        n, c, h, w = x.shape
        if dcr:
            y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return y.reshape(n, c // (b * b), h * b, w * b)

    def s2d(x, b, dcr):
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b)
        y = y.transpose(0, 3, 5, 1, 2, 4) if dcr else y.transpose(0, 1, 3, 5, 2, 4)
        return y.reshape(n, c * b * b, h // b, w // b)
    padded = np.pad(d, ((0, 0), (0, 0), (0, 2), (1, 2)))
    ph, pw = padded.shape[2] // 2, padded.shape[3] // 3
    s2b = padded.reshape(n_, c, ph, 2, pw, 3).transpose(3, 5, 0, 1, 2, 4).reshape(6 * n_, c, ph, pw)
    b2s = d.reshape(1, 2, 1, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(1, c, h, 2 * w)[:, :, 1:, :-1]
    windows = np.stack([q[:, i * 2:i * 2 + 3] for i in range(2)], axis=1)
    updated = d.copy(); updated[:, 1::3, 0::2, 1::2] *= -1
    rev = q.copy()
    for b_, length in enumerate(lengths):
        rev[b_, :length] = q[b_, :length][::-1]
    quant = (np.clip(np.round(d / 0.05) + 3, -128, 127) - 3) * 0.05
    return prog, [{"x": a, "s": seq, "n": lengths}], [{
        "depth_to_space": d2s(d, 2, True), "space_to_depth": s2d(d, 2, True), "pixel_shuffle": d2s(d, 2, False),
        "pixel_unshuffle": s2d(d, 2, False), "space_to_batch": s2b, "batch_to_space": b2s, "sliding_windows": windows,
        "slice_update": updated, "reverse_sequence": rev, "crop": d[:, :, 1:, 2:-1], "quantized": quant}]


@case("joint_compression", target=ct.target.iOS18)
def joint_compression(rng):
    """Weights pruned then palettized, and pruned then quantized (ct.optimize.coreml, joint
    compression): constexpr_lut_to_sparse and constexpr_sparse_blockwise_shift_scale feeding
    constexpr_sparse_to_dense. The reference decompresses with the operations' definitions
    (their `decompress` static methods in coremltools' iOS18 compression.py)."""
    import coremltools.optimize.coreml as cto
    from coremltools.converters.mil.mil.ops.defs.iOS18 import compression as defs
    w1, w2 = rand(rng, 16, 32), rand(rng, 8, 32)
    a = rand(rng, 2, 32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS18)
    def prog(x):
        return mb.linear(x=x, weight=w1, name="palettized"), mb.linear(x=x, weight=w2, name="quantized")
    model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True, minimum_deployment_target=ct.target.iOS18,
                       compute_precision=ct.precision.FLOAT32)
    model = cto.prune_weights(model, cto.OptimizationConfig(global_config=cto.OpMagnitudePrunerConfig(target_sparsity=0.5, weight_threshold=0)))
    palettize = cto.OptimizationConfig(op_name_configs={"palettized": cto.OpPalettizerConfig(nbits=2, mode="uniform", weight_threshold=0)})
    model = cto.palettize_weights(model, palettize, joint_compression=True)
    quantize = cto.OptimizationConfig(op_name_configs={"quantized": cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8", weight_threshold=0)})
    model = cto.linear_quantize_weights(model, quantize, joint_compression=True)
    # The weights as the program stores them, decompressed by the operation definitions.
    from coremltools.converters.mil.frontend.milproto import load as milproto
    spec = model.get_spec()
    block = milproto.load(spec, spec.specificationVersion, model.weights_dir).functions["main"]
    values = {}

    def value(var):
        return values[var.name] if var.name in values else var.val
    for op in block.operations:
        if op.op_type == "constexpr_lut_to_sparse":
            result = defs.constexpr_lut_to_sparse.decompress(value(op.indices_mask), value(op.indices_nonzero_data), value(op.lut), None)
        elif op.op_type == "constexpr_sparse_blockwise_shift_scale":
            result = defs.constexpr_sparse_blockwise_shift_scale.decompress(
                value(op.data_mask), value(op.nonzero_data), value(op.scale), value(op.offset) if op.offset is not None else None)
        elif op.op_type == "constexpr_sparse_to_dense":
            result = (defs.constexpr_sparse_to_dense.decompress(value(op.nonzero_data), value(op.mask)),)
        else:
            continue
        for output, val in zip(op.outputs, result):
            values[output.name] = val
    weights = {}
    for op in block.operations:
        if op.op_type == "linear":
            weights[op.outputs[0].name] = value(op.weight).astype(np.float64)
    kinds = sorted({op.op_type for op in block.operations if op.op_type.startswith("constexpr")})
    assert "constexpr_lut_to_sparse" in kinds and "constexpr_sparse_blockwise_shift_scale" in kinds, kinds
    d = a.astype(np.float64)
    return model, [{"x": a}], [{name: d @ w.T for name, w in weights.items()}]


@case("flexible_batch_conv_fp16", tolerance=5e-3)
def flexible_batch_conv(rng):
    """An fp16 program taking frames [1…16, 8] through a 1-D convolution over channels, as
    published models with a flexible batch do: run with batch 1, 8 and 16."""
    from coremltools.converters.mil.mil import get_new_symbol
    w, b = rand(rng, 4, 8, 1), rand(rng, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(), 8))], opset_version=ct.target.iOS17)
    def prog(x):
        h = mb.conv(x=mb.expand_dims(x=x, axes=[-1]), weight=w, bias=b)
        return mb.squeeze(x=mb.relu(x=h), axes=[-1], name="y")
    prog.flexible_inputs = [ct.TensorType(name="x", shape=(ct.RangeDim(1, 16, default=1), 8), dtype=np.float16)]
    prog.compute_precision = ct.precision.FLOAT16
    inputs = [rand(rng, n, 8) for n in (1, 8, 16)]
    return prog, [{"x": x} for x in inputs], [{"y": np.maximum(x.astype(np.float64) @ w[:, :, 0].astype(np.float64).T + b, 0)}
                                              for x in inputs]


@case("control_flow")
def control_flow(rng):
    a = rand(rng, 2, 3)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=(1,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, n):
        limit = mb.squeeze(x=n)
        branch = mb.cond(pred=mb.greater(x=mb.reduce_sum(x=x), y=0.0),
                         _true_fn=lambda: mb.add(x=x, y=1.0), _false_fn=lambda: mb.mul(x=x, y=2.0), name="cond")

        def keep_going(i, total):
            return mb.less(x=i, y=limit)

        def step(i, total):
            return mb.add(x=i, y=1), mb.add(x=mb.mul(x=total, y=1.5), y=mb.cast(x=i, dtype="fp32"))
        count, total = mb.while_loop(_cond=keep_going, _body=step, loop_vars=(np.int32(0), x))
        return mb.identity(x=branch, name="branch"), mb.identity(x=count, name="count"), mb.identity(x=total, name="total")
    cases, outputs = [], []
    for x, n in [(a, 3), (-np.abs(a), 0), (a * 0.5, 5)]:
        d = x.astype(np.float64)
        total = d.copy()
        for i in range(n):
            total = total * 1.5 + i
        cases.append({"x": x, "n": np.array([n], dtype=np.int32)})
        outputs.append({"branch": d + 1 if d.sum() > 0 else d * 2, "count": np.int32(n), "total": total})
    return prog, cases, outputs


@case("recurrent")
def recurrent(rng, dtype=np.float32):
    """rnn, gru (reverse), lstm (peephole, clip) and bidirectional lstm. With dtype float16 the
    data, states and weights are fp16 in a program converted at fp32 precision (as coremltools'
    iOS17 recurrent tests build them): the reference is computed from the stored fp16 values."""
    S, B, I, H = 5, 2, 3, 4
    x, h0, c0, h2, c2 = rand(rng, S, B, I), rand(rng, B, H), rand(rng, B, H), rand(rng, B, 2 * H), rand(rng, B, 2 * H)
    rw_ih, rw_hh, rb = rand(rng, H, I), rand(rng, H, H), rand(rng, H)
    gw_ih, gw_hh, gb = rand(rng, 3 * H, I), rand(rng, 3 * H, H), rand(rng, 3 * H)
    lw_ih, lw_hh, lb, lp = rand(rng, 4 * H, I), rand(rng, 4 * H, H), rand(rng, 4 * H), rand(rng, 3 * H)
    bw_ih, bw_hh, bb = rand(rng, 4 * H, I), rand(rng, 4 * H, H), rand(rng, 4 * H)
    x, h0, c0, h2, c2, rw_ih, rw_hh, rb, gw_ih, gw_hh, gb, lw_ih, lw_hh, lb, lp, bw_ih, bw_hh, bb = (
        v.astype(dtype) for v in (x, h0, c0, h2, c2, rw_ih, rw_hh, rb, gw_ih, gw_hh, gb, lw_ih, lw_hh, lb, lp, bw_ih, bw_hh, bb))
    mil_type = types.numpy_type_to_builtin_type(dtype)
    clip = dtype(0.8)

    @mb.program(input_specs=[mb.TensorSpec(shape=v.shape, dtype=mil_type) for v in (x, h0, c0, h2, c2)], opset_version=ct.target.iOS17)
    def prog(x, h, c, hb, cb):
        rnn_y, rnn_h = mb.rnn(x=x, initial_h=h, weight_ih=rw_ih, weight_hh=rw_hh, bias=rb, output_sequence=True, activation="tanh")
        gru_y, gru_h = mb.gru(x=x, initial_h=h, weight_ih=gw_ih, weight_hh=gw_hh, bias=gb, direction="reverse", output_sequence=True)
        lstm_y, lstm_h, lstm_c = mb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=lw_ih, weight_hh=lw_hh, bias=lb, peephole=lp,
                                         output_sequence=False, clip=clip)
        bi_y, bi_h, bi_c = mb.lstm(x=x, initial_h=hb, initial_c=cb, weight_ih=lw_ih, weight_hh=lw_hh, bias=lb,
                                   weight_ih_back=bw_ih, weight_hh_back=bw_hh, bias_back=bb, direction="bidirectional",
                                   output_sequence=True)
        return tuple(mb.identity(x=v, name=n) for v, n in [
            (rnn_y, "rnn_y"), (rnn_h, "rnn_h"), (gru_y, "gru_y"), (gru_h, "gru_h"), (lstm_y, "lstm_y"), (lstm_h, "lstm_h"),
            (lstm_c, "lstm_c"), (bi_y, "bi_y"), (bi_h, "bi_h"), (bi_c, "bi_c")])
    X = x.astype(np.float64)
    sig = lambda v: 1 / (1 + np.exp(-v))
    f64 = lambda v: v.astype(np.float64)

    def run_rnn(h):
        ys = []
        for t in range(S):
            h = np.tanh(X[t] @ f64(rw_ih).T + h @ f64(rw_hh).T + rb)
            ys.append(h)
        return np.stack(ys), h

    def run_gru(h):
        Wr, Wo, Wz = np.split(f64(gw_ih), 3)
        Rr, Ro, Rz = np.split(f64(gw_hh), 3)
        br, bo, bz = np.split(f64(gb), 3)
        ys = []
        for t in reversed(range(S)):
            z = sig(X[t] @ Wz.T + h @ Rz.T + bz)
            r = sig(X[t] @ Wr.T + h @ Rr.T + br)
            o = np.tanh(X[t] @ Wo.T + (r * h) @ Ro.T + bo)
            h = (1 - z) * o + z * h
            ys.append(h)
        return np.stack(ys), h

    def run_lstm(h, c, w_ih, w_hh, b, p, order, clip=None):
        Wi, Wf, Wo, Wg = np.split(f64(w_ih), 4)
        Ri, Rf, Ro, Rg = np.split(f64(w_hh), 4)
        bi, bf, bo, bg = np.split(f64(b), 4)
        pi, pf, po = np.split(f64(p), 3)
        ys = {}
        for t in order:
            i = sig(X[t] @ Wi.T + h @ Ri.T + bi + c * pi)
            f = sig(X[t] @ Wf.T + h @ Rf.T + bf + c * pf)
            g = np.tanh(X[t] @ Wg.T + h @ Rg.T + bg)
            c = f * c + i * g
            if clip is not None:
                c = np.clip(c, -clip, clip)
            o = sig(X[t] @ Wo.T + h @ Ro.T + bo + c * po)
            h = o * np.tanh(c)
            ys[t] = h
        return ys, h, c
    ry, rh = run_rnn(f64(h0))
    gy, gh = run_gru(f64(h0))
    _, lh, lc = run_lstm(f64(h0), f64(c0), lw_ih, lw_hh, lb, lp, range(S), clip=np.float64(clip))
    zero = np.zeros(3 * H)
    fy, fh, fc = run_lstm(f64(h2)[:, :H], f64(c2)[:, :H], lw_ih, lw_hh, lb, zero, range(S))
    by, bh, bc = run_lstm(f64(h2)[:, H:], f64(c2)[:, H:], bw_ih, bw_hh, bb, zero, reversed(range(S)))
    bi_y = np.stack([np.concatenate([fy[t], by[t]], axis=-1) for t in range(S)])
    return prog, [{"x": x, "h": h0, "c": c0, "hb": h2, "cb": c2}], [{
        "rnn_y": ry, "rnn_h": rh, "gru_y": gy, "gru_h": gh, "lstm_y": lh[None], "lstm_h": lh, "lstm_c": lc,
        "bi_y": bi_y, "bi_h": np.concatenate([fh, bh], -1), "bi_c": np.concatenate([fc, bc], -1)}]


@case("seeded_random")
def seeded_random(rng):
    """Seeded random sampling with degenerate distributions (the same values whatever the
    generator): stddev 0, low = high, probabilities 0 and 1, one certain class."""
    a = rand(rng, 2, 3)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS17)
    def prog(x):
        return (mb.add(x=x, y=mb.random_normal(shape=[2, 3], mean=0.5, stddev=0.0, seed=7), name="normal"),
                mb.random_uniform(shape=[4], low=2.0, high=2.0, seed=3, name="uniform"),
                mb.random_bernoulli(shape=[3, 2], prob=1.0, seed=5, name="bernoulli"),
                mb.random_categorical(x=np.array([[-1e4, 0.0, -1e4]], dtype=np.float32), mode="logits", size=5, seed=9,
                                      name="categorical"))
    d = a.astype(np.float64)
    return prog, [{"x": a}], [{"normal": d + 0.5, "uniform": np.full(4, 2.0), "bernoulli": np.ones((3, 2)),
                                "categorical": np.ones((1, 5))}]


@case("unseeded_certain_random")
def unseeded_certain_random(rng):
    """Random sampling without a seed whose distribution has one value (every seed gives it), one with
    a shape given at prediction (coremltools' test_random stress cases)."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(s):
        return (mb.random_normal(shape=[2, 3], mean=0.5, stddev=0.0, name="normal"),
                mb.random_uniform(shape=[4], low=2.0, high=2.0, name="uniform"),
                mb.random_bernoulli(shape=s, prob=0.0, name="bernoulli"),
                mb.random_bernoulli(shape=[2], prob=1.0, name="certain"))
    return prog, [{"s": np.array([3, 2], dtype=np.int32)}, {"s": np.array([1, 4], dtype=np.int32)}], \
        [{"normal": np.full((2, 3), 0.5), "uniform": np.full(4, 2.0), "bernoulli": np.zeros((3, 2)), "certain": np.ones(2)},
         {"normal": np.full((2, 3), 0.5), "uniform": np.full(4, 2.0), "bernoulli": np.zeros((1, 4)), "certain": np.ones(2)}]


@case("scatter_unvalidated_indices")
def scatter_unvalidated_indices(rng):
    """iOS 17 scatters without validate_indices: an index outside [0, size) (negative ones included, which
    iOS 17 counts as out of bounds) leaves the data as it is; the others apply."""
    a, u = rand(rng, 3, 4), rand(rng, 3, 4)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=u.shape), mb.TensorSpec(shape=(3,), dtype=types.int32),
                             mb.TensorSpec(shape=(2, 1), dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x, u, i, j):
        return (mb.scatter(data=x, indices=i, updates=u, mode="add", validate_indices=False, name="rows"),
                mb.scatter_nd(data=x, indices=j, updates=mb.slice_by_size(x=u, begin=[0, 0], size=[2, 4]), mode="update",
                              validate_indices=False, name="nd"))
    d, v = a.astype(np.float64), u.astype(np.float64)
    cases, outputs = [], []
    for i, j in (([-1, 5, 2], [[1], [-2]]), ([0, 1, 2], [[7], [0]])):
        rows = d.copy()
        for k, index in enumerate(i):
            if 0 <= index < 3:
                rows[index] += v[k]
        nd = d.copy()
        for k, (index,) in enumerate(j):
            if 0 <= index < 3:
                nd[index] = v[k]
        cases.append({"x": a, "u": u, "i": np.array(i, dtype=np.int32), "j": np.array(j, dtype=np.int32)})
        outputs.append({"rows": rows, "nd": nd})
    return prog, cases, outputs


@case("runtime_slice")
def runtime_slice(rng):
    """slice_by_size with a begin given at prediction (negative counts from the end)."""
    a = rand(rng, 4, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=(2,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, b):
        return mb.slice_by_size(x=x, begin=b, size=[2, 3], name="y")
    d = a.astype(np.float64)
    return prog, [{"x": a, "b": np.array([1, 2], dtype=np.int32)}, {"x": a, "b": np.array([-2, 0], dtype=np.int32)}], \
        [{"y": d[1:3, 2:5]}, {"y": d[2:4, 0:3]}]


@case("runtime_slice_update", target=ct.target.iOS18)
def runtime_slice_update(rng):
    """slice_update with begin and end given at prediction."""
    a, u = rand(rng, 4, 5), rand(rng, 2, 3)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=u.shape), mb.TensorSpec(shape=(2,), dtype=types.int32),
                             mb.TensorSpec(shape=(2,), dtype=types.int32)], opset_version=ct.target.iOS18)
    def prog(x, u, b, e):
        return mb.slice_update(x=x, update=u, begin=b, end=e, name="y")
    d, v = a.astype(np.float64), u.astype(np.float64)
    first = d.copy(); first[1:3, 2:5] = v
    second = d.copy(); second[0:2, 0:3] = v
    return prog, [{"x": a, "u": u, "b": np.array([1, 2], dtype=np.int32), "e": np.array([3, 5], dtype=np.int32)},
                  {"x": a, "u": u, "b": np.array([0, 0], dtype=np.int32), "e": np.array([2, -2], dtype=np.int32)}], \
        [{"y": first}, {"y": second}]


@case("runtime_shapes")
def runtime_shapes(rng):
    """Shapes decided by values computed at prediction: each such operation is planned when its values are known."""
    a = rand(rng, 4, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=(2,), dtype=types.int32),
                             mb.TensorSpec(shape=(2,), dtype=types.int32), mb.TensorSpec(shape=(1,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, b, e, n):
        count = mb.squeeze(x=n)
        window = mb.slice_by_index(x=x, begin=b, end=e, name="window")
        tail = mb.slice_by_size(x=x, begin=b, size=[-1, 2], name="tail")
        positive = mb.non_zero(x=mb.greater(x=x, y=0.25), name="nonzero")
        steps = mb.range_1d(start=mb.reduce_min(x=b), end=mb.add(x=count, y=4), step=1, name="range")
        filled = mb.fill(shape=mb.concat(values=[n, mb.reduce_max(x=b, keep_dims=True)], axis=0), value=1.5, name="filled")
        tiled = mb.tile(x=mb.slice_by_size(x=x, begin=[0, 0], size=[1, 2]), reps=mb.concat(values=[n, [1]], axis=0), name="tiled")
        flat = mb.reshape(x=window, shape=mb.reduce_prod(x=mb.sub(x=e, y=b), axes=[0], keep_dims=True), name="flat")
        chosen = mb.cond(pred=mb.greater(x=count, y=2), _true_fn=lambda: mb.mul(x=window, y=2.0),
                         _false_fn=lambda: mb.slice_by_size(x=x, begin=[0, 0], size=[1, 1]), name="chosen")
        after = mb.add(x=mb.reduce_sum(x=chosen), y=mb.reduce_sum(x=flat), name="after")
        return window, tail, positive, steps, filled, tiled, flat, chosen, after
    d = a.astype(np.float64)
    cases, outputs = [], []
    for b, e, n in [((1, 2), (3, 5), 3), ((0, 1), (4, 3), 1), ((2, 0), (3, 4), 3), ((1, 2), (3, 5), 2)]:
        window = d[b[0]:e[0], b[1]:e[1]]
        chosen = window * 2 if n > 2 else d[0:1, 0:1]
        cases.append({"x": a, "b": np.array(b, dtype=np.int32), "e": np.array(e, dtype=np.int32), "n": np.array([n], dtype=np.int32)})
        outputs.append({"window": window, "tail": d[b[0]:, b[1]:b[1] + 2], "nonzero": np.argwhere(a > 0.25).astype(np.int32),
                        "range": np.arange(min(b), n + 4, dtype=np.int32), "filled": np.full((n, max(b)), 1.5),
                        "tiled": np.tile(d[0:1, 0:2], (n, 1)), "flat": window.reshape(-1), "chosen": chosen,
                        # A rank-0 result comes back as (1,): Core ML has no rank-0 multi-array output.
                        "after": np.array([chosen.sum() + window.sum()])})
    return prog, cases, outputs


@case("runtime_loop")
def runtime_loop(rng):
    """A loop whose variable grows each iteration (a run-time count of doublings)."""
    a = rand(rng, 1, 3)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape), mb.TensorSpec(shape=(1,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, n):
        limit = mb.squeeze(x=n)

        def keep_going(i, y):
            return mb.less(x=i, y=limit)

        def step(i, y):
            return mb.add(x=i, y=1), mb.concat(values=[y, mb.add(x=y, y=1.0)], axis=0)
        count, grown = mb.while_loop(_cond=keep_going, _body=step, loop_vars=(np.int32(0), x))
        return mb.identity(x=grown, name="grown"), mb.reduce_sum(x=grown, axes=[0], name="sums")
    d = a.astype(np.float64)
    cases, outputs = [], []
    for n in (0, 1, 3):
        y = d.copy()
        for _ in range(n):
            y = np.concatenate([y, y + 1], axis=0)
        cases.append({"x": a, "n": np.array([n], dtype=np.int32)})
        outputs.append({"grown": y, "sums": y.sum(axis=0)})
    return prog, cases, outputs


@case("lists")
def lists(rng):
    """Tensor lists: written past their end (they grow with zeros), scattered, gathered, and appended to in a loop."""
    a, b = rand(rng, 2), rand(rng, 2)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(1,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(a, b, n):
        ls = mb.make_list(init_length=2, elem_shape=(2,))
        initial = mb.list_read(ls=ls, index=0, name="initial")
        ls = mb.list_write(ls=ls, index=0, value=a)
        ls = mb.list_write(ls=ls, index=4, value=b)
        ls = mb.list_scatter(ls=ls, indices=[2, 1], value=np.array([[-1, -2], [-4, -5]], dtype=np.float32))
        first = mb.list_read(ls=ls, index=mb.sub(x=mb.squeeze(x=n), y=mb.squeeze(x=n)), name="first")
        picked = mb.list_gather(ls=ls, indices=[4, 2, 3], name="picked")
        size = mb.identity(x=mb.list_length(ls=ls), name="size")

        def keep_going(i, grown):
            return mb.less(x=i, y=mb.squeeze(x=n))

        def step(i, grown):
            return mb.add(x=i, y=1), mb.list_write(ls=grown, index=i, value=mb.mul(x=a, y=mb.cast(x=i, dtype="fp32")))
        _, grown = mb.while_loop(_cond=keep_going, _body=step, loop_vars=(np.int32(0), mb.make_list(init_length=1, elem_shape=(2,))))
        appended = mb.list_gather(ls=grown, indices=mb.range_1d(start=0, end=mb.list_length(ls=grown), step=1), name="appended")
        return initial, first, picked, size, appended
    d, e = a.astype(np.float64), b.astype(np.float64)
    cases, outputs = [], []
    for n in (0, 1, 3):
        rows = max(n, 1)
        appended = np.array([d * i for i in range(n)] + [np.zeros(2)] * (rows - n))
        cases.append({"a": a, "b": b, "n": np.array([n], dtype=np.int32)})
        outputs.append({"initial": np.zeros(2), "first": d, "picked": np.array([e, [-1, -2], [0, 0]]), "size": np.array([5], dtype=np.int32),
                        "appended": appended})
    return prog, cases, outputs


def nms_reference(boxes, scores, iou_threshold, score_threshold, max_boxes, per_class):
    """Greedy non-maximum suppression as coremltools' test reference describes it (TensorFlow's rule:
    scores above the threshold, suppressed when IoU > iou_threshold; per class: only within a class;
    the best box when none passes). boxes [B, 4] (center x, center y, w, h), scores [B, K]."""
    best, label = scores.max(axis=1), scores.argmax(axis=1)
    order = sorted(range(len(best)), key=lambda i: (-best[i], i))

    def iou(i, j):
        def corners(b):
            return b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
        a, c = corners(boxes[i]), corners(boxes[j])
        area_a, area_c = (a[2] - a[0]) * (a[3] - a[1]), (c[2] - c[0]) * (c[3] - c[1])
        if area_a <= 0 or area_c <= 0:
            return 0.0
        inter = max(0, min(a[2], c[2]) - max(a[0], c[0])) * max(0, min(a[3], c[3]) - max(a[1], c[1]))
        return inter / (area_a + area_c - inter)
    kept = []
    for i in order:
        if len(kept) == max_boxes:
            break
        if not best[i] > score_threshold:
            continue
        if any((not per_class or label[j] == label[i]) and iou(i, j) > iou_threshold for j in kept):
            continue
        kept.append(i)
    if not kept:
        kept = [order[0]]
    out_boxes, out_scores = np.zeros((max_boxes, 4)), np.zeros((max_boxes, scores.shape[1]))
    indices = -np.ones(max_boxes, dtype=np.int32)
    for slot, i in enumerate(kept):
        out_boxes[slot], out_scores[slot], indices[slot] = boxes[i], scores[i], i
    return out_boxes, out_scores, indices, len(kept)


@case("non_maximum_suppression", target=ct.target.iOS16)
def non_maximum_suppression(rng):
    """Both layouts (iOS 15: boxes [n, B, 4]; iOS 17: [n, 4, B]), per class or not, and no box passing the threshold."""
    boxes = rng.uniform(0, 20, (2, 12, 4)).astype(np.float32)
    boxes[..., 2:] += 5
    scores = rng.permutation(2 * 12 * 3).reshape(2, 12, 3).astype(np.float32) - 30

    @mb.program(input_specs=[mb.TensorSpec(shape=boxes.shape), mb.TensorSpec(shape=scores.shape)], opset_version=ct.target.iOS16)
    def prog(b, s):
        outs = []
        for tag, per_class, threshold in (("all", False, 0.0), ("class", True, -20.0), ("none", False, 100.0)):
            names = ["%s_%s" % (tag, part) for part in ("boxes", "scores", "indices", "count")]
            outs += list(mb.non_maximum_suppression(boxes=b, scores=s, iou_threshold=0.2, score_threshold=threshold, max_boxes=5,
                                                    per_class_suppression=per_class, name=tag))
        return tuple(mb.identity(x=o, name=n) for o, n in zip(outs, [
            "%s_%s" % (tag, part) for tag in ("all", "class", "none") for part in ("boxes", "scores", "indices", "count")]))
    d, e = boxes.astype(np.float64), scores.astype(np.float64)
    expected = {}
    for tag, per_class, threshold in (("all", False, 0.0), ("class", True, -20.0), ("none", False, 100.0)):
        results = [nms_reference(d[n], e[n], 0.2, threshold, 5, per_class) for n in range(2)]
        expected["%s_boxes" % tag] = np.array([r[0] for r in results])
        expected["%s_scores" % tag] = np.array([r[1] for r in results])
        expected["%s_indices" % tag] = np.array([r[2] for r in results])
        expected["%s_count" % tag] = np.array([r[3] for r in results], dtype=np.int32)
    return prog, [{"b": boxes, "s": scores}], [expected]


@case("non_maximum_suppression_ios17", target=ct.target.iOS17)
def non_maximum_suppression_ios17(rng):
    boxes = rng.uniform(0, 20, (1, 4, 10)).astype(np.float32)
    boxes[:, 2:] += 5
    scores = rng.permutation(20).reshape(1, 2, 10).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=boxes.shape), mb.TensorSpec(shape=scores.shape)], opset_version=ct.target.iOS17)
    def prog(b, s):
        out = mb.non_maximum_suppression(boxes=b, scores=s, iou_threshold=0.3, max_boxes=4, per_class_suppression=True, name="nms")
        return tuple(mb.identity(x=o, name=n) for o, n in zip(out, ("boxes", "scores", "indices")))
    r = nms_reference(boxes[0].T.astype(np.float64), scores[0].T.astype(np.float64), 0.3, -np.inf, 4, True)
    return prog, [{"b": boxes, "s": scores}], [{"boxes": r[0].T[None], "scores": r[1].T[None], "indices": r[2][None]}]


@case("integer_matmul")
def integer_matmul(rng):
    """matmul of int32 tensors (exact): batch broadcasting, transposes."""
    a = rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)
    b = rng.integers(-50, 50, (5, 4)).astype(np.int32)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape, dtype=types.int32), mb.TensorSpec(shape=b.shape, dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, y):
        return (mb.matmul(x=x, y=y, transpose_y=True, name="batched"),
                mb.matmul(x=y, y=x, transpose_x=False, transpose_y=True, name="broadcast"),
                mb.matmul(x=x, y=x, transpose_x=True, name="gram"))
    A, B = a.astype(np.int64), b.astype(np.int64)
    return prog, [{"x": a, "y": b}], [{"batched": A @ B.T, "broadcast": B @ np.swapaxes(A, 1, 2), "gram": np.swapaxes(A, 1, 2) @ A}]


@case("upsample_nearest_fractional", target=ct.target.iOS16)
def upsample_nearest_fractional(rng):
    """upsample_nearest_neighbor with fractional scales: output pixel i reads floor(i * input / output)
    (coremltools' iOS15 test: 3 columns x 1.12 -> 3 columns reading 0, 1, 2; x 0.67 -> 2 reading 0, 1)."""
    a = rand(rng, 1, 2, 3, 5)

    @mb.program(input_specs=[mb.TensorSpec(shape=a.shape)], opset_version=ct.target.iOS16)
    def prog(x):
        return (mb.upsample_nearest_neighbor(x=x, scale_factor_height=3.17, scale_factor_width=0.67, name="shrink"),
                mb.upsample_nearest_neighbor(x=x, scale_factor_height=2.0, scale_factor_width=1.12, name="grow"),
                mb.upsample_nearest_neighbor(x=x, scale_factor_height=1.5, scale_factor_width=2.5, name="mixed"))
    d = a.astype(np.float64)

    def nearest(sh, sw):
        h, w = int(math.floor(3 * sh)), int(math.floor(5 * sw))
        return d[:, :, [i * 3 // h for i in range(h)]][:, :, :, [j * 5 // w for j in range(w)]]
    return prog, [{"x": a}], [{"shrink": nearest(3.17, 0.67), "grow": nearest(2.0, 1.12), "mixed": nearest(1.5, 2.5)}]


@case("enumerated_shapes")
def enumerated(rng):
    """An input of enumerated shapes [1, 8], [3, 8], [2, 4, 8]: every one runs, each with its own plan."""
    from coremltools.converters.mil.mil import get_new_symbol
    w = rand(rng, 5, 8)

    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(), 8))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.softmax(x=mb.linear(x=x, weight=w), axis=-1, name="y")
    prog.flexible_inputs = [ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(1, 8), (3, 8), (6, 8)], default=(1, 8)))]
    inputs = [rand(rng, n, 8) for n in (1, 3, 6)]
    outputs = []
    for x in inputs:
        h = x.astype(np.float64) @ w.astype(np.float64).T
        e = np.exp(h - h.max(-1, keepdims=True))
        outputs.append({"y": e / e.sum(-1, keepdims=True)})
    return prog, [{"x": x} for x in inputs], outputs


def sample_plane(img, y, x, nearest, padding, value):
    """One sample of a 2-D image at pixel position (y, x): bilinear or nearest, out-of-image
    indices read through the padding mode (constant, border = edge, reflection = reflect
    without the edge, symmetric = reflect with the edge, as np.pad names them)."""
    rows, cols = img.shape

    def at(r, c):
        if padding == "constant":
            return value if not (0 <= r < rows and 0 <= c < cols) else img[r, c]
        mode = {"border": "edge", "reflection": "reflect", "symmetric": "symmetric"}[padding]
        padded = np.pad(img, 40, mode=mode)
        return padded[r + 40, c + 40]
    if nearest:
        return at(int(math.floor(y + 0.5)), int(math.floor(x + 0.5)))
    r0, c0 = int(math.floor(y)), int(math.floor(x))
    fy, fx = y - r0, x - c0
    return ((at(r0, c0) * (1 - fx) + at(r0, c0 + 1) * fx) * (1 - fy)
            + (at(r0 + 1, c0) * (1 - fx) + at(r0 + 1, c0 + 1) * fx) * fy)


def unnormalize(v, n, mode, align):
    if mode == "unnormalized":
        return v
    if mode == "normalized_zero_to_one":
        return v * (n - 1) if align else v * n - 0.5
    return (v + 1) / 2 * (n - 1) if align else ((v + 1) * n - 1) / 2


def resample_reference(x, coords, sampling, padding, value, mode, align):
    b_, c_, h, w = x.shape
    out = np.zeros((b_, c_, coords.shape[1], coords.shape[2]))
    for b in range(b_):
        for i in range(coords.shape[1]):
            for j in range(coords.shape[2]):
                px = unnormalize(float(coords[b, i, j, 0]), w, mode, align)
                py = unnormalize(float(coords[b, i, j, 1]), h, mode, align)
                for c in range(c_):
                    out[b, c, i, j] = sample_plane(x[b, c], py, px, sampling == "nearest", padding, value)
    return out


@case("resample", target=ct.target.iOS15)
def resample(rng):
    x = rand(rng, 2, 2, 3, 4)
    coords = rng.uniform(-1.6, 1.6, (2, 3, 5, 2)).astype(np.float32)
    coords[0, 0, 0] = [-1, -1]
    coords[1, 2, 4] = [1, 1]
    modes = [("bilinear", "constant", 0.5, "normalized_minus_one_to_one", True),
             ("bilinear", "border", 0.0, "normalized_minus_one_to_one", False),
             ("nearest", "reflection", 0.0, "normalized_zero_to_one", True),
             ("bilinear", "symmetric", 0.0, "normalized_zero_to_one", False),
             ("bilinear", "reflection", 0.0, "unnormalized", False),
             ("nearest", "constant", -2.0, "unnormalized", True),
             ("nearest", "border", 0.0, "normalized_minus_one_to_one", True),
             ("nearest", "symmetric", 0.0, "normalized_minus_one_to_one", False)]

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=coords.shape)], opset_version=ct.target.iOS15)
    def prog(x, g):
        scaled = [mb.mul(x=g, y=3.0) if m[3] == "unnormalized" else g for m in modes]
        return tuple(mb.resample(x=x, coordinates=s, sampling_mode=m[0], padding_mode=m[1], padding_value=m[2],
                                 coordinates_mode=m[3], align_corners=m[4], name="r%d" % k)
                     for k, (m, s) in enumerate(zip(modes, scaled)))
    x64, g64 = x.astype(np.float64), coords.astype(np.float64)
    return prog, [{"x": x, "g": coords}], [{"r%d" % k: resample_reference(x64, g64 * 3 if m[3] == "unnormalized" else g64, *m)
                                            for k, m in enumerate(modes)}]


@case("affine", target=ct.target.iOS15)
def affine(rng):
    x = rand(rng, 2, 2, 4, 5)
    one = np.array([[0.8, -0.3, 0.1, 0.2, 1.1, -0.2]], dtype=np.float32)
    each = np.array([[1.2, 0.4, -0.3, -0.1, 0.9, 0.25], [-0.7, 0.2, 0.1, 0.5, -1.3, 0.05]], dtype=np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=each.shape)], opset_version=ct.target.iOS15)
    def prog(x, m):
        kw = dict(sampling_mode="bilinear", padding_mode="constant", padding_value=0.0,
                  coordinates_mode="normalized_minus_one_to_one", align_corners=True)
        return (mb.affine(x=x, transform_matrix=one, output_height=3, output_width=6, name="shared", **kw),
                mb.affine(x=x, transform_matrix=m, output_height=5, output_width=4, name="per_batch", **kw))

    def reference(x, matrix, h, w):
        out = np.zeros((x.shape[0], x.shape[1], h, w))
        for b in range(x.shape[0]):
            a0, a1, a2, b0, b1, b2 = matrix[b if matrix.shape[0] > 1 else 0].astype(np.float64)
            for i, oy in enumerate(np.linspace(-1, 1, h)):
                for j, ox in enumerate(np.linspace(-1, 1, w)):
                    px = unnormalize(a0 * ox + a1 * oy + a2, x.shape[3], "normalized_minus_one_to_one", True)
                    py = unnormalize(b0 * ox + b1 * oy + b2, x.shape[2], "normalized_minus_one_to_one", True)
                    for c in range(x.shape[1]):
                        out[b, c, i, j] = sample_plane(x[b, c], py, px, False, "constant", 0.0)
        return out
    x64 = x.astype(np.float64)
    return prog, [{"x": x, "m": each}], [{"shared": reference(x64, one, 3, 6), "per_batch": reference(x64, each, 5, 4)}]


def crop_positions(mode, start, end, n, size):
    """Sample positions in the box [start, end] under a resize_bilinear sampling mode, clamped to the image."""
    length = end - start
    out = []
    for i in range(n):
        if mode in ("ALIGN_CORNERS", "STRICT_ALIGN_CORNERS"):
            p = (start + length / 2 if mode == "ALIGN_CORNERS" else start) if n == 1 else start + i * length / (n - 1)
        elif mode == "DEFAULT":
            p = start + i * length / n
        elif mode == "OFFSET_CORNERS":
            p = start + (i + 0.5) * length / n
        else:
            p = start + (i + 0.5) * length / n - 0.5
        out.append(p if 0 <= p <= size - 1 else None)
    return out


def crop_box(box, box_mode, normalized, scale, h, w):
    b = [float(v) for v in box]
    if box_mode == "CORNERS_WIDTH_FIRST":
        y0, x0, y1, x1 = b[1], b[0], b[3], b[2]
    elif box_mode == "CENTER_SIZE_HEIGHT_FIRST":
        y0, x0, y1, x1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    elif box_mode == "CENTER_SIZE_WIDTH_FIRST":
        y0, x0, y1, x1 = b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2
    else:
        y0, x0, y1, x1 = b
    sy, sx = ((h - 1) if normalized else 1) * scale, ((w - 1) if normalized else 1) * scale
    return y0 * sy, x0 * sx, y1 * sy, x1 * sx


def crop_one(img, box, th, tw, box_mode, normalized, scale, sampling, pad=0.0):
    """A box resized by bilinear interpolation; samples outside the image are the pad value."""
    h, w = img.shape
    y0, x0, y1, x1 = crop_box(box, box_mode, normalized, scale, h, w)
    ys, xs = crop_positions(sampling, y0, y1, th, h), crop_positions(sampling, x0, x1, tw, w)
    return np.array([[pad if y is None or x is None else sample_plane(img, y, x, False, "border", 0.0) for x in xs] for y in ys])


CROP_MODES = [("CORNERS_HEIGHT_FIRST", False, 1.0, "ALIGN_CORNERS", 3, 4),
              ("CORNERS_WIDTH_FIRST", False, 1.0, "STRICT_ALIGN_CORNERS", 1, 3),
              ("CORNERS_HEIGHT_FIRST", True, 1.0, "DEFAULT", 4, 3),
              ("CENTER_SIZE_HEIGHT_FIRST", False, 0.5, "OFFSET_CORNERS", 2, 2),
              ("CENTER_SIZE_WIDTH_FIRST", False, 1.0, "UNALIGN_CORNERS", 3, 3),
              ("CORNERS_HEIGHT_FIRST", False, 1.0, "ALIGN_CORNERS", 1, 1)]


def crop_boxes(box_mode, normalized, scale):
    """Two boxes inside a 6 x 7 image, written in the box mode's convention."""
    corners = [(1.2, 1.5, 4.1, 5.3), (2.0, 1.0, 3.6, 2.4)]
    boxes = []
    for y0, x0, y1, x1 in corners:
        y0, x0, y1, x1 = y0 / scale, x0 / scale, y1 / scale, x1 / scale
        if normalized:
            y0, y1, x0, x1 = y0 / 5, y1 / 5, x0 / 6, x1 / 6
        boxes.append({"CORNERS_HEIGHT_FIRST": [y0, x0, y1, x1], "CORNERS_WIDTH_FIRST": [x0, y0, x1, y1],
                      "CENTER_SIZE_HEIGHT_FIRST": [(y0 + y1) / 2, (x0 + x1) / 2, y1 - y0, x1 - x0],
                      "CENTER_SIZE_WIDTH_FIRST": [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0]}[box_mode])
    return np.array(boxes, dtype=np.float32)


@case("crop_resize_ios15", target=ct.target.iOS15)
def crop_resize_ios15(rng):
    x = rand(rng, 2, 3, 6, 7)
    rois = [crop_boxes(m[0], m[1], m[2]).reshape(2, 1, 4, 1, 1) for m in CROP_MODES]
    single = rand(rng, 1, 3, 6, 7)
    indexed = np.concatenate([np.array([[0], [0]], dtype=np.float32), crop_boxes("CORNERS_HEIGHT_FIRST", False, 1.0)], axis=1)
    indexed = indexed.reshape(2, 1, 5, 1, 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=single.shape), mb.TensorSpec(shape=indexed.shape)],
                opset_version=ct.target.iOS15)
    def prog(x, y, r):
        outs = [mb.crop_resize(x=x, roi=roi, target_height=m[4], target_width=m[5], normalized_coordinates=m[1], spatial_scale=m[2],
                               box_coordinate_mode=m[0], sampling_mode=m[3], name="c%d" % k) for k, (m, roi) in enumerate(zip(CROP_MODES, rois))]
        outs.append(mb.crop_resize(x=y, roi=r, target_height=2, target_width=5, sampling_mode="ALIGN_CORNERS", name="indexed"))
        return tuple(outs)
    x64 = x.astype(np.float64)
    expected = {}
    for k, (m, roi) in enumerate(zip(CROP_MODES, rois)):
        expected["c%d" % k] = np.array([[[crop_one(x64[b, c], roi[n, 0, :, 0, 0], m[4], m[5], m[0], m[1], m[2], m[3])
                                          for c in range(3)] for b in range(2)] for n in range(2)])
    expected["indexed"] = np.array([[[crop_one(single.astype(np.float64)[int(indexed[n, 0, 0, 0, 0]), c], indexed[n, 0, 1:, 0, 0], 2, 5, "CORNERS_HEIGHT_FIRST",
                                                False, 1.0, "ALIGN_CORNERS") for c in range(3)]] for n in range(2)])
    return prog, [{"x": x, "y": single, "r": indexed}], [expected]


@case("crop_resize_inverted", target=ct.target.iOS15)
def crop_resize_inverted(rng):
    """Boxes whose start lies after their end: the crop is flipped along that axis, as Core ML gives
    in coremltools' iOS14 test (unnormalized [2, 2, 1, 1], ALIGN_CORNERS: [11, 10, 7, 6] on 1...16) and
    iOS16 test (normalized columns 1.8 to 0.3: the samples run right to left). Every sampling mode, boxes
    inside the image flipped in rows, columns or both, and that iOS14 case itself."""
    x = rand(rng, 1, 2, 6, 7)
    grid = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    flips = [(4.1, 1.5, 1.2, 5.3), (1.2, 5.3, 4.1, 1.5), (3.6, 2.4, 2.0, 1.0)]
    modes = ["ALIGN_CORNERS", "STRICT_ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"]
    boxes = np.array(flips, dtype=np.float32).reshape(3, 1, 4, 1, 1)
    normalized = (boxes / np.array([5, 6, 5, 6], dtype=np.float32).reshape(1, 1, 4, 1, 1)).astype(np.float32)
    iOS14 = np.array([2, 2, 1, 1], dtype=np.float32).reshape(1, 1, 4, 1, 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=grid.shape)], opset_version=ct.target.iOS15)
    def prog(x, g):
        outs = [mb.crop_resize(x=x, roi=boxes, target_height=3, target_width=4, sampling_mode=m, name="pixels_" + m.lower())
                for m in modes]
        outs.append(mb.crop_resize(x=x, roi=normalized, target_height=3, target_width=4, normalized_coordinates=True,
                                   sampling_mode="ALIGN_CORNERS", name="normalized"))
        outs.append(mb.crop_resize(x=g, roi=iOS14, target_height=2, target_width=2, sampling_mode="ALIGN_CORNERS", name="coremltools_ios14"))
        return tuple(outs)
    x64 = x.astype(np.float64)
    expected = {"pixels_" + m.lower(): np.array([[[crop_one(x64[0, c], boxes[n, 0, :, 0, 0], 3, 4, "CORNERS_HEIGHT_FIRST", False, 1.0, m)
                                                    for c in range(2)]] for n in range(3)]) for m in modes}
    expected["normalized"] = np.array([[[crop_one(x64[0, c], normalized[n, 0, :, 0, 0], 3, 4, "CORNERS_HEIGHT_FIRST", True, 1.0, "ALIGN_CORNERS")
                                         for c in range(2)]] for n in range(3)])
    expected["coremltools_ios14"] = np.array([11, 10, 7, 6], dtype=np.float64).reshape(1, 1, 1, 2, 2)
    return prog, [{"x": x, "g": grid}], [expected]


@case("crop_resize_ios17")
def crop_resize_ios17(rng):
    x = rand(rng, 2, 3, 6, 7)
    boxes = crop_boxes("CORNERS_HEIGHT_FIRST", False, 1.0)
    indices = np.array([1, 1], dtype=np.int32)
    sized = [crop_boxes(m[0], m[1], m[2]) for m in CROP_MODES]
    outside = np.array([[0.1, 0.3, 1.3, 1.0], [0.5, 1.8, 1.0, 0.3]], dtype=np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=x.shape), mb.TensorSpec(shape=boxes.shape),
                             mb.TensorSpec(shape=indices.shape, dtype=types.int32)], opset_version=ct.target.iOS17)
    def prog(x, b, i):
        outs = [mb.crop_resize(x=x, boxes=b, box_indices=i, target_height=3, target_width=2, sampling_mode="UNALIGN_CORNERS", name="indexed"),
                mb.crop_resize(x=x, boxes=b, target_height=2, target_width=3, sampling_mode="DEFAULT", name="arange"),
                mb.crop_resize(x=x, boxes=outside, target_height=3, target_width=3, normalized_coordinates=True,
                               sampling_mode="ALIGN_CORNERS", pad_value=2.5, name="padded")]
        outs += [mb.crop_resize(x=x, boxes=s, target_height=m[4], target_width=m[5], normalized_coordinates=m[1], spatial_scale=m[2],
                                box_coordinate_mode=m[0], sampling_mode=m[3], name="c%d" % k) for k, (m, s) in enumerate(zip(CROP_MODES, sized))]
        return tuple(outs)
    x64 = x.astype(np.float64)
    expected = {"indexed": np.array([[crop_one(x64[indices[n], c], boxes[n], 3, 2, "CORNERS_HEIGHT_FIRST", False, 1.0, "UNALIGN_CORNERS")
                                      for c in range(3)] for n in range(2)]),
                "arange": np.array([[crop_one(x64[n, c], boxes[n], 2, 3, "CORNERS_HEIGHT_FIRST", False, 1.0, "DEFAULT")
                                     for c in range(3)] for n in range(2)])}
    expected["padded"] = np.array([[crop_one(x64[n, c], outside[n], 3, 3, "CORNERS_HEIGHT_FIRST", True, 1.0, "ALIGN_CORNERS", 2.5)
                                     for c in range(3)] for n in range(2)])
    for k, (m, s) in enumerate(zip(CROP_MODES, sized)):
        expected["c%d" % k] = np.array([[crop_one(x64[n, c], s[n], m[4], m[5], m[0], m[1], m[2], m[3]) for c in range(3)] for n in range(2)])
    return prog, [{"x": x, "b": boxes, "i": indices}], [expected]


def write_case(out, name, tolerance, target, build):
    rng = np.random.default_rng(sum(map(ord, name)))
    prog, inputs, outputs = build(rng)
    if isinstance(prog, ct.models.MLModel):
        model = prog
    else:
        model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True, minimum_deployment_target=target,
                           compute_precision=getattr(prog, "compute_precision", ct.precision.FLOAT32),
                           inputs=getattr(prog, "flexible_inputs", None))
    package = os.path.join(out, name + ".mlpackage")
    save_ml_package(model, package)
    cases = [{"inputs": {k: tolist(v) for k, v in i.items()}, "outputs": {k: tolist(v) for k, v in o.items()}}
             for i, o in zip(inputs, outputs)]
    document = {"kind": "mlProgram", "model": name + ".mlpackage", "reference": REFERENCE, "tolerance": tolerance,
                "note": "Operation outputs are named after the operation; booleans are given as int32.", "cases": cases}
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write("\n")


def write_refusals(out):
    """Programs the tensor engine must refuse, each with the one-line message it gives
    (Fixtures/Parity/TensorOps/Refused/refusals.json)."""
    from generate import package_root_model_path, parse_model, read_bytes, save_spec
    from coremltools.proto import MIL_pb2
    out = os.path.join(out, "Refused")
    os.makedirs(out, exist_ok=True)
    expected = {}

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def unsupported(x):
        return mb.relu(x=x, name="unknown")
    # An operation no MIL opset defines: the relu's type is renamed in the file (below).
    expected["unsupported_operation"] = ("load", 'layer "unknown" (bogus_operation): modelc does not run this ML program operation yet')

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def unseeded(x):
        return mb.add(x=x, y=mb.random_uniform(shape=[2, 3], low=0.0, high=1.0, name="noise"), name="y")
    expected["unseeded_random"] = ("load", 'layer "noise" (random_uniform): random sampling without a seed cannot be reproduced; '
                                           'modelc runs it only with a seed')

    @mb.program(input_specs=[mb.TensorSpec(shape=(4, 3)), mb.TensorSpec(shape=(2,), dtype=types.int32)],
                opset_version=ct.target.iOS17)
    def bad_index(x, i):
        return mb.gather(x=x, indices=i, axis=0, name="y")
    expected["index_out_of_range"] = ("predict", 'feature "y": index 7 is outside an axis of size 4')

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def extra_parameter(x):
        return mb.relu(x=x, name="y")
    expected["unknown_parameter"] = ("load", 'layer "y" (relu): parameter "bogus" is not one modelc knows for this operation')

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def internal(x):
        return mb.relu(x=x, name="y")
    # An operation only modelc's own passes make: the relu's type is renamed in the file (below).
    expected["internal_operation"] = ("load", 'layer "y" (fused_linear): an operation internal to modelc\'s tensor engine, '
                                              'which a program file cannot name')

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 4, 4))], opset_version=ct.target.iOS17)
    def internal_parameter(x):
        return mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="y")
    # A parameter only modelc's layout pass sets (channels_last = true) is written into the file (below).
    expected["internal_parameter"] = ("load", 'layer "y" (max_pool): parameter "channels_last" is internal to modelc\'s tensor engine; '
                                              'a program file cannot set it')

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 4, 4))], opset_version=ct.target.iOS17)
    def affine_unnormalized(x):
        return mb.affine(x=x, transform_matrix=np.array([[1, 0, 0, 0, 1, 0]], dtype=np.float32), output_height=2, output_width=2,
                         sampling_mode="bilinear", padding_mode="constant", padding_value=0.0,
                         coordinates_mode="normalized_minus_one_to_one", align_corners=True, name="y")
    expected["unsupported_mode"] = ("load", 'layer "y" (affine): coordinates_mode "unnormalized" is not supported (the output grid is normalized)')

    # What each file holds that coremltools' builder would not write, edited into its main block.
    def rename_relu(to):
        def edit(block):
            [op for op in block.operations if op.type == "relu"][0].type = to
        return edit

    def set_channels_last(block):
        pool = [op for op in block.operations if op.type == "max_pool"][0]
        value = pool.inputs["channels_last"].arguments.add().value
        value.type.tensorType.dataType = MIL_pb2.BOOL
        value.immediateValue.tensor.bools.values.append(True)

    def add_bogus_parameter(block):
        relu = [op for op in block.operations if op.type == "relu"][0]
        relu.inputs["bogus"].arguments.add().name = "x"

    def unnormalize(block):
        # coremltools' builder accepts only normalized_minus_one_to_one; the mode MIL names is written into the file.
        affine = [op for op in block.operations if op.type == "affine"][0]
        argument = affine.inputs["coordinates_mode"].arguments[0]
        if argument.name:
            const = [op for op in block.operations if op.outputs and op.outputs[0].name == argument.name][0]
            strings = const.attributes["val"].immediateValue.tensor.strings.values
        else:
            strings = argument.value.immediateValue.tensor.strings.values
        strings[0] = "unnormalized"

    edits = {"unsupported_operation": rename_relu("bogus_operation"), "internal_operation": rename_relu("fused_linear"),
             "internal_parameter": set_channels_last, "unknown_parameter": add_bogus_parameter, "unsupported_mode": unnormalize}
    for name, prog in [("unsupported_operation", unsupported), ("unseeded_random", unseeded),
                       ("index_out_of_range", bad_index), ("unknown_parameter", extra_parameter), ("unsupported_mode", affine_unnormalized),
                       ("internal_operation", internal), ("internal_parameter", internal_parameter)]:
        model = ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                           minimum_deployment_target=ct.target.iOS17,
                           compute_precision=ct.precision.FLOAT32)
        package = os.path.join(out, name + ".mlpackage")
        save_ml_package(model, package)
        if name in edits:
            path = package_root_model_path(package)
            spec = parse_model(read_bytes(path))
            edits[name](list(spec.mlProgram.functions["main"].block_specializations.values())[0])
            save_spec(spec, path)
    with open(os.path.join(out, "refusals.json"), "w") as f:
        json.dump({name: {"when": when, "message": message} for name, (when, message) in expected.items()}, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    out = os.path.join(args.out, SUBDIR)
    os.makedirs(out, exist_ok=True)
    for name, tolerance, target, build in CASES:
        if args.only and name != args.only:
            continue
        write_case(out, name, tolerance, target, build)
        print("wrote", name)
    if args.only is None:
        write_refusals(out)


if __name__ == "__main__":
    main()
