#!/usr/bin/env python3
"""make conformance: coremltools 9.0's MIL operation tests and converter tests with modelc as the backend.

Usage: conformance.py [--suite ops|converters|all] [--sample F] [--seed N] [--opsets iOS17,iOS18] [--files test_x.py,…]
                      [--backend "mlprogram fp32"] [--per-file] [--min-per-file N] [--out DIR] [-- PYTEST ARGS]

--suite (SUITE, default all): "ops", the MIL operation tests below (DIR/summary.md, as before the
converter suite was added); "converters", coremltools' converter tests (Scripts/conformance_converters.py:
PyTorch, TensorFlow, MIL-protobuf frontends, neural-network builder, scikit-learn, XGBoost), each file
in a process of its own through `python -m modelc.coremltools pytest`, resumable, sampled with the same
seeded draw, written to DIR/converters/summary.md; "all", both. --min-per-file (MIN_PER_FILE, default
10; converter suite only) keeps at least that many cases of each converter test file. --files applies
to both suites (a converter file by name, stem or "torch/test_torch_ops.py").

Runs the tests shipped in the wheel (coremltools/converters/mil/mil/ops/tests/iOS14…iOS18/)
under `modelc.coremltools.enable(pretend_macos=True)`, keeps a seeded sample
of the collected test cases, and writes DIR/summary.md and DIR/summary.json:
passed / failed / refused (modelc does not run an operation: UnsupportedModelError)
/ skipped per opset and backend, and the most frequent failure reasons.

--per-file (PER_FILE=1) runs each test file in a pytest process of its own, writing
DIR/files/OPSET-FILE/ (summary and log), skips the files whose summary is already there
(so an interrupted run resumes), and merges them into DIR/summary.md with a table per file.
Each file is sampled on its own (same seed), so a sample differs from the single-process one.

--backend (BACKEND) keeps only the cases of one backend ("mlprogram fp32", "mlprogram fp16",
"neuralnetwork fp32"), before sampling: with INCLUDE_MIL_FP32_UNIT_TESTS=1, "mlprogram fp32"
samples the fp32 ML-program cases alone. (pytest's -k does not see the backend here: the
parameter ids are the short ones, backend0, backend1, …)
"""

import argparse
import collections
import json
import os
import pathlib
import random
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))


def backend_of(item):
    """"mlprogram fp32", "neuralnetwork fp32", … for a test case with a backend parameter, else None."""
    backend = getattr(getattr(item, "callspec", None), "params", {}).get("backend")
    if backend is None:
        return None
    if hasattr(backend, "backend"):
        return "%s %s" % (backend.backend, getattr(backend, "precision", ""))
    if isinstance(backend, (tuple, list)):
        return " ".join(str(part) for part in backend)
    return None


