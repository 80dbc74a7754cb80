#!/usr/bin/env bash
# make bench: speed and memory of modelc against baselines measured in the
# same run, printed as ratios. Not a test: nothing here passes or fails.
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/cpu-summary.sh
work=.build/bench
mkdir -p "$work"
runs=${BENCH_RUNS:-3}
large="$work/large.mlmodel"
if [ ! -f "$large" ]; then
    echo "generating a large float32 network with the fixture script (once)…" >&2
    .venv/bin/python Fixtures/generate.py --large "$large" --megabytes "${BENCH_MEGABYTES:-80}" >/dev/null
fi
# A large float32 ML program (.mlpackage): its weight.bin is already MIL blob
# storage, which compile copies in the kernel.
program="$work/large-program.mlpackage"
if [ ! -d "$program" ]; then
    echo "generating a large float32 ML program with the fixture script (once)…" >&2
    .venv/bin/python Fixtures/generate.py --large-program "$program" --megabytes "${BENCH_MEGABYTES:-80}" >/dev/null
fi
# The same structure as the large network (20 layers), 1 MB of weights: opening
# both measures what weight bytes cost, not what more tensors cost.
small="$work/small-20-layers.mlmodel"
if [ ! -f "$small" ]; then
    .venv/bin/python Fixtures/generate.py --large "$small" --megabytes 1 --layers 20 >/dev/null
fi
bin=$(swift build -c release --show-bin-path)
modelc=$bin/modelc
bytes=$(stat -c %s "$large")

# The fastest of $runs runs of a command, in seconds.
fastest() {
    local best=""
    for _ in $(seq "$runs"); do
        rm -rf "$work/out" "$work/out.mlmodelc"
        local start end
        start=$(date +%s.%N)
        "$@" >/dev/null
        end=$(date +%s.%N)
        best=$(python3 -c "b='$best'; t=$end-$start; print(t if not b else min(float(b), t))")
    done
    echo "$best"
}
# Peak resident memory of a command, in bytes.
peak() {
    rm -rf "$work/out" "$work/out.mlmodelc"
    /usr/bin/time -f %M -o "$work/peak" "$@" >/dev/null
    echo $(( $(cat "$work/peak") * 1024 ))
}
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
mb() { python3 -c "print(f'{$1/1048576:.1f} MB')"; }

cat "$large" > /dev/null   # the source in the page cache for every contender
copy=$(fastest cp "$large" "$work/out")
copy_sync=$(fastest sh -c "cp '$large' '$work/out' && sync '$work/out'")
compile=$(fastest "$modelc" compile "$large" "$work/out.mlmodelc")
compile_peak=$(peak "$modelc" compile "$large" "$work/out.mlmodelc")
fp16=$(fastest "$modelc" compile --fp16 "$large" "$work/out.mlmodelc")

echo "compile: $(mb "$bytes") float32 network, fastest of $runs runs"
printf '  %-28s %8.3f s\n' "cp" "$copy" "cp + fsync" "$copy_sync" "modelc compile" "$compile" "modelc compile --fp16" "$fp16"
echo "  compile / cp                 $(ratio "$compile" "$copy")×"
echo "  compile / (cp + fsync)       $(ratio "$compile" "$copy_sync")×   (target ≤ 2×)"
echo "  peak memory                  $(mb "$compile_peak") = $(ratio "$compile_peak" "$bytes")× the file   (target ≤ 1.5×)"

# The ML program: cp -r of the package is the baseline.
program_bytes=$(du -sb "$program" | cut -f1)
program_weights="$program/Data/com.apple.CoreML/weights/weight.bin"
cat "$program_weights" > /dev/null
copy=$(fastest cp -r "$program" "$work/out")
copy_sync=$(fastest sh -c "cp -r '$program' '$work/out' && sync '$work/out/Data/com.apple.CoreML/weights/weight.bin'")
compile=$(fastest "$modelc" compile "$program" "$work/out.mlmodelc")
compile_peak=$(peak "$modelc" compile "$program" "$work/out.mlmodelc")

