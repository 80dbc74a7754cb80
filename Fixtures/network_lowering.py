#!/usr/bin/env python3
"""Generate the fixtures for neural-network layers only the tensor engine's lowering runs.

Usage:
    network_lowering.py [--out DIR]   write DIR/Parity/Lowering/ (default DIR: the folder of this script)

Small networks built with coremltools' NeuralNetworkBuilder (rank-N inputs, EXACT_ARRAY_MAPPING,
outputs of undeclared shape) holding the layers the layer engine refuses: recurrent layers
(uniDirectionalLSTM, biDirectionalLSTM, gru, simpleRecurrent) over [Seq, B, C, 1, 1] blobs,
gatherAlongAxis, scatterAlongAxis, gather, topK, argMax, slidingWindows, clampedReLU, floor, the
comparisons, interleaved concatND, getShape, cropResize, convolution3d and pooling3d. The
references are NumPy float64 evaluations of NeuralNetwork.proto's layer definitions (the formulas
coremltools' MIL definitions give for the operations these layers are). The runtime must give every
output with exactly the reference's shape and values within the file's tolerance.

Uses network_parity.py's format and helpers; deterministic (fixed seeds, deterministic
serialization), so running it twice gives byte-identical files.
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import network_parity as npar  # noqa: E402

SUBDIR = os.path.join("Parity", "Lowering")
NUMPY = npar.NUMPY
TOLERANCE = 1e-5


class Writer(npar.Writer):
    """network_parity's writer, into Parity/Lowering/."""

    def __init__(self, out_dir):
        super().__init__(out_dir)
        self.dir = os.path.join(out_dir, SUBDIR)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def nn(inputs, outputs):
    return NeuralNetworkBuilder([(n, datatypes.Array(*s)) for n, s in inputs],
                                [(n, None) for n in outputs], disable_rank5_shape_mapping=True)


def finish(builder):
    spec = builder.spec
    spec.specificationVersion = max(spec.specificationVersion, 4)
    return spec


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


# ---------------------------------------------------------------------------
# Recurrent layers: x is [Seq, B, I, 1, 1], outputs [Seq or 1, B, H, 1, 1]
# ---------------------------------------------------------------------------

def lstm_reference(x, h, c, wx, wh, b, peep=None, reverse=False):
    """NeuralNetwork.proto's LSTM: gates i, f, o (sigmoid), z (tanh); c = f c + i z; h = o tanh(c)."""
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outputs = []
    for t in steps:
        xt = x[t]
        gi = xt @ wx[0].T + h @ wh[0].T + b[0]
        gf = xt @ wx[1].T + h @ wh[1].T + b[1]
        go = xt @ wx[2].T + h @ wh[2].T + b[2]
        gz = xt @ wx[3].T + h @ wh[3].T + b[3]
        if peep is not None:
            gi = gi + peep[0] * c
            gf = gf + peep[1] * c
        i, f, z = sigmoid(gi), sigmoid(gf), np.tanh(gz)
        c = f * c + i * z
        if peep is not None:
            go = go + peep[2] * c
        h = sigmoid(go) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


def blob(v):
    """[S, B, H] or [B, H] as the rank-5 blob [S, B, H, 1, 1] ([1, B, H, 1, 1])."""
    if v.ndim == 2:
        v = v[None]
    return v[..., None, None]


def nn_lstm(writer):
    seq, batch, inputs, hidden = 4, 2, 3, 5
    rng = np.random.default_rng(3101)
    wx = [f32(rng.standard_normal((hidden, inputs)) * 0.5) for _ in range(4)]
    wh = [f32(rng.standard_normal((hidden, hidden)) * 0.5) for _ in range(4)]
    b = [f32(rng.standard_normal(hidden) * 0.1) for _ in range(4)]
    peep = [f32(rng.standard_normal(hidden) * 0.1) for _ in range(3)]
    builder = nn([("x", (seq, batch, inputs, 1, 1)), ("h0", (1, batch, hidden, 1, 1)), ("c0", (1, batch, hidden, 1, 1))],
                 ["y", "h", "c", "y_last"])
    builder.add_unilstm("lstm", wh, wx, b, hidden, inputs, ["x", "h0", "c0"], ["y", "h", "c"], output_all=True)
    builder.add_unilstm("lstm_reverse", wh, wx, b, hidden, inputs, ["x"], ["y_last"], peep=peep, reverse_input=True)
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((seq, batch, inputs, 1, 1)))
        h0 = f32(rng.standard_normal((1, batch, hidden, 1, 1)))
        c0 = f32(rng.standard_normal((1, batch, hidden, 1, 1)))
        ys, h, c = lstm_reference(x[..., 0, 0], h0[0, :, :, 0, 0], c0[0, :, :, 0, 0], wx, wh, b)
        _, last, _ = lstm_reference(x[..., 0, 0], np.zeros((batch, hidden)), np.zeros((batch, hidden)), wx, wh, b,
                                    peep=peep, reverse=True)
        cases.append({"inputs": {"x": x, "h0": h0, "c0": c0},
                      "outputs": {"y": blob(ys), "h": blob(h), "c": blob(c), "y_last": blob(last)}})
    writer.write("nn_lstm", spec, NUMPY, cases,
                 "uniDirectionalLSTM: a sequence with initial states, and reversed with peepholes (last output)",
                 "Refused by the layer engine; lowered to MIL lstm.", tolerance=TOLERANCE)


