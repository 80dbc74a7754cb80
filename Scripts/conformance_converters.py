"""make conformance's converter suite: coremltools 9.0's converter tests with modelc as the backend.

Imported by Scripts/conformance.py (`--suite converters|all`), which runs each test file in
a process of its own through the package users have:

    python -m modelc.coremltools pytest -p conformance_converters --rootdir COREMLTOOLS FILE

and, loaded there as a pytest plugin (`-p conformance_converters`), this module samples the
file's cases (seeded), blocks the network and sorts every case into

- passed: the test made at least one prediction through modelc and passed;
- wrong: the test failed after a prediction, with an assertion (a silent wrong answer) or an
  exception that is not one of modelc's (modelc's Python layer, or the test reading its outputs);
- refused: modelc raised one of its errors (modelc.ModelError: UnsupportedModelError,
  InputError, ModelFileError, …), or the traceback reaches modelc's Python package;
- not counted, with the reason: coremltools' own skips and xfails; "needs the network" (a
  connection to another host than this one: the plugin makes it raise); "needs a package";
  "converter failed" (the failure is raised in coremltools' converter or the test before
  any prediction: the traceback does not reach modelc); "needs Core ML" (coremltools called
  a part of Core ML's own binding, libcoremlpython, that modelc.coremltools does not replace,
  such as coremltools.utils.compile_model); "no prediction" (the test passed
  without predicting: it converts or inspects only); "not collected" (the file did not import).

The plugin's settings come from the environment (CONFORMANCE_*), set by run() below.
"""

import collections
import json
import os
import pathlib
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

# The test folders of the wheel, relative to the coremltools package: the frontends' tests
# (PyTorch, TensorFlow 1 and 2, MIL protobuf) and the older converters' (neural-network
# builder, scikit-learn, XGBoost).
DIRECTORIES = [
    "converters/mil/frontend/torch/test",
    "converters/mil/frontend/tensorflow/test",
    "converters/mil/frontend/tensorflow2/test",
    "converters/mil/frontend/milproto",
    "test/neural_network",
    "test/sklearn_tests",
    "test/xgboost_tests",
]

NETWORK_MARK = "conformance: the network is blocked here"
OUTCOMES = ("passed", "wrong", "refused", "not counted")
# The reasons a case is not counted, in the order of the table's columns.
NOT_COUNTED = ("no prediction", "skipped", "converter failed", "needs Core ML", "needs the network",
               "needs a package", "not collected")


def label(path, root):
    """"torch/test_torch_ops.py", "sklearn_tests/test_SVC.py", … for a test file of the wheel."""
    relative = pathlib.Path(path).resolve().relative_to(pathlib.Path(root).resolve())
    parts = relative.parts
    if parts[0] == "converters":  # converters/mil/frontend/<frontend>[/test]/file
        return "%s/%s" % (parts[3], parts[-1])
    return "%s/%s" % (parts[-2], parts[-1])


def test_files(root, wanted=""):
    files = []
    for directory in DIRECTORIES:
        files += sorted((pathlib.Path(root) / directory).glob("test_*.py"))
    if wanted:
        names = {name.strip() for name in wanted.split(",") if name.strip()}
        files = [f for f in files if f.name in names or f.stem in names or label(f, root) in names]
    return files


def sample(items, fraction, seed, minimum):
    """The seeded sample of Scripts/conformance.py (one draw per case, in collection order),
    grown to `minimum` cases (those of the smallest draws) for a file the fraction leaves short."""
    rng = random.Random(seed)
    draws = [rng.random() for _ in items]
    keep = {index for index, draw in enumerate(draws) if draw < fraction}
    if len(keep) < minimum:
        keep |= set(sorted(range(len(items)), key=lambda index: draws[index])[:minimum])
    return [item for index, item in enumerate(items) if index in keep]


# --- The pytest plugin (in the process of one test file) ---------------------------------

_state = {"reached": False, "predictions": 0}
_settings = {}


class NetworkBlocked(OSError):
    pass


def _loopback(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return host in ("localhost", "ip6-localhost", "") or host.startswith("127.") or host in ("::1", "0.0.0.0")


def _block_network():
    """Connections to another host than this one raise NetworkBlocked (an OSError) naming it."""
    getaddrinfo, connect, connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex

    def blocked(what):
        return NetworkBlocked("%s (%s)" % (NETWORK_MARK, what))

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            raise blocked("getaddrinfo %s" % (host,))
        return getaddrinfo(host, *args, **kwargs)

    def address_host(sock, address):
        return address[0] if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) else None

    def guarded_connect(sock, address):
        if not _loopback(address_host(sock, address)):
            raise blocked("connect %s" % (address,))
        return connect(sock, address)

    def guarded_connect_ex(sock, address):
        if not _loopback(address_host(sock, address)):
            raise blocked("connect %s" % (address,))
        return connect_ex(sock, address)

    socket.getaddrinfo = guarded_getaddrinfo
    socket.socket.connect = guarded_connect
    socket.socket.connect_ex = guarded_connect_ex


