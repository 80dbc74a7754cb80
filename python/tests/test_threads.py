"""The GIL is released while modelc computes: Python threads run meanwhile."""

import threading
import time

import numpy as np

import modelc
from conftest import FIXTURES


def test_python_runs_while_a_prediction_runs():
    with modelc.Model(FIXTURES / "Parity" / "forest_classifier_multiclass.mlmodel", threads=1) as model:
        rows = np.random.default_rng(1).normal(size=(400_000, 4))
        started = time.perf_counter()
        model.predict_batch({"features": rows[:1000]})
        done = threading.Event()
        ticks = []

        def count():
            while not done.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.001)

        predicting = []

        def predict():
            predicting.append(time.perf_counter())
            model.predict_batch({"features": rows})
            predicting.append(time.perf_counter())

        counter = threading.Thread(target=count)
        counter.start()
        worker = threading.Thread(target=predict)
        worker.start()
        worker.join()
        done.set()
        counter.join()
        begin, end = predicting
        during = [t for t in ticks if begin < t < end]
        # Holding the GIL for the whole call would leave no tick inside it.
        assert end - begin > 0.02
        assert len(during) >= 5, (end - begin, len(during))
        assert started


def test_threads_share_one_model():
    with modelc.Model(FIXTURES / "Models" / "GLMClassifier.mlmodel") as model:
        rng = np.random.default_rng(2)
        rows = [rng.normal(size=4) for _ in range(64)]
        want = [model.predict({"features": row}) for row in rows]
        results = [None] * 8
        errors = []

        def run(slot):
            try:
                results[slot] = [model.predict({"features": row}) for row in rows]
            except Exception as error:  # pragma: no cover
                errors.append(error)

        threads = [threading.Thread(target=run, args=(slot,)) for slot in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert all(result == want for result in results)
