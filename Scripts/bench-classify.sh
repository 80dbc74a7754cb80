#!/usr/bin/env bash
# make bench, image classification: 200 generated 640×480 JPEGs classified
# with the MobileNetV2-shaped bench network, end to end, by modelc (the CLI,
# and the same requests in process) and by a Python pipeline doing the same
# work (Pillow decode + resize, onnxruntime), in the same run.
# Usage: Scripts/bench-classify.sh NETWORK_DIR (from Scripts/bench.sh: mobilenetv2.mlmodelc, .onnx)
set -euo pipefail
cd "$(dirname "$0")/.."

net=$1
work=.build/bench/classify
images="$work/images"
count=${BENCH_CLASSIFY_IMAGES:-200}
cores=$(nproc)
bin=$(swift build -c release --show-bin-path)
.venv/bin/python Scripts/bench_classify.py generate "$images" "$count"

best_ns=""
for _ in 1 2 3; do
    start=$(date +%s%N)
    "$bin/modelc" classify "$net/mobilenetv2.mlmodelc" "$images" --json > "$work/classify.jsonl"
    elapsed=$(( $(date +%s%N) - start ))
    if [ -z "$best_ns" ] || [ "$elapsed" -lt "$best_ns" ]; then best_ns=$elapsed; fi
done
best_cli=$(printf '%d.%09d' $((best_ns / 1000000000)) $((best_ns % 1000000000)))
lines=$(wc -l < "$work/classify.jsonl")
[ "$lines" = "$count" ] || { echo "modelc classify printed $lines lines for $count images" >&2; exit 1; }
"$bin/ModelcBenchmarks" classify "$net/mobilenetv2.mlmodelc" "$images" "$cores" > "$work/modelc.txt"
.venv/bin/python Scripts/bench_classify.py run "$images" "$net/mobilenetv2.onnx" "$cores" > "$work/python.txt"

echo
echo "classify: $count generated 640×480 JPEGs, MobileNetV2-shaped classifier, centre crop to 224×224, top 5; $cores threads"
.venv/bin/python Scripts/bench_classify.py report "$work/modelc.txt" "$work/python.txt" "$best_cli"
