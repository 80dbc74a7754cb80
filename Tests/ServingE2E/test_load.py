"""A short load run in make test (make load runs the long one): concurrent clients over several models,
then a memory budget that holds one model while the clients rotate over five."""
import os
import re

from conftest import Server
import loadgen

SECONDS = float(os.environ.get("SERVE_LOAD_SECONDS", "3"))
CLIENTS = int(os.environ.get("SERVE_LOAD_CLIENTS", "16"))


def metric(server, name):
    _, text = server.request("GET", "/metrics")
    match = re.search(rb"^" + name.encode() + rb" (\d+)$", text, re.M)
    return int(match.group(1)) if match else None


def test_concurrent_clients_over_three_models(server):
    result = loadgen.run(server.port, loadgen.fixture_requests(["TreeEnsembleClassifier", "GLMClassifier", "MLProgram"]),
                         CLIENTS, SECONDS)
    print(f"\nload: {CLIENTS} clients x {SECONDS:.0f} s, 3 models: {result['count']} requests, "
          f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, {result['throughput']:.0f} requests/s")
    assert result["failures"] == 0, result
    assert result["count"] > CLIENTS


def test_a_budget_of_one_model_while_clients_rotate_over_five(model_dir, tmp_path):
    names = ["TreeEnsembleClassifier", "GLMClassifier", "MLProgram", "KNNClassifier", "SVMClassifier"]
    # The models' sizes as the server counts them, from a first server that loads each once.
    probe = Server(model_dir, tmp_path)
    for name in names:
        assert probe.request("POST", f"/v2/models/{name}/infer", dict(loadgen.FIXTURE_REQUESTS)[name])[0] == 200
    log = probe.wait_for_log(r"model loaded model=", count=len(names))
    sizes = {name: int(bytes_) for name, bytes_ in re.findall(r"model loaded model=(\w+) bytes=(\d+)", log)}
    assert probe.stop() == 0
    assert set(names) <= set(sizes), f"loads logged: {sorted(sizes)}"
    largest = max(sizes[name] for name in names)
    server = Server(model_dir, tmp_path, "--memory-budget", str(largest))
    try:
        assert server.request("POST", "/v2/models/MLProgram/infer", loadgen.PROGRAM)[0] == 200
        baseline = server.rss_bytes()
        result = loadgen.run(server.port, loadgen.fixture_requests(names), CLIENTS, SECONDS)
        evictions = metric(server, "modelc_model_evictions_total")
        loads = metric(server, "modelc_model_loads_total")
        peak = server.peak_rss_bytes()
        print(f"\nbudget of one model ({largest} bytes), {CLIENTS} clients rotating over 5: {result['count']} requests, "
              f"{loads} loads, {evictions} evictions, p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
              f"peak RSS {peak / 2**20:.1f} MiB (after warm-up {baseline / 2**20:.1f} MiB)")
        assert result["failures"] == 0, result
        assert evictions > 0 and loads > len(names)
        # Within the budget plus one model, above the warm process; the fixture models are small, so the
        # slack for one thread stack and allocator arenas per client dominates.
        assert peak - baseline <= largest + largest + (CLIENTS * 2 << 20), (peak, baseline)
    finally:
        assert server.stop() == 0, server.log_text()


def test_dynamic_batching_computes_concurrent_requests_together(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--threads", "1", "--max-batch", "8", "--batch-delay", "5")
    try:
        result = loadgen.run(server.port, loadgen.fixture_requests(["GLMClassifier"]), CLIENTS, min(SECONDS, 2))
        _, text = server.request("GET", "/metrics")
        count = int(re.search(rb'^nv_inference_count\{model="GLMClassifier",version="1"\} (\d+)$', text, re.M).group(1))
        executions = int(re.search(rb'^nv_inference_exec_count\{model="GLMClassifier",version="1"\} (\d+)$', text, re.M).group(1))
        print(f"\nbatching: {count} inferences in {executions} executions ({count / executions:.1f} a batch)")
        assert result["failures"] == 0 and count == result["count"]
        assert executions < count / 2, "requests arriving together were computed together"
        assert executions >= count / 8, "never more than --max-batch at once"
    finally:
        assert server.stop() == 0, server.log_text()
