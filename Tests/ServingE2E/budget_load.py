"""make load's budget run: a memory budget of one model while clients rotate over five copies of a network.
Usage: budget_load.py MODELC MODEL_DIR IMAGE_RGB CLIENTS SECONDS"""
import base64
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # noqa: E402
import loadgen  # noqa: E402


def main():
    modelc, model_dir, image, clients, seconds = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    conftest.MODELC = modelc
    pixels = list(image.read_bytes())
    body = json.dumps({"inputs": [{"name": "image", "datatype": "UINT8", "shape": [224, 224, 3], "data": pixels}],
                       "outputs": [{"name": "classLabel"}]}).encode()
    names = sorted(path.stem for path in model_dir.glob("*.mlmodel"))
    requests = [(f"/v2/models/{name}/infer", body) for name in names]
    with tempfile.TemporaryDirectory() as tmp:
        probe = conftest.Server(model_dir, tmp)
        status, answer = probe.request("POST", requests[0][0], body)
        assert status == 200, answer
        size = int(re.search(r"model loaded model=\w+ bytes=(\d+)", probe.wait_for_log(r"model loaded model=")).group(1))
        assert probe.stop() == 0
        # The same clients on one model first: the process's peak with one model and every request's
        # buffers (64 JSON images in flight are ~200 MB by themselves), the reference for the rotation.
        single = conftest.Server(model_dir, tmp, "--memory-budget", str(size))
        assert single.request("POST", requests[0][0], body)[0] == 200
        single_result = loadgen.run(single.port, requests[:1], clients, seconds / 2)
        single_peak = single.peak_rss_bytes()
        assert single.stop() == 0
        server = conftest.Server(model_dir, tmp, "--memory-budget", str(size))
        assert server.request("POST", requests[0][0], body)[0] == 200
        baseline = server.rss_bytes()
        result = loadgen.run(server.port, requests, clients, seconds)
        _, metrics = server.request("GET", "/metrics")
        evictions = int(re.search(rb"^modelc_model_evictions_total (\d+)$", metrics, re.M).group(1))
        loads = int(re.search(rb"^modelc_model_loads_total (\d+)$", metrics, re.M).group(1))
        peak = server.peak_rss_bytes()
        code = server.stop()
    limit = single_peak + 2 * size
    print(f"{len(names)} models of {size / 2**20:.1f} MiB each, budget {size / 2**20:.1f} MiB, {clients} clients, {seconds:.0f} s: "
          f"{result['count']} requests, {result['failures']} failed, {loads} loads, {evictions} evictions, "
          f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, {result['throughput']:.1f} requests/s; "
          f"peak RSS {peak / 2**20:.1f} MiB (warm process {baseline / 2**20:.1f} MiB); the same clients on one model: "
          f"peak {single_peak / 2**20:.1f} MiB, {single_result['throughput']:.1f} requests/s; "
          f"limit that + budget + one model {limit / 2**20:.1f} MiB")
    ok = result["failures"] == 0 and single_result["failures"] == 0 and code == 0 and evictions > 0 and peak <= limit
    if not ok:
        print("FAILED", result["errors"], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
