#!/usr/bin/env bash
# make bench, object detection: 200 generated 640×480 gray JPEGs (one blob
# each) run through the detector fixture (a network + NonMaximumSuppression)
# by `modelc detect` (the CLI, process start and model open included) and by
# a Python program doing the same (Pillow, onnxruntime, NumPy NMS; Scripts/bench_detect.py),
# in the same run, on every core.
set -euo pipefail
cd "$(dirname "$0")/.."

work=.build/bench/detect
images="$work/images"
count=${BENCH_DETECT_IMAGES:-200}
cores=$(nproc)
bin=$(swift build -c release --show-bin-path)
python=${PYTHON_BIN:-.venv/bin/python}
"$python" Scripts/bench_detect.py generate "$images" "$count"
rm -rf "$work/Detector.mlmodelc"
"$bin/modelc" compile Fixtures/Models/Detector.mlmodel "$work/Detector.mlmodelc" >/dev/null

best_modelc=""
best_python=""
for _ in 1 2 3; do
    start=$(date +%s%N)
    "$bin/modelc" detect "$work/Detector.mlmodelc" "$images" --crop-and-scale scale-fill --json > "$work/modelc.jsonl"
    elapsed=$(( $(date +%s%N) - start ))
    if [ -z "$best_modelc" ] || [ "$elapsed" -lt "$best_modelc" ]; then best_modelc=$elapsed; fi
    "$python" Scripts/bench_detect.py run "$images" "$work/detector.onnx" "$cores" > "$work/python-run.txt"
    seconds=$(awk '/total_s/ {print $2}' "$work/python-run.txt")
    if [ -z "$best_python" ] || python3 -c "import sys; sys.exit(0 if $seconds < $best_python else 1)"; then
        best_python=$seconds
        cp "$work/python-run.txt" "$work/python.txt"
    fi
done
best_inprocess=""
for _ in 1 2 3; do
    "$bin/ModelcBenchmarks" detect "$work/Detector.mlmodelc" "$images" "$cores" > "$work/inprocess-run.txt"
    seconds=$(awk '/total_s/ {print $2}' "$work/inprocess-run.txt")
    if [ -z "$best_inprocess" ] || python3 -c "import sys; sys.exit(0 if $seconds < $best_inprocess else 1)"; then
        best_inprocess=$seconds
        cp "$work/inprocess-run.txt" "$work/inprocess.txt"
    fi
done
lines=$(wc -l < "$work/modelc.jsonl")
[ "$lines" = "$count" ] || { echo "modelc detect printed $lines lines for $count images" >&2; exit 1; }
modelc_s=$(printf '%d.%09d' $((best_modelc / 1000000000)) $((best_modelc % 1000000000)))

echo
echo "detect: $count generated 640×480 gray JPEGs, detector fixture (64×64 input, scale to fill, NMS); $cores threads; best of 3"
"$python" Scripts/bench_detect.py report "$modelc_s" "$work/inprocess.txt" "$work/python.txt" "$work/modelc.jsonl" "$work/python.jsonl"
