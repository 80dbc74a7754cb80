#!/usr/bin/env python3
"""Per-operation overhead bench: micro models of many tiny operations, where a prediction's time is
the engine's fixed cost per step rather than its kernels.

Usage:
    bench_overhead.py build DIR     write micro_nn.mlmodel (a neural network) and micro_program.mlpackage
                                    (an ML program) with their parity case files (DIR/*.json) into DIR

Time them with `ModelcBenchmarks programs RUNS [--threads N] DIR/*.json` (the median latency of RUNS
predictions after three warm-up ones). micro_nn: a 16-channel 4x4 image through 40 blocks of a 1x1
convolution with ReLU, a 3x3 max pool (stride 1, same padding), a per-channel scale and a residual
add (160 layers). micro_program: a [1, 64] vector through 50 rounds of add, mul, relu and maximum with a
constant (200 operations, none with a transcendental function whose own time would hide the overhead).
"""

import json
import os
os.environ.setdefault("TQDM_DISABLE", "1")
import sys

import numpy as np

BLOCKS = 40
CHANNELS = 16
SIDE = 4
ROUNDS = 50


def micro_nn(directory):
    import coremltools as ct
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    rng = np.random.default_rng(20)
    shape = (CHANNELS, SIDE, SIDE)
    builder = NeuralNetworkBuilder([("x", datatypes.Array(*shape))], [("y", datatypes.Array(*shape))])
    previous = "x"
    for block in range(BLOCKS):
        weights = (rng.standard_normal((CHANNELS, CHANNELS, 1, 1)) / CHANNELS).astype(np.float32)
        builder.add_convolution(f"conv{block}", kernel_channels=CHANNELS, output_channels=CHANNELS, height=1, width=1,
                                stride_height=1, stride_width=1, border_mode="valid", groups=1, W=weights,
                                b=rng.standard_normal(CHANNELS).astype(np.float32) * 0.1, has_bias=True,
                                input_name=previous, output_name=f"c{block}")
        builder.add_activation(f"relu{block}", "RELU", f"c{block}", f"r{block}")
        builder.add_pooling(f"pool{block}", height=3, width=3, stride_height=1, stride_width=1, layer_type="MAX",
                            padding_type="SAME", input_name=f"r{block}", output_name=f"p{block}")
        builder.add_scale(f"scale{block}", W=rng.uniform(0.5, 1.0, CHANNELS).astype(np.float32), b=None, has_bias=False,
                          input_name=f"p{block}", output_name=f"s{block}", shape_scale=[CHANNELS])
        output = "y" if block == BLOCKS - 1 else f"a{block}"
        builder.add_elementwise(f"add{block}", [previous, f"s{block}"], output, mode="ADD")
        previous = output
    model = ct.models.MLModel(builder.spec)
    model.save(os.path.join(directory, "micro_nn.mlmodel"))
    x = rng.standard_normal(shape).astype(np.float32)
    case(directory, "micro_nn", "micro_nn.mlmodel", {"x": x.tolist()})


def micro_program(directory):
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb

    rng = np.random.default_rng(21)
    constants = [rng.uniform(0.5, 1.0, (1, 64)).astype(np.float32) for _ in range(3 * ROUNDS)]

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 64))])
    def program(x):
        value = x
        for index in range(ROUNDS):
            value = mb.add(x=value, y=constants[3 * index] - 0.75)
            value = mb.mul(x=value, y=constants[3 * index + 1])
            value = mb.relu(x=value)
            value = mb.maximum(x=value, y=constants[3 * index + 2] - 0.9)
        return value

    model = ct.convert(program, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                       minimum_deployment_target=ct.target.iOS16)
    model.save(os.path.join(directory, "micro_program.mlpackage"))
    x = rng.standard_normal((1, 64)).astype(np.float32)
    case(directory, "micro_program", "micro_program.mlpackage", {"x": x.tolist()})


def case(directory, name, model, inputs):
    with open(os.path.join(directory, name + ".json"), "w") as file:
        json.dump({"model": model, "cases": [{"inputs": inputs}]}, file)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    micro_nn(sys.argv[2])
    micro_program(sys.argv[2])


if __name__ == "__main__":
    main()
