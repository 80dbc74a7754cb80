#!/usr/bin/env python3
"""make bench's serving comparison: requests/s and latency of `modelc serve` against Seldon MLServer
(mlserver-sklearn, the same 100-tree forest) and against onnxruntime behind a minimal FastAPI/uvicorn
server (the same MobileNetV2-shaped network), one server at a time, the same closed-loop client
(Tests/ServingE2E/loadgen.py: CLIENTS threads with keep-alive connections), the same JSON requests.
Answers are compared too: the forest's probabilities and the network's top class must agree.

Usage: serve_bench.py MODELC CLASSIC_DIR NETWORK_DIR WORK_DIR CLIENTS SECONDS
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "ServingE2E"))
import loadgen  # noqa: E402


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def post(port, path, body):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    assert response.status == 200, (response.status, data[:300])
    return json.loads(data)


def wait_ready(port, process, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/v2/health/ready")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not become ready")


def measure(label, command, port, path, body, clients, seconds, log, env=None):
    log_file = open(log, "wb")
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    try:
        wait_ready(port, process)
        answer = post(port, path, body)
        for _ in range(20):
            post(port, path, body)
        result = loadgen.run(port, [(path, body)], clients, seconds)
        result["answer"] = answer
        print(f"  {label:34s} {result['throughput']:9.1f} req/s  p50 {result['p50_ms']:8.2f} ms  "
              f"p99 {result['p99_ms']:8.2f} ms  ({result['count']} requests, {result['failures']} failed)", flush=True)
        return result
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()


def main():
    modelc, classic, network, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    clients, seconds = int(sys.argv[5]), float(sys.argv[6])
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MODELC_CACHE=str(work / "cache"))
    results = {}

    # The forest: modelc serve on the Core ML conversion, MLServer on the scikit-learn model itself.
    row = np.load(classic / "rows.npy")[0].tolist()
    forest_dir = work / "forest-modelc"
    forest_dir.mkdir(exist_ok=True)
    shutil.copy(classic / "forest.mlmodel", forest_dir / "forest.mlmodel")
    port = free_port()
    body = json.dumps({"inputs": [{"name": "features", "datatype": "FP64", "shape": [20], "data": row}],
                       "outputs": [{"name": "classProbability"}]}).encode()
    print(f"100-tree forest, one row of 20 features per request, {clients} clients x {seconds:.0f} s:")
    results["forest-modelc"] = measure("modelc serve", [modelc, "serve", str(forest_dir), "--port", str(port), "--grpc-port", "0"], port,
                                       "/v2/models/forest/infer", body, clients, seconds, work / "forest-modelc.log", env)
    mlserver_dir = work / "forest-mlserver"
    mlserver_dir.mkdir(exist_ok=True)
    shutil.copy(classic / "forest.pickle", mlserver_dir / "forest.joblib")
    port = free_port()
    (mlserver_dir / "settings.json").write_text(json.dumps({
        "http_port": port, "grpc_port": free_port(), "metrics_port": free_port(), "debug": False}))
    (mlserver_dir / "model-settings.json").write_text(json.dumps({
        "name": "forest", "implementation": "mlserver_sklearn.SKLearnModel", "parameters": {"uri": "./forest.joblib"}}))
    body = json.dumps({"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 20], "data": row}],
                       "outputs": [{"name": "predict_proba"}]}).encode()
    mlserver = str(Path(sys.executable).parent / "mlserver")
    results["forest-mlserver"] = measure("Seldon MLServer (mlserver-sklearn)", [mlserver, "start", str(mlserver_dir)], port,
                                         "/v2/models/forest/infer", body, clients, seconds, work / "forest-mlserver.log")
    ours = results["forest-modelc"]["answer"]["outputs"][0]["data"]
    theirs = results["forest-mlserver"]["answer"]["outputs"][0]["data"]
    # coremltools converts a multi-class forest's leaves without the 1/trees scaling, so the Core ML
    # model's output (modelc predict's too) is the sum over the trees: compare the normalized rows.
    ours, theirs = np.array(ours), np.array(theirs).reshape(-1)
    difference = float(np.max(np.abs(ours / ours.sum() - theirs)))
    print(f"  probabilities agree within {difference:.2e} (modelc's row normalized: the model sums 100 trees)")

    # The network: modelc serve on the Core ML model, onnxruntime on the ONNX graph, the same pixels.
    pixels = list((network / "image.rgb").read_bytes())
    net_dir = work / "net-modelc"
    net_dir.mkdir(exist_ok=True)
    shutil.copy(network / "mobilenetv2.mlmodel", net_dir / "mobilenetv2.mlmodel")
    port = free_port()
    body = json.dumps({"inputs": [{"name": "image", "datatype": "UINT8", "shape": [224, 224, 3], "data": pixels}],
                       "outputs": [{"name": "classLabelProbs"}]}).encode()
    print(f"MobileNetV2-shaped network, one 224x224 RGB image (UINT8 JSON) per request, {clients} clients x {seconds:.0f} s:")
    results["net-modelc"] = measure("modelc serve", [modelc, "serve", str(net_dir), "--port", str(port), "--grpc-port", "0"], port,
                                    "/v2/models/mobilenetv2/infer", body, clients, seconds, work / "net-modelc.log", env)
    port = free_port()
    body = json.dumps({"inputs": [{"name": "image", "datatype": "UINT8", "shape": [224, 224, 3], "data": pixels}]}).encode()
    script = str(Path(__file__).resolve().parent / "serve_bench_onnx.py")
    results["net-onnx"] = measure("onnxruntime (FastAPI/uvicorn)", [sys.executable, script, str(network / "mobilenetv2.onnx"), str(port)],
                                  port, "/v2/models/mobilenetv2/infer", body, clients, seconds, work / "net-onnx.log")
    ours = np.array(results["net-modelc"]["answer"]["outputs"][0]["data"])
    theirs = np.array(results["net-onnx"]["answer"]["outputs"][0]["data"])
    print(f"  top-1 {int(ours.argmax())} vs {int(theirs.argmax())}, largest probability difference {np.max(np.abs(ours - theirs)):.2e}")

    def ratio(ours, theirs):
        a, b = results[ours], results[theirs]
        return (f"{a['throughput'] / b['throughput']:.2f}x throughput, p99 {a['p99_ms']:.1f} vs {b['p99_ms']:.1f} ms")
    print("ratios (goal: at least 2x MLServer's throughput at equal or lower p99):")
    print(f"  forest:  modelc serve / MLServer     {ratio('forest-modelc', 'forest-mlserver')}")
    print(f"  network: modelc serve / onnxruntime  {ratio('net-modelc', 'net-onnx')}")
    failed = sum(result["failures"] for result in results.values())
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
