#!/usr/bin/env python3
"""The Python package's side of make bench (python/modelc over libModelcC).

Usage:
    bench_python.py classic DIR          modelc.Model.predict_batch on DIR/rows.npy (100,000 x 20) with
                                         DIR/forest.mlmodel and DIR/svm.mlmodel (Scripts/bench_classic.py
                                         make DIR), every core and one thread, against scikit-learn's
                                         predict_proba on the pickled estimators (one thread), same run
    bench_python.py network BUNDLE IMAGE THREADS RUNS
                                         median latency of modelc.Model.predict on the RGB image (a PIL
                                         image) after 5 warm-up predictions; prints `latency_ms X`

Every ratio is a throughput ratio (> 1: modelc is faster); fastest of BENCH_RUNS runs.
"""

import os
import pathlib
import pickle
import statistics
import sys
import time

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

import numpy as np  # noqa: E402

import modelc  # noqa: E402


def fastest(runs, body):
    best = None
    for _ in range(runs):
        start = time.perf_counter()
        body()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best


def classic(directory):
    runs = int(os.environ.get("BENCH_RUNS", "3"))
    rows = np.load(os.path.join(directory, "rows.npy"))
    print("python predict_batch: %d rows × %d features, fastest of %d runs" % (rows.shape[0], rows.shape[1], runs))
    for name, label in (("forest", "random forest (100 trees)"), ("svm", "RBF SVM, 3 classes, probabilities")):
        with open(os.path.join(directory, name + ".pickle"), "rb") as f:
            estimator = pickle.load(f)
        sklearn = fastest(runs, lambda: estimator.predict_proba(rows))
        want = estimator.predict_proba(rows)
        print("  " + label)
        print("    %-40s %8.3f s" % ("scikit-learn predict_proba (1 thread)", sklearn))
        for threads in (None, 1):
            with modelc.Model(os.path.join(directory, name + ".mlmodel"), threads=threads) as model:
                got = model.predict_batch({"features": rows})["classProbability"]
                seconds = fastest(runs, lambda: model.predict_batch({"features": rows}))
                if name == "forest":
                    got = got / len(estimator.estimators_)
                order = [list(estimator.classes_).index(c) for c in model.class_labels]
                difference = float(np.max(np.abs(got - want[:, order])))
                what = "modelc predict_batch (%s)" % ("every core" if threads is None else "1 thread")
                print("    %-40s %8.3f s   %.2f× scikit-learn   (largest probability difference %.1e)"
                      % (what, seconds, sklearn / seconds, difference))


def network(bundle, image, threads, runs):
    from PIL import Image
    data = pathlib.Path(image).read_bytes()
    side = int(round((len(data) / 3) ** 0.5))
    picture = Image.frombytes("RGB", (side, side), data)
    with modelc.Model(bundle, threads=threads) as model:
        name = next(iter(model.input_description))
        inputs = {name: picture}
        for _ in range(5):
            model.predict(inputs)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            model.predict(inputs)
            times.append(time.perf_counter() - start)
    print("latency_ms %.3f" % (statistics.median(times) * 1000))


def main(argv):
    if len(argv) == 3 and argv[1] == "classic":
        classic(argv[2])
    elif len(argv) == 6 and argv[1] == "network":
        network(argv[2], argv[3], int(argv[4]), int(argv[5]))
    else:
        sys.stderr.write(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
