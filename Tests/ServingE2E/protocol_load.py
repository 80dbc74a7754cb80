"""REST against gRPC under load, the same server and the same request: CLIENTS processes (one
tritonclient connection each, so that Python's lock does not serialize the clients) send a small
inference back to back for SECONDS, first over tritonclient.http, then over tritonclient.grpc.
Prints requests/s, p50 and p99 of each and the ratio; exits 1 when a request fails.

Usage: protocol_load.py MODELC MODEL_DIR CLIENTS SECONDS"""
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # noqa: E402
import loadgen  # noqa: E402

IRIS = np.array([5.1, 3.5, 1.4, 0.2])


def client(protocol, url, seconds, start, results):
    if protocol == "grpc":
        import tritonclient.grpc as triton
    else:
        import tritonclient.http as triton
    connection = triton.InferenceServerClient(url)
    tensor = triton.InferInput("features", [4], "FP64")
    if protocol == "grpc":
        tensor.set_data_from_numpy(IRIS)
    else:
        tensor.set_data_from_numpy(IRIS, binary_data=True)
    latencies, failures = [], 0
    while time.monotonic() < start:
        time.sleep(0.001)
    deadline = start + seconds
    while time.monotonic() < deadline:
        began = time.monotonic()
        try:
            connection.infer("GLMClassifier", [tensor])
            latencies.append(time.monotonic() - began)
        except Exception:  # noqa: BLE001 - every failure is counted, whatever the client raises
            failures += 1
    results.put((latencies, failures))


def measure(protocol, url, clients, seconds):
    results = multiprocessing.Queue()
    start = time.monotonic() + 1.0
    workers = [multiprocessing.Process(target=client, args=(protocol, url, seconds, start, results)) for _ in range(clients)]
    for worker in workers:
        worker.start()
    gathered = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    latencies = sorted(latency for part, _ in gathered for latency in part)
    failures = sum(failed for _, failed in gathered)
    return {"count": len(latencies), "failures": failures, "throughput": len(latencies) / seconds,
            "p50_ms": 1000 * loadgen.percentile(latencies, 0.5), "p99_ms": 1000 * loadgen.percentile(latencies, 0.99)}


def main():
    modelc, model_dir, clients, seconds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    conftest.MODELC = modelc
    with tempfile.TemporaryDirectory() as tmp:
        server = conftest.Server(model_dir, tmp)
        try:
            rest = measure("http", server.url, clients, seconds)
            grpc = measure("grpc", server.grpc_url, clients, seconds)
        finally:
            code = server.stop()
    for name, result in (("REST", rest), ("gRPC", grpc)):
        print(f"{name}: {result['count']} requests, {result['failures']} failed, {result['throughput']:.0f} requests/s, "
              f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms")
    print(f"gRPC / REST requests/s: {grpc['throughput'] / max(rest['throughput'], 1e-9):.2f} "
          f"({clients} client processes, one connection each; the goal is 1.5)")
    return 0 if rest["failures"] == 0 and grpc["failures"] == 0 and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
