#!/usr/bin/env bash
# make bench, transformers section (also runnable alone): modelc's tensor
# engine against onnxruntime on a BERT-base-shaped encoder (sequence 128), a
# GPT-2-small-shaped decoder (64 tokens, and one token's step with its key/value
# caches held in state) and a ViT-S/16-shaped classifier, all
# from transformers configs with seeded weights (Scripts/bench_transformers.py).
# Latency per input at 1 and 2 threads and peak RSS, as ratios measured in
# this run, the two engines alternating BENCH_TRANSFORMER_ROUNDS times (5). Exits non-zero only when the two engines' outputs disagree.
#
# Needs the zoo venv (torch, transformers, coremltools, onnxruntime; `make
# zoo` makes it) and a release ModelcBenchmarks; the models are built once into
# .build/bench-transformers (several minutes; reruns reuse them).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${ZOO_VENV:-.venv-zoo}
work=.build/bench-transformers
runs=${BENCH_TRANSFORMER_RUNS:-10}
# The engines alternate this many times per model and thread count (medians over the rounds).
rounds=${BENCH_TRANSFORMER_ROUNDS:-5}
if [ ! -x "$venv/bin/python" ]; then
    echo "bench-transformers: $venv is missing; run make bench (or make zoo) first" >&2
    exit 1
fi
# Built every time (a no-op when nothing changed): a binary left from before a change would be measured otherwise.
Scripts/swift.sh build -c release --product ModelcBenchmarks
bin=$(Scripts/swift.sh build -c release --show-bin-path)
mkdir -p "$work"
nice "$venv/bin/python" Scripts/bench_transformers.py build "$work"
"$venv/bin/python" Scripts/bench_transformers.py run "$work" "$bin/ModelcBenchmarks" "$runs" "$rounds"