def nn_bidirectional_lstm(writer):
    seq, batch, inputs, hidden = 3, 1, 4, 3
    rng = np.random.default_rng(3102)
    def weights():
        return ([f32(rng.standard_normal((hidden, hidden)) * 0.5) for _ in range(4)],
                [f32(rng.standard_normal((hidden, inputs)) * 0.5) for _ in range(4)],
                [f32(rng.standard_normal(hidden) * 0.1) for _ in range(4)])
    wh, wx, b = weights()
    wh_back, wx_back, b_back = weights()
    builder = nn([("x", (seq, batch, inputs, 1, 1))], ["y", "h", "c", "h_back", "c_back"])
    builder.add_bidirlstm("bilstm", wh, wx, b, wh_back, wx_back, b_back, hidden, inputs, ["x"],
                          ["y", "h", "c", "h_back", "c_back"], output_all=True)
    spec = finish(builder)
    cases = []
    zeros = np.zeros((batch, hidden))
    for _ in range(2):
        x = f32(rng.standard_normal((seq, batch, inputs, 1, 1)))
        forward, h, c = lstm_reference(x[..., 0, 0], zeros, zeros, wx, wh, b)
        backward, hb, cb = lstm_reference(x[..., 0, 0], zeros, zeros, wx_back, wh_back, b_back, reverse=True)
        y = np.concatenate([forward, backward[::-1]], axis=2)
        cases.append({"inputs": {"x": x},
                      "outputs": {"y": blob(y), "h": blob(h), "c": blob(c), "h_back": blob(hb), "c_back": blob(cb)}})
    writer.write("nn_bidirectional_lstm", spec, NUMPY, cases,
                 "biDirectionalLSTM: the sequence (forward and backward halves aligned in time) and both states",
                 "Refused by the layer engine; lowered to MIL lstm with direction bidirectional.", tolerance=TOLERANCE)


def nn_gru_rnn(writer):
    seq, batch, inputs, hidden = 4, 2, 3, 4
    rng = np.random.default_rng(3103)
    # Builder order: [z, r, o].
    wx = [f32(rng.standard_normal((hidden, inputs)) * 0.5) for _ in range(3)]
    wh = [f32(rng.standard_normal((hidden, hidden)) * 0.5) for _ in range(3)]
    b = [f32(rng.standard_normal(hidden) * 0.1) for _ in range(3)]
    rx = f32(rng.standard_normal((hidden, inputs)) * 0.5)
    rh = f32(rng.standard_normal((hidden, hidden)) * 0.5)
    rb = f32(rng.standard_normal(hidden) * 0.1)
    builder = nn([("x", (seq, batch, inputs, 1, 1))], ["gru_y", "gru_h", "rnn_y", "rnn_h"])
    builder.add_gru("gru", wh, wx, b, hidden, inputs, ["x"], ["gru_y", "gru_h"], inner_activation="SIGMOID", output_all=True)
    builder.add_simple_rnn("rnn", rh, rx, rb, hidden, inputs, "TANH", ["x"], ["rnn_y", "rnn_h"], output_all=False)
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((seq, batch, inputs, 1, 1)))[..., 0, 0]
        h = np.zeros((batch, hidden))
        ys = []
        for t in range(seq):
            z = sigmoid(x[t] @ wx[0].T + h @ wh[0].T + b[0])
            r = sigmoid(x[t] @ wx[1].T + h @ wh[1].T + b[1])
            o = np.tanh(x[t] @ wx[2].T + (r * h) @ wh[2].T + b[2])
            h = (1 - z) * o + z * h
            ys.append(h)
        g = np.zeros((batch, hidden))
        for t in range(seq):
            g = np.tanh(x[t] @ rx.T + g @ rh.T + rb)
        cases.append({"inputs": {"x": x[..., None, None]},
                      "outputs": {"gru_y": blob(np.stack(ys)), "gru_h": blob(h), "rnn_y": blob(g), "rnn_h": blob(g)}})
    writer.write("nn_gru_rnn", spec, NUMPY, cases,
                 "gru (every step) and simpleRecurrent (last step)",
                 "Refused by the layer engine; lowered to MIL gru and rnn. GRU: o = tanh(W_o x + R_o (r ⊙ h) + b_o).",
                 tolerance=TOLERANCE)


