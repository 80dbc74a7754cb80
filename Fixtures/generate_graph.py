#!/usr/bin/env python3
"""Generate the ML programs that `modelc inspect --graph` is tested on.

Usage:
    generate_graph.py [--out DIR]    write ControlFlowProgram.mlpackage (cond and
                                     while_loop blocks) and LongProgram.mlpackage
                                     (1,000 operations in a chain with side
                                     branches) into DIR (default Fixtures/Graph)

Deterministic like generate.py (whose package finishing it reuses): fixed
seeds, stable identifiers, no dates.
"""

import argparse
import os
import sys

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types as mil_types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402


def control_flow_program():
    rng = np.random.default_rng(4001)
    weight = rng.standard_normal((4, 4)).astype(np.float32) * 0.1

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4)), mb.TensorSpec(shape=(1,), dtype=mil_types.int32)],
                opset_version=ct.target.iOS17)
    def prog(x, steps):
        positive = mb.greater(x=mb.reduce_sum(x=x, name="total"), y=0.0, name="is_positive")

        def then_branch():
            return mb.relu(x=mb.linear(x=x, weight=weight, name="dense_then"), name="relu_then")

        def else_branch():
            return mb.mul(x=x, y=-1.0, name="negate")

        chosen = mb.cond(pred=positive, _true_fn=then_branch, _false_fn=else_branch, name="choose")
        zero = mb.fill(shape=[1], value=0, name="zero")

        def keep_going(i, value):
            return mb.less(x=i, y=steps, name="below_steps")

        def step(i, value):
            return mb.add(x=i, y=1, name="next_i"), mb.tanh(x=mb.mul(x=value, y=2.0, name="double"), name="squash")

        _, looped = mb.while_loop(_cond=keep_going, _body=step, loop_vars=(zero, chosen), name="repeat")
        return mb.softmax(x=looped, axis=-1, name="probs")

    return ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                      minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32)


def long_program(operations=1000):
    """`operations` operations: a chain of small dense blocks with skip
    connections every few steps, so the layout has more than a line to do."""
    rng = np.random.default_rng(4002)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=ct.target.iOS15)
    def prog(x):
        h = x
        skip = x
        count = 0
        index = 0
        while count < operations - 1:
            weight = rng.standard_normal((4, 4)).astype(np.float32) * 0.1
            h = mb.linear(x=h, weight=weight, name="dense%d" % index)
            h = mb.relu(x=h, name="relu%d" % index)
            count += 2
            if index % 4 == 3 and count < operations - 1:
                h = mb.add(x=h, y=skip, name="skip%d" % index)
                skip = h
                count += 1
            index += 1
        return mb.softmax(x=h, axis=-1, name="probs")

    return ct.convert(prog, convert_to="mlprogram", skip_model_load=True,
                      minimum_deployment_target=ct.target.iOS15, compute_precision=ct.precision.FLOAT32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, "Graph"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    generate.save_ml_package(control_flow_program(), os.path.join(args.out, "ControlFlowProgram.mlpackage"))
    generate.save_ml_package(long_program(), os.path.join(args.out, "LongProgram.mlpackage"))


if __name__ == "__main__":
    main()
