#!/usr/bin/env python3
"""Where coremltools' fp32 ML-program failures on fp16 data come from (a diagnostic, not a count).

Usage (run like Scripts/conformance.py, in the zoo venv, INCLUDE_MIL_FP32_UNIT_TESTS=1 and
MODELC_LIBRARY set; from the repository root so that coremltools' conftest gives readable ids):
    conformance_fp16_data.py grid    PYTEST ARGS   test ids or files
    conformance_fp16_data.py program PYTEST ARGS   (rnn and lstm tests)

The iOS17/iOS18 tests with dtype float16 store fp16 data and weights in programs converted at
fp32 precision and compare with references computed from the unrounded values (or rounded to
fp16 afterwards), at the fp32 tolerance (atol 1e-4, rtol 1e-5). Two ways to take that out:

grid: the tests' random data (np.random.rand on a 2^-10 grid, randn, torch.randn and torch
    modules' parameters rounded to fp16) are drawn so that casting them to fp16 loses nothing:
    the test's own reference is then computed from the values the model stores. An fp16 output,
    or one the test rounds to fp16 (an fp16 reference array), may differ by half an fp16 ulp more. A case failing here is modelc's error
    (or, for tests whose reference sums fp16 constants in fp16 or in torch's fp32, still the
    reference's: see `program`).
program: recomputes rnn / lstm in float64 from the converted program's own stored constants and
    the inputs fed, and prints modelc's and the test reference's distance to it ("DIAG" lines);
    the test's own comparison is replaced by this one (nothing fails).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import modelc.coremltools  # noqa: E402

modelc.coremltools.enable(pretend_macos=True)
import coremltools as ct  # noqa: E402,F401

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
if MODE not in ("grid", "program"):
    sys.exit(__doc__)


if MODE == "grid":
    import torch

    _rand, _randn, _trandn, _state_dict = np.random.rand, np.random.randn, torch.randn, torch.nn.Module.state_dict
    np.random.rand = lambda *s: np.floor(_rand(*s) * 1024) / 1024
    np.random.randn = lambda *s: np.asarray(_randn(*s)).astype(np.float16).astype(np.float64)
    torch.randn = lambda *a, **k: (lambda t: t.half().to(t.dtype))(_trandn(*a, **k))

    def state_dict(self, *a, **k):
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(p.half().float())
        return _state_dict(self, *a, **k)
    torch.nn.Module.state_dict = state_dict

    def compare_grid(mlmodel, input_key_values, expected_outputs, dtype="fp32", atol=1e-4, rtol=1e-5,
                     also_compare_shapes=True, state=None, allow_mismatch_ratio=0.0):
        pred = mlmodel.predict(input_key_values, state) if state is not None else mlmodel.predict(input_key_values)
        if expected_outputs is None:
            return pred
        if dtype == "fp16":
            atol, rtol = max(atol * 100.0, 5e-1), max(rtol * 100.0, 5e-2)
        for name, expected in expected_outputs.items():
            got = pred[name]
            if isinstance(got, np.ndarray):
                exp = np.asarray(expected, dtype=np.float64)
                slack = 0.0
                if got.dtype == np.float16 or np.asarray(expected).dtype == np.float16:
                    slack = np.spacing(np.abs(exp).astype(np.float16)).astype(np.float64) / 2
                err = np.abs(got.astype(np.float64) - exp)
                bad = err > atol + rtol * np.abs(exp) + slack
                if bad.mean() > allow_mismatch_ratio:
                    raise AssertionError("stored-value reference: %d / %d off, max excess %.3g (out dtype %s, max err %.3g)" % (
                        bad.sum(), bad.size, (err - (atol + rtol * np.abs(exp) + slack)).max(), got.dtype, err.max()))
        return pred


sig = lambda v: 1 / (1 + np.exp(-v))
ACT = {"sigmoid": sig, "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}
f64 = lambda v: None if v is None else np.asarray(v.val if hasattr(v, "val") else v).astype(np.float64)

def lstm_dir(X, h, c, wi, wh, b, p, order, acts, clip):
    ra, ca, a = acts
    H = h.shape[-1]
    ys = {}
    for t in order:
        g = X[t] @ wi.T + h @ wh.T + (b if b is not None else 0)
        gi, gf, go, gz = np.split(g, 4, axis=-1)
        if p is not None:
            pi, pf, po = np.split(p, 3)
            gi = gi + c * pi; gf = gf + c * pf
        i, f, z = ACT[ra](gi), ACT[ra](gf), ACT[ca](gz)
        c = f * c + i * z
        if clip is not None:
            c = np.clip(c, -clip, clip)
        if p is not None:
            go = go + c * po
        o = ACT[ra](go)
        h = o * ACT[a](c)
        ys[t] = h
    return np.stack([ys[t] for t in sorted(ys)]), h, c

def reference(op, feeds):
    X = f64(feeds[op.x.name])
    S = X.shape[0]
    h0 = f64(feeds[op.initial_h.name])
    if op.op_type == "rnn":
        order = range(S) if op.direction.val == "forward" else reversed(range(S))
        wi, wh, b = f64(op.weight_ih), f64(op.weight_hh), f64(op.bias)
        h, ys = h0, []
        for t in order:
            h = ACT[op.activation.val](X[t] @ wi.T + h @ wh.T + (b if b is not None else 0))
            ys.append(h)
        # A single direction gives its sequence in the order it ran (reverse: last step first).
        return [np.stack(ys) if op.output_sequence.val else h[None], h]
    if op.op_type == "lstm":
        c0 = f64(feeds[op.initial_c.name])
        acts = (op.recurrent_activation.val, op.cell_activation.val, op.activation.val)
        clip = None if op.clip is None else float(op.clip.val)
        d = op.direction.val
        H = f64(op.weight_hh).shape[1]
        if d == "bidirectional":
            fy, fh, fc = lstm_dir(X, h0[:, :H], c0[:, :H], f64(op.weight_ih), f64(op.weight_hh), f64(op.bias), f64(op.peephole), range(S), acts, clip)
            by, bh, bc = lstm_dir(X, h0[:, H:], c0[:, H:], f64(op.weight_ih_back), f64(op.weight_hh_back), f64(op.bias_back), f64(op.peephole_back), reversed(range(S)), acts, clip)
            y = np.concatenate([fy, by], -1)
            last = np.concatenate([fy[-1], by[0]], -1)[None]
            return [y if op.output_sequence.val else last, np.concatenate([fh, bh], -1), np.concatenate([fc, bc], -1)]
        order = range(S) if d == "forward" else reversed(range(S))
        y, h, c = lstm_dir(X, h0, c0, f64(op.weight_ih), f64(op.weight_hh), f64(op.bias), f64(op.peephole), order, acts, clip)
        y = y if d == "forward" else y[::-1]
        return [y if op.output_sequence.val else h[None], h, c]
    raise NotImplementedError(op.op_type)

def compare_program(mlmodel, input_key_values, expected_outputs, dtype="fp32", atol=1e-4, rtol=1e-5,
                    also_compare_shapes=True, state=None, allow_mismatch_ratio=0.0):
    pred = mlmodel.predict(input_key_values)
    ops = [op for op in mlmodel._mil_program.functions["main"].operations if op.op_type in ("lstm", "rnn", "gru")]
    if len(ops) != 1 or ops[0].op_type == "gru":
        print("DIAG skip", [op.op_type for op in mlmodel._mil_program.functions["main"].operations]); return pred
    op = ops[0]
    refs = reference(op, input_key_values)
    lines = []
    for var, ref in zip(op.outputs, refs):
        name = [n for n in pred if n == var.name][0]
        got = pred[name].astype(np.float64)
        slack = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64) / 2 if pred[name].dtype == np.float16 else 0
        err = np.abs(got - ref.reshape(got.shape))
        bad = err > atol + rtol * np.abs(ref.reshape(got.shape)) + slack
        test_err = np.abs(np.asarray(expected_outputs[name], np.float64).reshape(got.shape) - ref.reshape(got.shape)).max()
        lines.append("%s: modelc-stored max %.3g (%d/%d beyond tol+half ulp), test reference-stored max %.3g" % (name, err.max(), bad.sum(), bad.size, test_err))
    print("DIAG", op.op_type, "|", "; ".join(lines))
    return pred


class Patch:
    def pytest_collection_finish(self, session):
        import coremltools.converters.mil.mil.ops.tests.testing_utils as tu
        tu.compare_backend = compare_grid if MODE == "grid" else compare_program


import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-s", "-rf", "-p", "no:cacheprovider", "-W", "ignore"] + sys.argv[2:], plugins=[Patch()]))