echo
echo "compile: $(mb "$program_bytes") float32 ML program, fastest of $runs runs"
printf '  %-28s %8.3f s\n' "cp -r" "$copy" "cp -r + fsync" "$copy_sync" "modelc compile" "$compile"
echo "  compile / cp                 $(ratio "$compile" "$copy")×"
echo "  compile / (cp + fsync)       $(ratio "$compile" "$copy_sync")×   (target ≤ 2×)"
echo "  peak memory                  $(mb "$compile_peak") = $(ratio "$compile_peak" "$program_bytes")× the package   (target ≤ 1.5×)"

echo
"$modelc" compile "$small" "$work/small.mlmodelc" >/dev/null
"$modelc" compile "$large" "$work/large.mlmodelc" >/dev/null
"$bin/ModelcBenchmarks" open "$work/small.mlmodelc" "$work/large.mlmodelc" "$large"

# inspect --graph: Graphviz in process against the dot program (issue 24).
echo
"$bin/ModelcBenchmarks" graph Fixtures/Graph/LongProgram.mlpackage Fixtures/Graph/ControlFlowProgram.mlpackage Fixtures/Models/ImageClassifier.mlmodel

Scripts/bench-fetch.sh

Scripts/bench-classic.sh
# A MobileNetV2-shaped classifier run by modelc and by onnxruntime on the same
# weights and the same image (Scripts/bench_network.py). Every measurement is a
# process of its own (its peak RSS from /usr/bin/time); the engines alternate,
# and each one's best of $rounds rounds is reported.
echo
net="$work/network"
.venv/bin/python Scripts/bench_network.py generate "$net"
"$modelc" compile "$net/mobilenetv2.mlmodel" "$net/mobilenetv2.mlmodelc" >/dev/null
rounds=${BENCH_NETWORK_ROUNDS:-3}
predictions=${BENCH_NETWORK_RUNS:-30}
cores=$(nproc)
rm -f "$net"/result-*
# measure ENGINE THREADS ROUND [--probabilities FILE]
measure() {
    local engine=$1 threads=$2 out="$net/result-$1-$2-$3"
    shift 3
    local command=("$bin/ModelcBenchmarks" network "$net/mobilenetv2.mlmodelc" "$net/image.rgb")
    [ "$engine" = onnxruntime ] && command=(.venv/bin/python Scripts/bench_network.py onnxruntime "$net")
    /usr/bin/time -f %M -o "$out.peak" "${command[@]}" "$threads" "$predictions" "$@" > "$out"
    echo "peak_rss_kb $(cat "$out.peak")" >> "$out"
    rm "$out.peak"
}
for round in $(seq "$rounds"); do
    for threads in $(printf '%s\n' 1 "$cores" | sort -un); do
        if [ "$round" = 1 ] && [ "$threads" = 1 ]; then
            measure onnxruntime 1 1 --probabilities "$net/onnxruntime.f32"
            measure modelc 1 1 --probabilities "$net/modelc.f32"
        else
            measure onnxruntime "$threads" "$round"
            measure modelc "$threads" "$round"
        fi
    done
done
echo "network: MobileNetV2-shaped classifier, 224×224 RGB, float32, random weights; median of $predictions predictions, best of $rounds rounds"
.venv/bin/python Scripts/bench_network.py compare "$net/onnxruntime.f32" "$net/modelc.f32" || true
.venv/bin/python Scripts/bench_network.py report "$net"/result-*
echo "  (targets: latency at 1 thread ≤ 1.0×, peak RSS ≤ 1.0×; onnxruntime's process holds the Python interpreter)"

