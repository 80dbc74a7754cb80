#!/usr/bin/env python3
"""Classic-model benchmark data and scikit-learn's side of `make bench`.

Usage:
    bench_classic.py make DIR          write DIR/forest.mlmodel, DIR/svm.mlmodel (coremltools),
                                       DIR/rows.npy and DIR/rows.jsonl (100,000 rows x 20 features),
                                       and DIR/forest.pickle, DIR/svm.pickle (once; kept)
    bench_classic.py time DIR MODEL    print the fastest of BENCH_RUNS runs of scikit-learn's
                                       predict_proba on every row, single thread, in seconds

Everything is seeded: the same files on every run.
"""

import contextlib
import io
import json
import os
import pickle
import sys
import time
import warnings

# One thread for every library scikit-learn may call into.
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

ROWS = 100_000
FEATURES = 20


def training_data(rng, n):
    """Three classes of Gaussian blobs in 20 dimensions, overlapping."""
    centers = rng.normal(0, 0.5, (3, FEATURES))
    y = rng.integers(0, 3, n)
    X = centers[y] + rng.normal(0, 1.0, (n, FEATURES))
    return X, y


def make(directory):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.svm import SVC
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        import coremltools as ct
        os.makedirs(directory, exist_ok=True)
        rng = np.random.default_rng(20240512)
        X, y = training_data(rng, 4000)
        forest = RandomForestClassifier(n_estimators=100, max_depth=12, random_state=1, n_jobs=1).fit(X, y)
        svm = SVC(kernel="rbf", gamma="scale", C=1.0, probability=True, random_state=1).fit(X[:1000], y[:1000])
        for name, model in (("forest", forest), ("svm", svm)):
            # One input: an array of 20 doubles.
            spec = ct.converters.sklearn.convert(model, "features", "label").get_spec()
            ct.utils.save_spec(spec, os.path.join(directory, name + ".mlmodel"))
            with open(os.path.join(directory, name + ".pickle"), "wb") as f:
                pickle.dump(model, f)
        rows = training_data(np.random.default_rng(7), ROWS)[0]
        np.save(os.path.join(directory, "rows.npy"), rows)
        with open(os.path.join(directory, "rows.jsonl"), "w") as f:
            for row in rows:
                f.write(json.dumps({"features": [float(v) for v in row]}) + "\n")
    print("wrote %s: forest.mlmodel, svm.mlmodel, rows.npy, rows.jsonl" % directory)


def fastest(runs, body):
    best = None
    for _ in range(runs):
        start = time.perf_counter()
        body()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best


def time_model(directory, name):
    with open(os.path.join(directory, name + ".pickle"), "rb") as f:
        model = pickle.load(f)
    rows = np.load(os.path.join(directory, "rows.npy"))
    runs = int(os.environ.get("BENCH_RUNS", "3"))
    print("%.6f" % fastest(runs, lambda: model.predict_proba(rows)))


def main(argv):
    if len(argv) == 3 and argv[1] == "make":
        make(argv[2])
    elif len(argv) == 4 and argv[1] == "time":
        time_model(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
