"""REST against gRPC under load, the same server and the same request (GLMClassifier's 4 doubles):

1. with Triton's Python clients: CLIENTS processes (one tritonclient connection each, so that
   Python's lock does not serialize the clients) send the inference back to back for SECONDS, first
   over tritonclient.http, then over tritonclient.grpc;
2. with h2load (nghttp2's load generator, C): the same bytes tritonclient sends — REST's binary
   tensor body over HTTP/1.1, gRPC's ModelInferRequest over HTTP/2 — first from CLIENTS connections
   with one request at a time on each, then 64 requests at once: REST on 64 connections (HTTP/1.1
   has one request at a time on a connection), gRPC on 4 connections of 16 calls each (what HTTP/2
   is for: a client's calls share its connection). On a machine of few cores the Python clients use
   most of the CPU themselves; h2load costs a fraction of what the server does, so its figures are
   closer to the server's own.

Prints requests/s, p50 and p99 of each and the ratios; exits 1 when a request fails (h2load's
requests are checked against the server's own count of answered inferences).

Usage: protocol_load.py MODELC MODEL_DIR CLIENTS SECONDS"""
import multiprocessing
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def request_bodies(directory):
    """The files h2load sends: REST's body as tritonclient.http sends it (a JSON header, then the
    tensor's bytes) with its header length, and gRPC's ModelInferRequest as tritonclient.grpc
    sends it (raw contents), framed as a gRPC message (uncompressed, 4-byte big-endian length)."""
    import tritonclient.grpc as triton_grpc
    import tritonclient.http as triton_http
    from tritonclient.grpc import service_pb2
    tensor = triton_http.InferInput("features", [4], "FP64")
    tensor.set_data_from_numpy(IRIS, binary_data=True)
    body, header_length = triton_http.InferenceServerClient.generate_request_body([tensor])
    rest = Path(directory) / "rest.bin"
    rest.write_bytes(body)
    message = service_pb2.ModelInferRequest(model_name="GLMClassifier")
    grpc_tensor = triton_grpc.InferInput("features", [4], "FP64")
    grpc_tensor.set_data_from_numpy(IRIS)
    message.inputs.extend([grpc_tensor._get_tensor()])
    message.raw_input_contents.extend([grpc_tensor._get_content()])
    payload = message.SerializeToString()
    grpc = Path(directory) / "grpc.bin"
    grpc.write_bytes(b"\0" + len(payload).to_bytes(4, "big") + payload)
    return rest, header_length, grpc


def answered(url):
    """Inferences the server has answered, successes and failures."""
    text = urllib.request.urlopen(f"http://{url}/metrics", timeout=10).read().decode()
    found = re.findall(r'^nv_inference_request_(success|failure)\{model="GLMClassifier"[^}]*\} (\S+)$', text, re.MULTILINE)
    return {kind: sum(float(count) for which, count in found if which == kind) for kind in ("success", "failure")}


def h2load(server, arguments, seconds):
    """One h2load run: requests/s, p50 and p99 (its per-request times), and its failures together
    with those the server counted (a gRPC failure is an HTTP 200 whose trailers say so)."""
    before = answered(server.url)
    output = subprocess.run(["h2load", "--warm-up-time=1", "-D", str(int(seconds)), *arguments],
                            capture_output=True, text=True, check=True).stdout
    after = answered(server.url)
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", output)
    rate = re.search(r"finished in [^,]+, ([\d.]+) req/s", output)
    request_times = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", output)
    if not (done and rate):
        raise RuntimeError("h2load said: " + output[-2000:])
    failures = int(done.group(5)) + int(done.group(6)) + int(after["failure"] - before["failure"])
    return {"count": int(done.group(4)), "failures": failures, "throughput": float(rate.group(1)),
            "mean": request_times.group(3) if request_times else "?", "max": request_times.group(2) if request_times else "?"}


def show(name, result):
    if "p50_ms" in result:
        print(f"{name}: {result['count']} requests, {result['failures']} failed, {result['throughput']:.0f} requests/s, "
              f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms")
    else:
        print(f"{name}: {result['count']} requests, {result['failures']} failed, {result['throughput']:.0f} requests/s, "
              f"mean {result['mean']}, max {result['max']}")


def main():
    modelc, model_dir, clients, seconds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    conftest.MODELC = modelc
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = conftest.Server(model_dir, tmp)
        try:
            results["REST, tritonclient.http"] = measure("http", server.url, clients, seconds)
            results["gRPC, tritonclient.grpc"] = measure("grpc", server.grpc_url, clients, seconds)
            if shutil.which("h2load"):
                rest, header_length, grpc = request_bodies(tmp)

                def rest_arguments(connections):
                    return ["--h1", "-c", str(connections), "-d", str(rest), "-H", "Content-Type: application/octet-stream",
                            "-H", f"Inference-Header-Content-Length: {header_length}", f"http://{server.url}/v2/models/GLMClassifier/infer"]
                results["REST, h2load"] = h2load(server, rest_arguments(clients), seconds)
                grpc_arguments = ["-d", str(grpc), "-H", "content-type: application/grpc", "-H", "te: trailers",
                                  f"http://{server.grpc_url}/inference.GRPCInferenceService/ModelInfer"]
                results["gRPC, h2load"] = h2load(server, ["-c", str(clients), "-m", "1", *grpc_arguments], seconds)
                results["REST, h2load, 64 connections"] = h2load(server, rest_arguments(64), seconds)
                results["gRPC, h2load, 4 connections x 16 calls"] = h2load(server, ["-c", "4", "-m", "16", *grpc_arguments], seconds)
            else:
                print("h2load (Debian's nghttp2-client) is not installed: the C client's runs are left out", file=sys.stderr)
        finally:
            code = server.stop()
    for name, result in results.items():
        show(name, result)

    def ratio(grpc, rest):
        return results[grpc]["throughput"] / max(results[rest]["throughput"], 1e-9)
    print(f"gRPC / REST requests/s, tritonclient: {ratio('gRPC, tritonclient.grpc', 'REST, tritonclient.http'):.2f} "
          f"({clients} client processes, one connection each; the goal is 1.5)")
    if "REST, h2load" in results:
        print(f"gRPC / REST requests/s, h2load: {ratio('gRPC, h2load', 'REST, h2load'):.2f} with {clients} connections of one "
              f"request at a time, {ratio('gRPC, h2load, 4 connections x 16 calls', 'REST, h2load, 64 connections'):.2f} with 64 "
              f"requests at once (the goal is 1.5)")
    return 0 if all(result["failures"] == 0 for result in results.values()) and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