def _watch_modelc():
    """Notes, for the running case, whether it reached modelc and how many predictions returned."""
    import modelc

    model = modelc.Model
    original_init, original_predict, original_state = model.__init__, model.predict, model.make_state

    def init(self, *args, **kwargs):
        _state["reached"] = True
        return original_init(self, *args, **kwargs)

    def predict(self, *args, **kwargs):
        _state["reached"] = True
        result = original_predict(self, *args, **kwargs)
        _state["predictions"] += 1
        return result

    def make_state(self, *args, **kwargs):
        _state["reached"] = True
        return original_state(self, *args, **kwargs)

    model.__init__, model.predict, model.make_state = init, predict, make_state


def _modelc_directory():
    import modelc
    return str(pathlib.Path(modelc.__file__).resolve().parent) + os.sep


def _chain(error):
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _brief(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " / ".join(lines[:3])
    return ("%s: %s" % (type(error).__name__, text) if text else type(error).__name__)[:300]


def classify(excinfo, reached, predictions):
    """(outcome, category, reason) of a case that raised (excinfo: pytest's ExceptionInfo)."""
    import modelc

    error = excinfo.value
    chain = _chain(error)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    modelc_error = next((e for e in chain if isinstance(e, modelc.ModelError)), None)
    if modelc_error is not None:
        return "refused", "", _brief(modelc_error)
    directory = _modelc_directory()
    frames = [str(entry.path) for entry in excinfo.traceback]
    if any(frame.startswith(directory) for frame in frames):
        return "refused", "", "in modelc's Python layer: " + _brief(error)
    if NETWORK_MARK in text:
        match = re.search(re.escape(NETWORK_MARK) + r" \(([^)]*)\)", text)
        return "not counted", "needs the network", "needs the network: " + (match.group(1) if match else "")
    binding = next((e for e in chain if isinstance(e, ImportError) and "libcoremlpython" in str(e)), None)
    if binding is not None and not reached:  # coremltools called a part of Core ML that modelc.coremltools does not replace
        return "not counted", "needs Core ML", "Core ML's binding (%s): %s" % (str(binding)[:80], _brief(error))
    missing = error if isinstance(error, ImportError) else error.__cause__
    if isinstance(missing, ImportError) and not reached:
        return "not counted", "needs a package", _brief(missing)
    if predictions or reached:
        innermost = frames[-1] if frames else ""
        if isinstance(error, AssertionError) or "/coremltools/converters/" not in innermost:
            return "wrong", "", _brief(error)
        return "not counted", "converter failed", "after a prediction: " + _brief(error)
    return "not counted", "converter failed", _brief(error)


def _record(entry):
    with open(_settings["results"], "a") as out:
        out.write(json.dumps(entry) + "\n")


def pytest_configure(config):
    _settings.update(results=os.environ["CONFORMANCE_RESULTS"], current=os.environ.get("CONFORMANCE_CURRENT", ""),
                     meta=os.environ.get("CONFORMANCE_META", ""), done=os.environ.get("CONFORMANCE_DONE", ""),
                     fraction=float(os.environ.get("CONFORMANCE_SAMPLE", "1")),
                     seed=int(os.environ.get("CONFORMANCE_SEED", "21")),
                     minimum=int(os.environ.get("CONFORMANCE_MIN", "0")))
    _block_network()
    _watch_modelc()


def pytest_collection_modifyitems(session, config, items):
    collected = len(items)
    kept = sample(items, _settings["fraction"], _settings["seed"], _settings["minimum"])
    finished = set()
    if os.path.exists(_settings["results"]):  # a rerun after the process died: the cases left
        finished = {json.loads(line)["test"] for line in open(_settings["results"]) if line.strip()}
    if _settings["meta"] and not finished:
        pathlib.Path(_settings["meta"]).write_text(json.dumps({"collected": collected, "sampled": len(kept)}))
    left = [item for item in kept if item.nodeid not in finished]
    config.hook.pytest_deselected(items=[item for item in items if item not in left])
    items[:] = left


def pytest_collectreport(report):
    if report.failed:
        lines = [line for line in str(report.longrepr).splitlines() if line.startswith("E ")]
        reason = (lines[-1][1:].strip() if lines else str(report.longrepr).splitlines()[-1])[:300]
        category = "needs a package" if "ModuleNotFoundError" in reason or "ImportError" in reason else "not collected"
        _record({"test": report.nodeid, "outcome": "not counted", "category": category,
                 "reason": "not collected: " + reason, "collection": True})
    elif report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        _record({"test": report.nodeid, "outcome": "not counted", "category": "skipped",
                 "reason": "module skipped: " + reason[:300], "collection": True})


def pytest_runtest_logstart(nodeid, location):
    _state["reached"], _state["predictions"] = False, 0
    if _settings["current"]:
        pathlib.Path(_settings["current"]).write_text(nodeid)


import pytest  # noqa: E402  (the plugin's hooks above need no pytest; this one does)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown":
        return
    if report.failed and call.excinfo is not None:
        report.conformance = classify(call.excinfo, _state["reached"], _state["predictions"])
    elif report.failed:  # a strict xfail that passed
        report.conformance = ("not counted", "skipped", "xpassed a strict xfail: %s" % getattr(report, "wasxfail", ""))
    elif report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        if hasattr(report, "wasxfail"):
            reason = "xfail: %s" % report.wasxfail
        if NETWORK_MARK in str(longrepr):
            report.conformance = ("not counted", "needs the network", "skipped: " + reason[:280])
        else:
            report.conformance = ("not counted", "skipped", reason[:300])
    elif call.when == "call":
        if _state["predictions"]:
            report.conformance = ("passed", "", "")
        else:
            report.conformance = ("not counted", "no prediction", "passed without a prediction")


def pytest_runtest_logreport(report):
    result = getattr(report, "conformance", None)
    if result is None or (report.when == "setup" and report.passed):
        return
    outcome, category, reason = result
    _record({"test": report.nodeid, "outcome": outcome, "category": category, "reason": reason,
             "seconds": round(report.duration, 2)})


def pytest_sessionfinish(session, exitstatus):
    if _settings.get("done"):
        pathlib.Path(_settings["done"]).write_text(str(int(exitstatus)))


# --- The runner (in make conformance's process) -------------------------------------------

def run(args, scripts, repository):
    """Runs every selected converter test file in a pytest process of its own; writes OUT/converters/summary.md."""
    import coremltools

    root = pathlib.Path(coremltools.__file__).parent
    files = test_files(root, args.files)
    if not files:
        print("no converter test files selected", file=sys.stderr)
        return 64
    out = pathlib.Path(args.out) / "converters"
    results, meta, missing = [], {}, []
    started = time.time()
    for path in files:
        name = label(path, root)
        directory = out / "files" / name.replace("/", "-").replace(".py", "")
        file_results, file_meta, complete = run_file(args, path, name, directory, root, scripts, repository)
        for result in file_results:
            result["file"] = name
        results += file_results
        meta[name] = file_meta
        if not complete:
            missing.append(name)
    lines = summary(args, results, meta, missing, root, time.time() - started)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps({"files": meta, "results": results}, indent=1))
    print("\n".join(lines))
    return 0


