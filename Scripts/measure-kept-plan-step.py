#!/usr/bin/env python3
"""What planning costs a decoder's step: the generation loop against the same step with its plan kept.

A stateful decoder's mask grows by a position at every step, so `generate` plans each step anew (on another
core, while the step before runs: `TextGenerator.plansAhead`). This times, at each thread count and in turn,
  - generate: the mean time per new token of `Model.generate` (prompt excluded), and
  - kept plan: one step of the same model at a fixed mask length, predicted again and again on one state,
    so that its plan is made once and kept (the state's values are not the point here, only the time),
and prints their ratio: what a plan serving every mask length would save. Apple's decoder form only
(`inputIds`, `causalMask`, the caches as states).

    MODELC_LIBRARY=.build/release/libModelcC.so PYTHONPATH=python .venv-zoo/bin/python \\
        Scripts/measure-kept-plan-step.py .build/bench-llm/200m-int4.mlpackage --threads 1,2 --rounds 3
"""
import argparse
import statistics
import time

import numpy as np

import modelc


def generate_ms(path, threads, prompt, new):
    """Mean milliseconds per new token after the first (the prompt's prediction excluded)."""
    model = modelc.Model(path, threads=threads)
    stamps = []
    for _ in model.generate(prompt, max_new_tokens=new):
        stamps.append(time.perf_counter())
    model.close()
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1e3


def kept_plan_ms(path, threads, end, repeats):
    """Median milliseconds of one step at mask length `end`, its plan made before the timing."""
    model = modelc.Model(path, threads=threads)
    state = model.make_state()
    inputs = {"inputIds": np.array([[5]], dtype=np.int32), "causalMask": np.zeros((1, 1, 1, end), dtype=np.float16)}
    for _ in range(5):
        model.predict(inputs, state=state)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        model.predict(inputs, state=state)
        times.append((time.perf_counter() - started) * 1e3)
    model.close()
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a stateful decoder in Apple's form (.mlpackage or .mlmodelc)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two measurements")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=96, help="new tokens generated")
    args = parser.parse_args()
    prompt = [(i * 37) % 31000 + 1 for i in range(args.prompt)]
    # The kept plan's mask length: the generation's middle step.
    end = args.prompt + args.new // 2
    for threads in (int(t) for t in args.threads.split(",")):
        loop, kept = [], []
        for _ in range(args.rounds):
            loop.append(generate_ms(args.model, threads, prompt, args.new))
            kept.append(kept_plan_ms(args.model, threads, end, args.new))
        print(f"threads {threads}: generate {min(loop):.2f} ms/token (rounds {', '.join(f'{v:.2f}' for v in loop)}); "
              f"kept plan {min(kept):.2f} ms/step (rounds {', '.join(f'{v:.2f}' for v in kept)}); "
              f"generate / kept plan {min(loop) / min(kept):.2f}", flush=True)


if __name__ == "__main__":
    main()
