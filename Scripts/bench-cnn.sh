#!/usr/bin/env bash
# make bench, CNN section (also runnable alone): modelc's tensor engine
# against PyTorch and onnxruntime on EfficientNet-B0, DenseNet-121,
# DeepLabV3-MobileNetV3-Large, LRASPP-MobileNetV3-Large, ResNet-18 and
# MobileNetV2 from torchvision with seeded weights (Scripts/bench_cnn.py).
# Latency per input at 1 and 2 threads and peak RSS, as ratios measured in
# this run. Exits non-zero only when modelc's and onnxruntime's outputs disagree.
#
# Needs the zoo venv (torch, torchvision, coremltools, onnxruntime; `make
# zoo` makes it) and a release ModelcBenchmarks; the models are built once into
# .build/bench-cnn (a few minutes; reruns reuse them). BENCH_CNN_MODELS picks
# some of them (names as in bench_cnn.py).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${ZOO_VENV:-.venv-zoo}
work=.build/bench-cnn
runs=${BENCH_CNN_RUNS:-20}
# The engines alternate this many times per model and thread count (medians over the rounds).
export BENCH_CNN_ROUNDS=${BENCH_CNN_ROUNDS:-5}
if [ ! -x "$venv/bin/python" ]; then
    echo "bench-cnn: $venv is missing; run make bench (or make zoo) first" >&2
    exit 1
fi
# Built every time (a no-op when nothing changed): a binary left from before a change would be measured otherwise.
Scripts/swift.sh build -c release --product ModelcBenchmarks
bin=$(Scripts/swift.sh build -c release --show-bin-path)
mkdir -p "$work"
# shellcheck disable=SC2086
nice "$venv/bin/python" Scripts/bench_cnn.py build "$work" ${BENCH_CNN_MODELS:-}
# shellcheck disable=SC2086
"$venv/bin/python" Scripts/bench_cnn.py run "$work" "$bin/ModelcBenchmarks" "$runs" ${BENCH_CNN_MODELS:-}
