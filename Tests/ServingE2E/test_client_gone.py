"""An /infer request whose client disconnects mid-computation stops at the next operation boundary:
its worker is free again long before the computation would have ended, and it counts as CANCELED.
MODELC_SERVE_COMPUTE_DELAY_MS makes each computation of the (fast) fixture take that long first,
looking at its cancellation every few milliseconds as the engine does between operations."""
import json
import re
import socket
import time

from conftest import Server

IRIS = {"inputs": [{"name": "features", "datatype": "FP64", "shape": [4], "data": [6.7, 3.0, 5.2, 2.3]}]}


def metric(server, pattern):
    _, body = server.request("GET", "/metrics")
    found = re.search(pattern, body.decode(), re.M)
    return int(found.group(1)) if found else None


def wait_for(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_client_leaving_mid_computation_frees_its_worker(model_dir, tmp_path):
    server = Server(model_dir, tmp_path, "--threads", "1", env={"MODELC_SERVE_COMPUTE_DELAY_MS": "20000"})
    try:
        # Loaded first, so that the request below is computing, not loading, when its client leaves.
        status, _ = server.request("POST", "/v2/repository/models/GLMClassifier/load")
        assert status == 200
        body = json.dumps(IRIS).encode()
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"POST /v2/models/GLMClassifier/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert wait_for(lambda: metric(server, r"^modelc_inference_in_flight (\d+)$") == 1, 10)
        left = time.monotonic()
        client.close()
        assert wait_for(lambda: metric(server, r"^modelc_inference_in_flight (\d+)$") == 0, 10)
        freed = time.monotonic() - left
        assert freed < 2, f"the worker stayed busy {freed:.2f} s after the client left (the computation takes 20 s)"
        assert metric(server, r'^nv_inference_request_failure\{model="GLMClassifier",version="1",reason="CANCELED"\} (\d+)$') == 1
        assert metric(server, r"^modelc_inference_computations_canceled_total (\d+)$") == 1
        assert metric(server, r'^nv_inference_request_success\{model="GLMClassifier",version="1"\} (\d+)$') in (None, 0)
        _, stats = server.request("GET", "/v2/models/GLMClassifier/stats")
        inference = json.loads(stats)["model_stats"][0]["inference_stats"]
        assert inference["fail"]["count"] == 1 and inference["success"]["count"] == 0
    finally:
        assert server.stop() == 0, server.log_text()
    print(f"worker free {freed * 1000:.0f} ms after the client left")