# ---------------------------------------------------------------------------
# Indexing, sorting and windows
# ---------------------------------------------------------------------------

def nn_indexing(writer):
    rng = np.random.default_rng(3104)
    builder = nn([("x", (3, 5)), ("indices", (3, 2)), ("updates", (3, 2)), ("rows", (2,))],
                 ["along", "scattered", "gathered", "top_values", "top_indices", "argmax", "windows"])
    builder.add_gather_along_axis("along", ["x", "indices"], "along", axis=1)
    builder.add_scatter_along_axis("scatter", ["x", "indices", "updates"], "scattered", axis=1, mode="ADD")
    builder.add_gather("gather", ["x", "rows"], "gathered", axis=0)
    builder.add_topk("topk", ["x"], ["top_values", "top_indices"], k=2, axis=1)
    builder.add_argmax("argmax", "x", "argmax", axis=1, keepdims=False)
    builder.add_sliding_windows("windows", "x", "windows", axis=1, window_size=3, step=2)
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((3, 5)))
        indices = rng.permuted(np.tile(np.arange(5), (3, 1)), axis=1)[:, :2].astype(np.float64)
        updates = f32(rng.standard_normal((3, 2)))
        rows = np.array([2.0, 0.0])
        scattered = x.copy()
        for i in range(3):
            for j in range(2):
                scattered[i, int(indices[i, j])] += updates[i, j]
        order = np.argsort(-x, axis=1, kind="stable")[:, :2]
        cases.append({"inputs": {"x": x, "indices": indices, "updates": updates, "rows": rows},
                      "outputs": {"along": np.take_along_axis(x, indices.astype(int), axis=1), "scattered": scattered,
                                  "gathered": x[[2, 0]], "top_values": np.take_along_axis(x, order, axis=1),
                                  "top_indices": order.astype(np.float64), "argmax": np.argmax(x, axis=1).astype(np.float64),
                                  "windows": np.stack([x[:, 0:3], x[:, 2:5]], axis=1)}})
    writer.write("nn_indexing", spec, NUMPY, cases,
                 "gatherAlongAxis, scatterAlongAxis (add), gather, topK (values and indices), argMax, slidingWindows",
                 "Refused by the layer engine; indices are float blobs cast to int32, results cast back.",
                 tolerance=TOLERANCE)


def nn_elementwise(writer):
    rng = np.random.default_rng(3105)
    builder = nn([("x", (2, 3)), ("y", (2, 3))],
                 ["clamped", "floored", "equal", "greater_equal", "not_equal", "interleaved", "shape"])
    builder.add_clamped_relu("clamped", "x", "clamped", alpha=0.1, beta=0.5)
    builder.add_floor("floor", "x", "floored")
    builder.add_equal("equal", ["x", "y"], "equal")
    builder.add_greater_than("greater_equal", ["x", "y"], "greater_equal", use_greater_than_equal=True)
    builder.add_not_equal("not_equal", ["x"], "not_equal", alpha=0.5)
    builder.add_concat_nd("interleave", ["x", "y"], "interleaved", axis=1, interleave=True)
    builder.add_get_shape("shape", "x", "shape")
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(np.round(rng.standard_normal((2, 3)) * 2) / 2)
        y = f32(np.round(rng.standard_normal((2, 3)) * 2) / 2)
        interleaved = np.stack([x, y], axis=2).reshape(2, 6)
        cases.append({"inputs": {"x": x, "y": y},
                      "outputs": {"clamped": np.minimum(np.where(x >= 0, x, 0.1 * x), 0.5), "floored": np.floor(x),
                                  "equal": (x == y).astype(np.float64), "greater_equal": (x >= y).astype(np.float64),
                                  "not_equal": (x != 0.5).astype(np.float64), "interleaved": interleaved,
                                  "shape": np.array([2.0, 3.0])}})
    writer.write("nn_elementwise", spec, NUMPY, cases,
                 "clampedReLU, floor, equal, greaterEqual, notEqual (with alpha), interleaved concatND, getShape",
                 "Refused by the layer engine; comparisons give 0/1 float blobs.", tolerance=TOLERANCE)