class Sampler:
    def __init__(self, fraction, seed, backend=""):
        self.fraction = fraction
        self.seed = seed
        self.backend = backend
        self.results = []
        self.uncollected = []
        self.backends = {}

    def pytest_collection_modifyitems(self, session, config, items):
        if self.backend:
            other = [item for item in items if backend_of(item) != self.backend]
            config.hook.pytest_deselected(items=other)
            items[:] = [item for item in items if backend_of(item) == self.backend]
        if self.fraction >= 1:
            return
        rng = random.Random(self.seed)
        keep = [item for item in items if rng.random() < self.fraction]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep

    def pytest_collection_finish(self, session):
        for item in session.items:
            backend = backend_of(item)
            if backend is not None:
                self.backends[item.nodeid] = backend

    def pytest_collectreport(self, report):
        if report.failed:
            text = str(report.longrepr).splitlines()
            self.uncollected.append((report.nodeid, (text[-1] if text else "")[:160]))

    def pytest_runtest_logreport(self, report):
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            return
        node = report.nodeid
        opset = (re.search(r"/(iOS1\d)/", node) or re.search(r"(iOS1\d)", node))
        backend = re.search(r"(mlprogram|neuralnetwork)", node)
        reason = ""
        outcome = report.outcome
        if report.failed:
            text = str(report.longrepr)
            last = [line for line in text.splitlines() if line.startswith("E ")]
            reason = (last[0][2:].strip() if last else text.splitlines()[-1] if text else "")[:160]
            if "UnsupportedModelError" in text or "does not run" in text:
                outcome = "refused"
            elif "name 'torch' is not defined" in text or "No module named 'torch'" in text:
                outcome = "needs torch"
        elif report.skipped:
            outcome = "skipped"
            longrepr = report.longrepr
            reason = (longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr))[:160]
        self.results.append({"test": node, "opset": opset.group(1) if opset else "?",
                             "backend": self.backends.get(node, backend.group(1) if backend else "?"), "outcome": outcome, "reason": reason})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=("ops", "converters", "all"), default=os.environ.get("SUITE", "all"))
    parser.add_argument("--min-per-file", type=int, default=int(os.environ.get("MIN_PER_FILE", "10")))
    parser.add_argument("--sample", type=float, default=float(os.environ.get("SAMPLE", "0.1")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SEED", "21")))
    parser.add_argument("--opsets", default=os.environ.get("OPSETS", "iOS14,iOS15,iOS16,iOS17,iOS18"))
    parser.add_argument("--files", default=os.environ.get("FILES", ""))
    parser.add_argument("--backend", default=os.environ.get("BACKEND", ""))
    parser.add_argument("--per-file", action="store_true", default=os.environ.get("PER_FILE", "") not in ("", "0"))
    parser.add_argument("--out", default=".build/conformance")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    status = 0
    if args.suite in ("ops", "all"):
        status = run_ops(args)
        if status == 64 and args.suite == "all" and args.files:
            status = 0  # FILES named converter test files only
    if args.suite in ("converters", "all") and status == 0:
        import conformance_converters
        status = conformance_converters.run(args, pathlib.Path(__file__).resolve().parent,
                                            pathlib.Path(__file__).resolve().parents[1])
    return status


def run_ops(args):
    """The MIL operation tests (--suite ops): DIR/summary.md and summary.json."""
    import modelc.coremltools
    modelc.coremltools.enable(pretend_macos=True)
    import coremltools
    import pytest

    root = pathlib.Path(coremltools.__file__).parent / "converters" / "mil" / "mil" / "ops" / "tests"
    targets = []
    for opset in args.opsets.split(","):
        directory = root / opset.strip()
        files = sorted(directory.glob("test_*.py"))
        if args.files:
            wanted = {name.strip() for name in args.files.split(",")}
            files = [f for f in files if f.name in wanted or f.stem in wanted]
        targets += [str(f) for f in files]
    if not targets:
        print("no test files selected", file=sys.stderr)
        return 64
    uncollected, per_file = [], None
    if args.per_file:
        results, per_file = run_per_file(args, targets)
    else:
        sampler = Sampler(args.sample, args.seed, args.backend)
        pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(root), "-W", "ignore",
                     "--continue-on-collection-errors"] + targets + args.pytest_args,
                    plugins=[sampler])
        results, uncollected = sampler.results, sampler.uncollected

    counts = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    skips = collections.Counter()
    for result in results:
        counts[(result["opset"], result["backend"])][result["outcome"]] += 1
        if result["outcome"] == "skipped":
            skips[re.sub(r"\d+(\.\d+)?", "N", result["reason"])] += 1
        elif result["reason"] and result["outcome"] != "needs torch":
            reasons[re.sub(r"\d+(\.\d+)?", "N", result["reason"])] += 1
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# modelc against coremltools' MIL op tests",
             "", "sample %.3g (seed %d), opsets %s%s%s%s" % (args.sample, args.seed, args.opsets,
                                                          ", files " + args.files if args.files else "",
                                                          ", backend " + args.backend if args.backend else "",
                                                          ", one process per file" if args.per_file else ""),
             "", "| opset | backend | passed | failed | refused | skipped | needs torch |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for (opset, backend), counter in sorted(counts.items()):
        lines.append("| %s | %s | %d | %d | %d | %d | %d |" % (opset, backend, counter["passed"], counter["failed"],
                                                              counter["refused"], counter["skipped"], counter["needs torch"]))
    if per_file is not None:
        lines += ["", "| file | backend | passed | failed | refused | skipped | needs torch |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for (name, backend), counter in sorted(per_file["counts"].items()):
            lines.append("| %s | %s | %d | %d | %d | %d | %d |" % (name, backend, counter["passed"], counter["failed"],
                                                                  counter["refused"], counter["skipped"], counter["needs torch"]))
        if per_file["missing"]:
            lines += ["", "Files without a summary (the run did not finish; not counted):", ""]
            lines += ["- %s" % name for name in per_file["missing"]]
    if uncollected:
        lines += ["", "Files not collected (not counted):", ""] + ["- %s: %s" % item for item in uncollected]
    not_passing = [r for r in results if r["outcome"] in ("failed", "refused", "needs torch")]
    if not_passing:
        lines += ["", "Cases that do not pass:", ""]
        lines += ["- %s (%s, %s): %s" % (r["test"].split("/tests/")[-1], r["backend"], r["outcome"], r["reason"])
                  for r in not_passing]
    lines += ["", "Top failure reasons:", ""] + ["- %d × %s" % (n, reason) for reason, n in reasons.most_common(10)]
    lines += ["", "Top skip reasons:", ""] + ["- %d × %s" % (n, reason) for reason, n in skips.most_common(5)]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines))
    return 0


def run_per_file(args, targets):
    """Each file in its own process (resumable); returns the merged results and per-file counts."""
    results, counts, missing = [], collections.defaultdict(collections.Counter), []
    for target in targets:
        path = pathlib.Path(target)
        name = "%s/%s" % (path.parent.name, path.name)
        directory = pathlib.Path(args.out) / "files" / ("%s-%s" % (path.parent.name, path.stem))
        summary = directory / "summary.json"
        if not summary.exists():
            directory.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, os.path.abspath(__file__), "--suite", "ops", "--sample", repr(args.sample), "--seed", str(args.seed),
                       "--opsets", path.parent.name, "--files", path.name, "--out", str(directory), "--backend", args.backend]
            if args.pytest_args:
                command += ["--"] + args.pytest_args
            print("conformance: %s" % name, flush=True)
            with open(directory / "log.txt", "w") as log:
                subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
        if not summary.exists():
            missing.append(name)
            continue
        for result in json.loads(summary.read_text()):
            results.append(result)
            counts[(name, result["backend"])][result["outcome"]] += 1
    return results, {"counts": counts, "missing": missing}

if __name__ == "__main__":
    sys.exit(main())