# Image classification end to end against Pillow + onnxruntime (issue 13).
Scripts/bench-classify.sh "$net"
# Object detection end to end against Pillow + onnxruntime + NumPy NMS (issue 22).
Scripts/bench-detect.sh
# Training: an image classifier on 1,000 generated images (four colour labels,
# Scripts/bench_training.py) with the MobileNetV2-shaped network above as the
# base. modelc's feature extraction (an empty cache, then a second run from the
# cache) and fit are timed in-process; scikit-learn's LogisticRegression
# (lbfgs) fits the same features with the same objective in the same run.
echo
training="$work/training"
mkdir -p "$training/work"
.venv/bin/python Scripts/bench_training.py generate "$training/images" 1000
l2=${BENCH_TRAINING_L2:-0.01}
iterations=${BENCH_TRAINING_ITERATIONS:-100}
"$bin/ModelcBenchmarks" training "$net/mobilenetv2.mlmodel" "$training/images" "$training/work" "$l2" "$iterations" > "$training/modelc.txt"
.venv/bin/python Scripts/bench_training.py sklearn "$training/work" "$l2" "$iterations" 2>/dev/null > "$training/sklearn.txt"
value() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
echo "training: 1,000 generated 128×128 images, 4 labels, MobileNetV2-shaped base (1280 features), λ = $l2, 10% validation"
printf '  %-34s %8.2f s   (%s images/s)\n' "feature extraction (empty cache)" "$(value "$training/modelc.txt" extraction_seconds)" \
    "$(python3 -c "print(f'{$(value "$training/modelc.txt" images)/$(value "$training/modelc.txt" extraction_seconds):.0f}')")"
printf '  %-34s %8.2f s\n' "feature extraction (from the cache)" "$(value "$training/modelc.txt" cached_extraction_seconds)"
printf '  %-34s %8.3f s   %3d iterations, objective %.6f, validation accuracy %.4f\n' \
    "fit: modelc (liblbfgs)" "$(value "$training/modelc.txt" fit_seconds)" "$(value "$training/modelc.txt" iterations)" \
    "$(value "$training/modelc.txt" loss)" "$(value "$training/modelc.txt" validation_accuracy)" \
    "fit: scikit-learn (lbfgs)" "$(value "$training/sklearn.txt" fit_seconds)" "$(value "$training/sklearn.txt" iterations)" \
    "$(value "$training/sklearn.txt" loss)" "$(value "$training/sklearn.txt" validation_accuracy)"
echo "  scikit-learn / modelc fit time     $(ratio "$(value "$training/sklearn.txt" fit_seconds)" "$(value "$training/modelc.txt" fit_seconds)")×   (goal ≥ 1× at equal validation accuracy)"

# The Python package (issue 21): predict_batch on the classic bench's forest
# and RBF SVM against scikit-learn's predict_proba in the same run (goal ≥ 1×),
# and the MobileNetV2-shaped network through Python against the Swift API
# (goal: within 10 %), alternating, best of $rounds rounds each.
echo
swift build -c release --product ModelcC >/dev/null
export MODELC_LIBRARY="$bin/libModelcC.so"
MODELC_CACHE="$work/classic/cache" .venv/bin/python Scripts/bench_python.py classic "$work/classic" 2>/dev/null
python_best="" swift_best=""
for _ in $(seq "$rounds"); do
    p=$(.venv/bin/python Scripts/bench_python.py network "$net/mobilenetv2.mlmodelc" "$net/image.rgb" 1 "$predictions" 2>/dev/null | awk '$1 == "latency_ms" { print $2 }')
    s=$("$bin/ModelcBenchmarks" network "$net/mobilenetv2.mlmodelc" "$net/image.rgb" 1 "$predictions" | awk '$1 == "latency_ms" { print $2 }')
    python_best=$(python3 -c "b='$python_best'; print($p if not b else min(float(b), $p))")
    swift_best=$(python3 -c "b='$swift_best'; print($s if not b else min(float(b), $s))")
done
echo "python network: MobileNetV2-shaped classifier, 1 thread, median of $predictions predictions, best of $rounds rounds"
printf '  %-34s %8.2f ms\n' "Swift API (Model.prediction)" "$swift_best" "Python (modelc.Model.predict, PIL)" "$python_best"
echo "  Swift / Python latency             $(ratio "$swift_best" "$python_best")×   (goal ≥ 0.9×)"