# ---------------------------------------------------------------------------
# cropResize, convolution3d, pooling3d
# ---------------------------------------------------------------------------

def nn_crop_resize(writer):
    rng = np.random.default_rng(3106)
    builder = nn([("x", (1, 1, 2, 5, 6)), ("roi", (2, 1, 4, 1, 1))], ["y"])
    builder.add_crop_resize("crop", ["x", "roi"], "y", target_height=3, target_width=2, mode="ALIGN_ENDPOINTS_MODE",
                            normalized_roi=False, box_indices_mode="CORNERS_HEIGHT_FIRST")
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((1, 1, 2, 5, 6)))
        boxes = np.array([[0.0, 1.0, 4.0, 5.0], [1.0, 0.0, 3.0, 2.0]])
        y = np.zeros((2, 1, 2, 3, 2))
        for n, (y1, x1, y2, x2) in enumerate(boxes):
            for i in range(3):
                for j in range(2):
                    py, px = y1 + i * (y2 - y1) / 2, x1 + j * (x2 - x1) / 1
                    y0, x0 = int(np.floor(py)), int(np.floor(px))
                    y1i, x1i = min(y0 + 1, 4), min(x0 + 1, 5)
                    dy, dx = py - y0, px - x0
                    img = x[0, 0]
                    y[n, 0, :, i, j] = (img[:, y0, x0] * (1 - dy) * (1 - dx) + img[:, y0, x1i] * (1 - dy) * dx
                                        + img[:, y1i, x0] * dy * (1 - dx) + img[:, y1i, x1i] * dy * dx)
        cases.append({"inputs": {"x": x, "roi": boxes.reshape(2, 1, 4, 1, 1)}, "outputs": {"y": y}})
    writer.write("nn_crop_resize", spec, NUMPY, cases,
                 "cropResize of two boxes (pixel corners, height first) to 3 × 2, endpoints aligned",
                 "Refused by the layer engine; lowered to MIL crop_resize.", tolerance=TOLERANCE)


def nn_convolution3d(writer):
    rng = np.random.default_rng(3107)
    shape = (1, 2, 3, 4, 4)
    w = f32(rng.standard_normal((3, 2, 2, 3, 3)) * 0.3)
    b = f32(rng.standard_normal(3) * 0.1)
    builder = nn([("x", shape)], ["y", "pooled"])
    builder.add_convolution3d("conv3d", 2, 3, 2, 3, 3, w, b, True, padding_mode="custom",
                              padding_front=0, padding_back=1, padding_top=1, padding_bottom=1, padding_left=1,
                              padding_right=1, input_name="x", output_name="y")
    builder.add_pooling3d("pool3d", "x", "pooled", "MAX", kernel_depth=1, kernel_height=2, kernel_width=2,
                          stride_depth=1, stride_height=2, stride_width=2)
    spec = finish(builder)
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal(shape))
        padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 1), (1, 1)))
        out = np.zeros((1, 3, 3, 4, 4))
        for o in range(3):
            for d in range(3):
                for i in range(4):
                    for j in range(4):
                        out[0, o, d, i, j] = np.sum(padded[0, :, d:d + 2, i:i + 3, j:j + 3] * w[o]) + b[o]
        pooled = x.reshape(1, 2, 3, 2, 2, 2, 2).max(axis=(4, 6))
        cases.append({"inputs": {"x": x}, "outputs": {"y": out, "pooled": pooled}})
    writer.write("nn_convolution3d", spec, NUMPY, cases,
                 "convolution3d (custom padding, bias) and a 3-D max pooling",
                 "Refused by the layer engine; lowered to MIL conv and max_pool over [N, C, D, H, W].",
                 tolerance=TOLERANCE)


def nn_branch(writer):
    """branch: ifBranch doubles x, elseBranch adds 1; both write y (as a converted MIL cond does)."""
    builder = nn([("x", (2, 3)), ("condition", (1,))], ["y"])
    layer = builder.add_branch("branch", "condition")
    yes = NeuralNetworkBuilder(nn_spec=layer.branch.ifBranch, disable_rank5_shape_mapping=True)
    yes.add_activation("double", "LINEAR", "x", "y", params=[2.0, 0.0])
    no = NeuralNetworkBuilder(nn_spec=layer.branch.elseBranch, disable_rank5_shape_mapping=True)
    no.add_activation("plus_one", "LINEAR", "x", "y", params=[1.0, 1.0])
    spec = finish(builder)
    rng = np.random.default_rng(3108)
    cases = []
    for flag in (1.0, 0.0):
        x = f32(rng.standard_normal((2, 3)))
        cases.append({"inputs": {"x": x, "condition": np.array([flag])}, "outputs": {"y": 2 * x if flag else x + 1}})
    writer.write("nn_branch", spec, NUMPY, cases,
                 "branch: the arm the condition picks writes y",
                 "Lowered to MIL cond, one block per arm.", tolerance=TOLERANCE)