def run_file(args, path, name, directory, root, scripts, repository, attempts=4):
    """Runs one file (resumable: nothing when its `done` file is there; after the process died,
    the case it was running counts as wrong, "the process died", and the rest run again)."""
    results_path, done = directory / "results.jsonl", directory / "done"
    if not done.exists():
        directory.mkdir(parents=True, exist_ok=True)
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(repository / "python"), str(scripts)] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
        environment.update(CONFORMANCE_RESULTS=str(results_path.resolve()), CONFORMANCE_META=str((directory / "meta.json").resolve()),
                           CONFORMANCE_CURRENT=str((directory / "current").resolve()), CONFORMANCE_DONE=str(done.resolve()),
                           CONFORMANCE_SAMPLE=repr(args.sample), CONFORMANCE_SEED=str(args.seed),
                           CONFORMANCE_MIN=str(args.min_per_file))
        command = [sys.executable, "-m", "modelc.coremltools", "pytest", "-q", "-p", "no:cacheprovider",
                   "-p", "conformance_converters", "--rootdir", str(root), "-W", "ignore", str(path)] + args.pytest_args
        for attempt in range(attempts):
            print("conformance: %s%s" % (name, " (again, after the process died)" if attempt else ""), flush=True)
            work = tempfile.mkdtemp(prefix="modelc-conformance-")  # the tests write their models in the working directory
            started = time.time()
            with open(directory / "log.txt", "a") as log:
                code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=environment,
                                      check=False).returncode
            shutil.rmtree(work, ignore_errors=True)
            with open(directory / "seconds", "a") as seconds:
                seconds.write("%.1f\n" % (time.time() - started))
            current = directory / "current"
            if done.exists():
                break
            finished = {r["test"] for r in read_results(results_path)}
            if not current.exists() or current.read_text() in finished:
                break
            with open(results_path, "a") as out:
                out.write(json.dumps({"test": current.read_text(), "outcome": "wrong", "category": "",
                                      "reason": "the pytest process died (exit code %d) in this case" % code}) + "\n")
    file_meta = json.loads((directory / "meta.json").read_text()) if (directory / "meta.json").exists() else {}
    if (directory / "seconds").exists():
        file_meta["seconds"] = round(sum(float(s) for s in (directory / "seconds").read_text().split()), 1)
    return read_results(results_path), file_meta, done.exists()


