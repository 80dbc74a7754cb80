#!/usr/bin/env bash
# make bench, per-operation overhead section (also runnable alone): the tensor
# engine's fixed cost per planned step, on models whose operations are tiny
# (Scripts/bench_overhead.py: a 160-layer neural network on a 16-channel 4x4
# image, a 200-operation ML program on 64 values) and on the small zoo
# networks (Fixtures/Parity/Zoo/*_nn, 32x32 inputs). Prints the median
# latency of each at 1 and 2 threads (ModelcBenchmarks programs); the per-step
# cost is the micro models' latency over their step count. No baseline: the
# engine this was once compared with (the layer engine) is gone; the numbers
# before and after each change are in docs/measurements/2026-12-02-per-operation-overhead.md.
#
# Needs the shared venv (coremltools) and a release ModelcBenchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VENV:-.venv}
work=.build/bench-overhead
runs=${BENCH_OVERHEAD_RUNS:-500}
# Built every time (a no-op when nothing changed): a binary left from before a change would be measured otherwise.
Scripts/swift.sh build -c release --product ModelcBenchmarks
bin=$(Scripts/swift.sh build -c release --show-bin-path)
if [ ! -e "$work/micro_program.json" ]; then
    nice "$venv/bin/python" Scripts/bench_overhead.py build "$work"
fi
cases=("$work"/micro_nn.json "$work"/micro_program.json Fixtures/Parity/Zoo/*_nn.json)
for threads in 1 2; do
    echo "per-operation overhead, $threads thread(s), median of $runs predictions (ms)"
    "$bin/ModelcBenchmarks" programs "$runs" --threads "$threads" "${cases[@]}"
done
