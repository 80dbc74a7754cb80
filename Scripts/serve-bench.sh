#!/usr/bin/env bash
# make bench, serving: modelc serve vs Seldon MLServer (the same 100-tree forest, mlserver-sklearn) and
# vs onnxruntime behind FastAPI/uvicorn (the same MobileNetV2-shaped network), one server at a time,
# the same client and requests (Scripts/serve_bench.py). Goal: at least 2x MLServer's throughput at
# equal or lower p99. SERVE_BENCH_CLIENTS (16), SERVE_BENCH_SECONDS (15) change the run. Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
bench_python=${SERVE_BENCH_PYTHON:-.venv-serve-bench/bin/python}
classic=.build/bench/classic
network=.build/bench/network
if [ ! -f "$classic/forest.pickle" ]; then "$python" Scripts/bench_classic.py make "$classic" >/dev/null; fi
if [ ! -f "$network/mobilenetv2.onnx" ]; then "$python" Scripts/bench_network.py generate "$network" >/dev/null; fi
modelc=$(swift build -c release --show-bin-path)/modelc
echo "== serving: modelc serve vs MLServer and onnxruntime (requests/s, latency)"
"$bench_python" Scripts/serve_bench.py "$modelc" "$classic" "$network" .build/bench/serve \
    "${SERVE_BENCH_CLIENTS:-16}" "${SERVE_BENCH_SECONDS:-15}"