def read_results(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts_of(results):
    counter = collections.Counter()
    for result in results:
        if result.get("collection"):
            counter["files not collected"] += 1
            continue
        counter[result["outcome"]] += 1
        if result["outcome"] == "not counted":
            counter[result["category"]] += 1
    return counter


def percent(counter):
    ran = counter["passed"] + counter["wrong"] + counter["refused"]
    return "%d / %d = %.1f %%" % (counter["passed"], ran, 100.0 * counter["passed"] / ran) if ran else "–"


def summary(args, results, meta, missing, root, seconds):
    lines = ["# modelc against coremltools' converter tests", "",
             "sample %.3g (seed %d, at least %d cases a file), one process per file, %d files; the files' processes"
             " took %.0f s (this run %.0f s: the files already done are not run again)" % (
                 args.sample, args.seed, args.min_per_file, len(meta), sum(m.get("seconds", 0) for m in meta.values()),
                 seconds), "",
             "passed / wrong / refused: cases that made a prediction through modelc (passed), then failed an assertion",
             "or a non-modelc exception (wrong), or met a modelc error (refused). Not counted: "
             + ", ".join(NOT_COUNTED) + ".", "",
             "| file | collected | sampled | passed | wrong | refused | not counted | " + " | ".join(NOT_COUNTED)
             + " | passed of the cases that predict | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in NOT_COUNTED) + " | --- | --- |"]
    by_file = collections.defaultdict(list)
    for result in results:
        by_file[result["file"]].append(result)
    total = collections.Counter()
    collected = sampled = 0
    for name in sorted(meta):
        counter = counts_of(by_file[name])
        total += counter
        info = meta[name]
        collected += info.get("collected", 0)
        sampled += info.get("sampled", 0)
        not_collected = counter["files not collected"]
        lines.append("| `%s` | %s | %s | %d | %d | %d | %d | %s | %s | %s |" % (
            name, info.get("collected", "–"), info.get("sampled", "–"), counter["passed"], counter["wrong"],
            counter["refused"], counter["not counted"] + not_collected,
            " | ".join(str(counter[c] + (not_collected if c == "not collected" else 0)) for c in NOT_COUNTED),
            percent(counter), info.get("seconds", "–")))
    lines.append("| all | %d | %d | %d | %d | %d | %d | %s | %s | %.0f |" % (
        collected, sampled, total["passed"], total["wrong"], total["refused"],
        total["not counted"] + total["files not collected"],
        " | ".join(str(total[c] + (total["files not collected"] if c == "not collected" else 0)) for c in NOT_COUNTED),
        percent(total), sum(m.get("seconds", 0) for m in meta.values())))
    lines += ["", "(\"not collected\" counts files whose module did not import, or that skip as a whole: their cases are unknown.)"]
    if missing:
        lines += ["", "Files whose run did not finish (their cases so far are counted):", ""] + ["- %s" % m for m in missing]
    for outcome in ("wrong", "refused"):
        cases = [r for r in results if r["outcome"] == outcome]
        if cases:
            lines += ["", "%s (%d):" % (outcome.capitalize(), len(cases)), ""]
            lines += ["- `%s`: %s" % (r["test"], r["reason"]) for r in cases]
    network = [r for r in results if r.get("category") == "needs the network"]
    if network:
        lines += ["", "Not runnable here, needs the network (%d; not counted):" % len(network), ""]
        lines += ["- `%s`: %s" % (r["test"], r["reason"]) for r in network]
    files = [r for r in results if r.get("collection")]
    if files:
        lines += ["", "Files not collected (%d; their cases are unknown, not counted):" % len(files), ""]
        lines += ["- `%s`: %s" % (r["file"], r["reason"]) for r in files]
    for category in NOT_COUNTED:
        if category in ("needs the network", "not collected"):
            continue
        reasons = collections.Counter(re.sub(r"\d+(\.\d+)?", "N", r["reason"]) for r in results
                                      if r["outcome"] == "not counted" and r["category"] == category
                                      and not r.get("collection"))
        if reasons:
            lines += ["", "Not counted, %s (%d), most frequent reasons:" % (category, sum(reasons.values())), ""]
            lines += ["- %d × %s" % (n, reason) for reason, n in reasons.most_common(8)]
    return lines
