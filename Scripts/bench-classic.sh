#!/usr/bin/env bash
# make bench, classic models: a 100-tree random forest and a 3-class RBF SVM
# (with probabilities) over 100,000 rows x 20 features, on one thread,
# against scikit-learn's predict_proba on the same model and rows in the same
# run. Prints throughput ratios (modelc / scikit-learn). Not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

work=.build/bench/classic
python=${PYTHON:-.venv/bin/python}
runs=${BENCH_RUNS:-3}
mkdir -p "$work"
if [ ! -f "$work/rows.jsonl" ] || [ ! -f "$work/svm.mlmodel" ]; then
    echo "making the classic models and rows with scikit-learn and coremltools (once)…" >&2
    "$python" Scripts/bench_classic.py make "$work" >/dev/null
fi
bin=$(swift build -c release --show-bin-path)
modelc=$bin/modelc
export MODELC_CACHE="$work/cache"
rows=$(( $(wc -l < "$work/rows.jsonl") ))

# The fastest of $runs runs of a command, in seconds.
fastest() {
    local best=""
    for _ in $(seq "$runs"); do
        local start end
        start=$(date +%s.%N)
        "$@" >/dev/null
        end=$(date +%s.%N)
        best=$(python3 -c "b='$best'; t=$end-$start; print(t if not b else min(float(b), t))")
    done
    echo "$best"
}
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
rate() { python3 -c "print(f'{$rows/$1:>10,.0f} rows/s')"; }

echo
echo "classic models: $rows rows × 20 features, one thread, fastest of $runs runs"
for model in forest svm; do
    label=$([ "$model" = forest ] && echo "random forest (100 trees)" || echo "RBF SVM, 3 classes, probabilities")
    sklearn=$(BENCH_RUNS=$runs "$python" Scripts/bench_classic.py time "$work" "$model")
    library=$("$bin/ModelcBenchmarks" classic "$work/$model.mlmodel" "$work/rows.npy" "$runs")
    # The first run compiles the source into the cache; the timed ones reuse it.
    "$modelc" predict "$work/$model.mlmodel" --inputs "$work/rows.jsonl" --json --threads 1 | head -1 >/dev/null || true
    end_to_end=$(fastest sh -c "'$modelc' predict '$work/$model.mlmodel' --inputs '$work/rows.jsonl' --json --threads 1 > /dev/null")
    echo "  $label"
    printf '    %-34s %8.3f s %s\n' "scikit-learn predict_proba" "$sklearn" "$(rate "$sklearn")" \
        "modelc library (predictions)" "$library" "$(rate "$library")" \
        "modelc predict --inputs rows.jsonl" "$end_to_end" "$(rate "$end_to_end")"
    echo "    library / scikit-learn throughput     $(ratio "$sklearn" "$library")×   (goal ≥ 1×)"
    echo "    end to end / scikit-learn throughput  $(ratio "$sklearn" "$end_to_end")×"
done