def nn_loop(writer):
    """loop: a for loop of 3 iterations doubling y1, and a while loop doubling y2 while y2[0] < 10."""
    builder = nn([("x", (1,))], ["y1", "y2"])
    builder.add_copy("start1", "x", "y1")
    layer = builder.add_loop("for", max_iterations=3)
    body = NeuralNetworkBuilder(nn_spec=layer.loop.bodyNetwork, disable_rank5_shape_mapping=True)
    body.add_activation("double1", "LINEAR", "y1", "t1", params=[2.0, 0.0])
    body.add_copy("back1", "t1", "y1")
    builder.add_copy("start2", "x", "y2")
    layer = builder.add_loop("while", condition="going")
    condition = NeuralNetworkBuilder(nn_spec=layer.loop.conditionNetwork, disable_rank5_shape_mapping=True)
    condition.add_less_than("test", ["y2"], "going", alpha=10.0)
    body = NeuralNetworkBuilder(nn_spec=layer.loop.bodyNetwork, disable_rank5_shape_mapping=True)
    body.add_activation("double2", "LINEAR", "y2", "t2", params=[2.0, 0.0])
    body.add_copy("back2", "t2", "y2")
    spec = finish(builder)
    cases = []
    for value in (1.5, 0.75, 12.0):
        y2 = value
        while y2 < 10:
            y2 *= 2
        cases.append({"inputs": {"x": np.array([value])}, "outputs": {"y1": np.array([value * 8]), "y2": np.array([y2])}})
    writer.write("nn_loop", spec, NUMPY, cases,
                 "loop: a for loop (maxLoopIterations 3) and a while loop (condition network)",
                 "Lowered to MIL while_loop over the blobs the loop writes that exist before it.", tolerance=TOLERANCE)


def nn_list_loop(writer):
    """A list grown inside a loop, as coremltools' MIL-to-NN converter writes it (its own
    test_control_flow.py TestList while case): make_list of length 1, a while_loop writing
    update * i at index i, so the list blob is a constant before the loop, a branch inside the body
    reallocates it (a concatND copied back over it) and getShape reads its length after the loop."""
    from coremltools.converters.mil.mil import Builder as mb
    import coremltools as ct

    def body(i, num_iters, ls, update):
        value = mb.mul(x=update, y=mb.cast(x=i, dtype="fp32"))
        return mb.add(x=i, y=1), num_iters, mb.list_write(ls=ls, index=i, value=value), update

    def cond(i, num_iters, ls, update):
        return mb.less(x=mb.cast(x=i, dtype="fp32"), y=num_iters)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1,)), mb.TensorSpec(shape=(2,))])
    def program(num_iters, update):
        ls = mb.make_list(init_length=1, elem_shape=(2,))
        _, _, final, _ = mb.while_loop(_cond=cond, _body=body, loop_vars=(0, num_iters, ls, update))
        length = mb.list_length(ls=final)
        return mb.list_gather(ls=final, indices=mb.range_1d(start=0, end=length, step=1), name="gathered")

    spec = ct.convert(program, convert_to="neuralnetwork", skip_model_load=True).get_spec()
    output = spec.description.output[0].name
    rng = np.random.default_rng(2024)
    cases = []
    for count in (3, 1, 0, 5):
        update = f32(rng.standard_normal(2))
        rows = [np.zeros(2)] if count == 0 else [update * i for i in range(count)]
        cases.append({"inputs": {"num_iters": np.array([float(count)]), "update": update},
                      "outputs": {output: np.stack(rows)}})
    writer.write("nn_list_loop", spec, NUMPY, cases,
                 "a list grown in a loop through a branch: every row, the list's length after the loop",
                 "A blob that holds a constant before a loop the loop reassigns: nothing after the loop "
                 "may be folded from the constant.", tolerance=TOLERANCE)


