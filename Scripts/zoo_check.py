#!/usr/bin/env python3
"""Run zoo models (Scripts/zoo.py's output) on modelc and compare with their references.

Usage:
    zoo_check.py MODELC DIR [NAME_VARIANT ...]

Runs every DIR/*.json case file (or the named ones) with `MODELC predict --json`, ML programs
with `--engine tensor`, neural networks on the default engine, and prints a Markdown table:
model, variant, worst error relative to max(1, |reference|), and the problem when modelc
refuses the model or a value is outside the file's tolerance. Exits 1 when one fails.
Needs only NumPy.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def check(modelc, directory, stem):
    """Runs one case file's model on modelc; returns (worst error or None, problem or None)."""
    with open(os.path.join(directory, stem + ".json")) as f:
        document = json.load(f)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for case in document["cases"]:
            f.write(json.dumps(case["inputs"]) + "\n")
        lines = f.name
    command = [modelc, "predict", os.path.join(directory, document["model"]), "--inputs", lines, "--json"]
    if document["kind"] == "mlProgram":
        command += ["--engine", "tensor"]
    run = subprocess.run(command, capture_output=True, text=True)
    os.unlink(lines)
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if len(answers) != len(document["cases"]):
        return None, (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
    worst = 0.0
    for answer, case in zip(answers, document["cases"]):
        if "error" in answer:
            return None, answer["error"]
        for output, want in case["outputs"].items():
            got = np.asarray(answer["outputs"].get(output), dtype=np.float64)
            want = np.asarray(want, dtype=np.float64)
            if got.shape != want.shape:
                return None, "output %s has shape %s, expected %s" % (output, got.shape, want.shape)
            if np.isnan(got).any():
                return None, "output %s has NaN" % output
            error = np.abs(got - want) / np.maximum(1, np.abs(want))
            worst = max(worst, float(error.max()))
    if worst > document["tolerance"]:
        return worst, "worst error %.3g above %g" % (worst, document["tolerance"])
    return worst, None


def stems(directory):
    return sorted(name[:-5] for name in os.listdir(directory) if name.endswith(".json"))


def table(rows):
    lines = ["| model | variant | worst error | problem |", "| --- | --- | --- | --- |"]
    for stem, worst, problem in rows:
        name, _, variant = stem.rpartition("_")
        lines.append("| %s | %s | %s | %s |" % (name, variant, "—" if worst is None else "%.2g" % worst, problem or ""))
    return "\n".join(lines)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    modelc, directory = sys.argv[1], sys.argv[2]
    rows = []
    for stem in sys.argv[3:] or stems(directory):
        worst, problem = check(modelc, directory, stem)
        rows.append((stem, worst, problem))
        print("%s: %s" % (stem, problem or "%.3g" % worst), flush=True)
    print()
    print(table(rows))
    sys.exit(1 if any(problem for _, _, problem in rows) else 0)


if __name__ == "__main__":
    main()