def unseeded_random(writer):
    """Random layers: without a seed refused at load (its results could not be reproduced), with one
    run; without one but with a single-valued distribution, run."""
    builder = nn([("x", (2,))], ["y"])
    builder.add_random_normal_like("noise", "x", "y", mean=0.0, stddev=1.0)
    spec = finish(builder)
    npar.set_metadata(spec, "Lowering fixture: randomNormalLike without a seed")
    npar.write_bytes(os.path.join(writer.dir, "Refused", "nn_random_unseeded.mlmodel"), npar.serialize(spec))
    builder = nn([("x", (2, 3))], ["y"])
    builder.add_random_normal_like("noise", "x", "y", mean=0.0, stddev=1.0, seed=7)
    spec = finish(builder)
    npar.set_metadata(spec, "Lowering fixture: randomNormalLike with seed 7")
    npar.write_bytes(os.path.join(writer.dir, "nn_random_seeded.mlmodel"), npar.serialize(spec))
    # Without a seed, but a distribution of one value: the same numbers whatever the seed.
    builder = nn([("x", (1,))], ["y"])
    builder.add_random_bernoulli_static("coin", "y", [2, 3], prob=1.0)
    spec = finish(builder)
    npar.set_metadata(spec, "Lowering fixture: randomBernoulliStatic with probability 1, no seed")
    npar.write_bytes(os.path.join(writer.dir, "nn_random_single_value.mlmodel"), npar.serialize(spec))


def nn_dynamic_shapes(writer):
    """Layers whose output shape is an input's values (fillDynamic, the dynamic random layers with a
    single-valued distribution, seeded or not) and rangeDynamic with its bounds from inputs: planned at
    prediction, once the values are known; a layer after them runs on their output."""
    builder = nn([("shape", (3,))], ["filled", "doubled", "coin", "normal", "uniform"])
    builder.add_fill_dynamic("fill", "shape", "filled", value=2.5)
    builder.add_activation("double", "LINEAR", "filled", "doubled", params=[2.0, 0.0])
    builder.add_random_bernoulli_dynamic("bernoulli", ["shape"], "coin", prob=1.0)
    builder.add_random_normal_dynamic("gauss", ["shape"], "normal", mean=-1.5, stddev=0.0, seed=4)
    builder.add_random_uniform_dynamic("flat", ["shape"], "uniform", minval=0.25, maxval=0.25)
    spec = finish(builder)
    cases = []
    for shape in ((2, 3, 4), (1, 5, 2), (3, 1, 1)):
        cases.append({"inputs": {"shape": np.array(shape, dtype=np.float64)},
                      "outputs": {"filled": np.full(shape, 2.5), "doubled": np.full(shape, 5.0),
                                  "coin": np.ones(shape), "normal": np.full(shape, -1.5),
                                  "uniform": np.full(shape, 0.25)}})
    writer.write("nn_dynamic_shapes", spec, NUMPY, cases,
                 "fillDynamic, randomBernoulli/Normal/UniformDynamic: the shape is the input's values",
                 "Lowered to MIL fill and random_*; staged plans (three shapes in turn).", tolerance=TOLERANCE)

    builder = nn([("end", (1,)), ("start", (1,)), ("step", (1,))], ["y", "z"])
    builder.add_range_dynamic("from_start", ["end", "start"], "y", step=0.5)
    builder.add_range_dynamic("all_inputs", ["end", "start", "step"], "z")
    spec = finish(builder)
    cases = []
    for end, start, step in ((5.0, 1.0, 1.5), (2.0, -1.5, 0.25), (-3.0, -6.0, 0.75)):
        cases.append({"inputs": {"end": np.array([end]), "start": np.array([start]), "step": np.array([step])},
                      "outputs": {"y": np.arange(start, end, 0.5),
                                  "z": np.arange(start, end, step)}})
    writer.write("nn_range_dynamic", spec, NUMPY, cases,
                 "rangeDynamic: end and start (and step) from inputs",
                 "Lowered to MIL range_1d; staged plans (the length is known at prediction).", tolerance=TOLERANCE)

    # A shape vector computed from getShape (sliced, added to an input's value, concatenated), as a
    # converted list's reallocation computes it: its length, hence fillDynamic's rank, is known at load.
    builder = nn([("x", (4, 3)), ("n", (1,))], ["grown", "reversed"])
    builder.add_get_shape("shape_of_x", "x", "x_shape")
    builder.add_slice_static("rows", "x_shape", "x_rows", begin_ids=[0], end_ids=[1], strides=[1],
                             begin_masks=[False], end_masks=[False])
    builder.add_slice_static("columns", "x_shape", "x_columns", begin_ids=[1], end_ids=[-1], strides=[1],
                             begin_masks=[False], end_masks=[True])
    builder.add_add_broadcastable("plus_n", ["x_rows", "n"], "rows_n")
    builder.add_reduce_max("largest", "n", "n_max", axes=[0], keepdims=False, reduce_all=True)
    builder.add_elementwise("plus_max", ["rows_n", "n_max"], "rows_2n", mode="ADD")
    builder.add_elementwise("plus_one", ["rows_2n"], "rows_n1", mode="ADD", alpha=1.0)
    builder.add_concat_nd("grown_shape", ["rows_n1", "x_columns"], "grown_shape", axis=0)
    builder.add_fill_dynamic("grow", "grown_shape", "grown", value=0.5)
    builder.add_slice_static("reverse", "x_shape", "x_shape_reversed", begin_ids=[0], end_ids=[0], strides=[-1],
                             begin_masks=[True], end_masks=[True])
    builder.add_fill_dynamic("fill_reversed", "x_shape_reversed", "reversed", value=-1.0)
    spec = finish(builder)
    rng = np.random.default_rng(3111)
    cases = [{"inputs": {"x": f32(rng.standard_normal((4, 3))), "n": np.array([float(n)])},
              "outputs": {"grown": np.full((5 + 2 * n, 3), 0.5), "reversed": np.full((3, 4), -1.0)}} for n in (0, 2, 5)]
    writer.write("nn_shape_arithmetic", spec, NUMPY, cases,
                 "fillDynamic of a shape computed from getShape: sliceStatic, addBroadcastable, reduceMax, add, concatND",
                 "Shape-vector lengths tracked through slices and elementwise layers; staged plans.", tolerance=TOLERANCE)

    # Seeded with a real distribution: runs, reproducibly; unseeded: refused at load.
    builder = nn([("shape", (2,))], ["y"])
    builder.add_random_uniform_dynamic("draw", ["shape"], "y", minval=-1.0, maxval=3.0, seed=11)
    spec = finish(builder)
    npar.set_metadata(spec, "Lowering fixture: randomUniformDynamic with seed 11")
    npar.write_bytes(os.path.join(writer.dir, "nn_random_dynamic_seeded.mlmodel"), npar.serialize(spec))
    builder = nn([("shape", (2,))], ["y"])
    builder.add_random_normal_dynamic("noise", ["shape"], "y", mean=0.0, stddev=1.0)
    spec = finish(builder)
    npar.set_metadata(spec, "Lowering fixture: randomNormalDynamic without a seed")
    npar.write_bytes(os.path.join(writer.dir, "Refused", "nn_random_dynamic_unseeded.mlmodel"), npar.serialize(spec))


def nn_categorical(writer):
    """categoricalDistribution with a seed: one-hot probabilities draw their class every time."""
    builder = nn([("x", (2, 3))], ["y"])
    builder.add_categorical_distribution("draw", "x", "y", num_samples=4, is_logits=False, seed=5)
    spec = finish(builder)
    x = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    writer.write("nn_categorical", spec, NUMPY, [{"inputs": {"x": x}, "outputs": {"y": np.array([[2.0] * 4, [0.0] * 4])}}],
                 "categoricalDistribution (probabilities, seeded): one-hot rows give their class",
                 "Lowered to MIL random_categorical.", tolerance=TOLERANCE)


def write_readme(writer):
    lines = ["# Lowering fixtures", "",
             "Made by `Fixtures/network_lowering.py` (run by `Fixtures/generate.py`): neural networks holding "
             "layers the layer engine refuses and the tensor engine's lowering runs, with NumPy float64 "
             "references. Shapes must match exactly, values within each file's tolerance "
             "(`NetworkLoweringTests`).", "", "| file | kind | cases | checks |", "|---|---|---|---|"]
    for name, kind, _, count, checks in writer.entries:
        lines.append("| `%s` | %s | %d | %s |" % (name, kind, count, checks))
    lines += ["", "`nn_random_seeded.mlmodel` (a seeded normal) and `nn_random_single_value.mlmodel` (an unseeded "
              "Bernoulli of probability 1) run; `Refused/nn_random_unseeded.mlmodel` (an unseeded normal) is "
              "refused at load (exit 94). `nn_random_dynamic_seeded.mlmodel` (a seeded uniform whose shape is "
              "its input's values) runs; `Refused/nn_random_dynamic_unseeded.mlmodel` (an unseeded normal, shape "
              "from its input) is refused at load."]
    npar.write_bytes(os.path.join(writer.dir, "README.md"), ("\n".join(lines) + "\n").encode())


# ---------------------------------------------------------------------------
# Channel-first layers on a [Seq, B, C, H, W] blob of two steps (rank-5 mapping)
# ---------------------------------------------------------------------------
def nn_sequence_views(writer):
    """Convolution, ReLU, batchnorm, concat, add, max pooling and multiply on a sequence of two
    steps: the lowering runs them on the blobs' [Seq·B, C, H, W] views (the layer engine takes
    sequence and batch 1 only)."""
    rng = np.random.default_rng(3120)
    builder = NeuralNetworkBuilder([("x", datatypes.Array(2, 1, 3, 5, 5))], [("y", None), ("z", None)])
    weights = f32(rng.standard_normal((4, 3, 3, 3)) * 0.5)  # [C_out, C_in, kH, kW]
    bias = f32(rng.standard_normal(4) * 0.1)
    builder.add_convolution("conv", 3, 4, 3, 3, 1, 1, "same", 1, np.transpose(weights, (2, 3, 1, 0)).astype(np.float32),
                            bias.astype(np.float32), True, input_name="x", output_name="conv")
    builder.add_activation("relu", "RELU", "conv", "relu")
    gamma, beta = f32(rng.random(4) + 0.5), f32(rng.standard_normal(4))
    mean, variance = f32(rng.standard_normal(4)), f32(rng.random(4) + 0.5)
    builder.add_batchnorm("bn", 4, gamma.astype(np.float32), beta.astype(np.float32), mean.astype(np.float32),
                          variance.astype(np.float32), "relu", "bn")
    builder.add_elementwise("cat", ["bn", "x"], "cat", "CONCAT")
    builder.add_elementwise("sum", ["conv", "bn"], "sum", "ADD")
    builder.add_pooling("pool", 2, 2, 1, 1, "MAX", "VALID", "sum", "pool")
    builder.add_elementwise("y", ["pool"], "y", "MULTIPLY", alpha=2.0)
    builder.add_elementwise("z", ["cat"], "z", "ADD", alpha=1.0)
    spec = builder.spec
    epsilon = spec.neuralNetwork.layers[2].batchnorm.epsilon
    cases = []
    for _ in range(2):
        x = f32(rng.standard_normal((2, 1, 3, 5, 5)))
        padded = np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 1), (1, 1)))
        conv = np.zeros((2, 1, 4, 5, 5))
        for i in range(5):
            for j in range(5):
                window = padded[:, :, None, :, i:i + 3, j:j + 3]
                conv[..., i, j] = (window * weights[None, None]).sum(axis=(3, 4, 5)) + bias
        channel = lambda v: v.reshape(1, 1, 4, 1, 1)  # noqa: E731
        bn = (np.maximum(conv, 0) - channel(mean)) / np.sqrt(channel(variance) + epsilon) * channel(gamma) + channel(beta)
        total = conv + bn
        pool = np.zeros((2, 1, 4, 4, 4))
        for i in range(4):
            for j in range(4):
                pool[..., i, j] = total[..., i:i + 2, j:j + 2].max(axis=(-2, -1))
        cases.append({"inputs": {"x": x}, "outputs": {"y": 2 * pool, "z": np.concatenate([bn, x], axis=2) + 1}})
    writer.write("nn_sequence_views", spec, NUMPY, cases,
                 "convolution, activation, batchnorm, concat, add, pooling, multiply on a [2, 1, C, H, W] sequence",
                 "Refused by the layer engine (sequence 2); the lowering runs the layers on [Seq·B, C, H, W] views.",
                 tolerance=TOLERANCE)


def generate(out_dir):
    writer = Writer(out_dir)
    if os.path.isdir(writer.dir):
        shutil.rmtree(writer.dir)
    os.makedirs(os.path.join(writer.dir, "Refused"))
    nn_lstm(writer)
    nn_bidirectional_lstm(writer)
    nn_gru_rnn(writer)
    nn_indexing(writer)
    nn_elementwise(writer)
    nn_crop_resize(writer)
    nn_convolution3d(writer)
    nn_branch(writer)
    nn_loop(writer)
    nn_list_loop(writer)
    nn_categorical(writer)
    unseeded_random(writer)
    nn_dynamic_shapes(writer)
    nn_sequence_views(writer)
    write_readme(writer)
    return writer.entries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    entries = generate(os.path.abspath(args.out))
    print("wrote %d lowering case files to %s" % (len(entries), os.path.join(os.path.abspath(args.out), SUBDIR)))


if __name__ == "__main__":
    sys.exit(main())
