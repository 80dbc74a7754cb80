#!/usr/bin/env python3
"""One client's latency on `modelc serve`, REST against gRPC (docs/serving.md, "gRPC"): the same
small model (Fixtures' MLProgram, FP32 [1, 16] in, [1, 4] out), N sequential requests each way
after a warm-up, through Triton's clients (tritonclient[http] binary and JSON, tritonclient[grpc]),
plus the health call of each protocol (the transport alone) and a bare grpcio call.

Usage (the serve venv, make test-serve's): .venv-serve/bin/python Scripts/serve_latency.py MODELC [N]
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(call, count):
    for _ in range(max(50, count // 10)):
        call()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return statistics.mean(times), times[len(times) // 2], times[int(len(times) * 0.99)]


def main():
    modelc, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    with tempfile.TemporaryDirectory() as work:
        models = Path(work) / "models"
        models.mkdir()
        shutil.copytree(ROOT / "Fixtures" / "Models" / "MLProgram.mlpackage", models / "MLProgram.mlpackage")
        port, grpc_port = free_port(), free_port()
        server = subprocess.Popen([modelc, "serve", str(models), "--port", str(port), "--grpc-port", str(grpc_port),
                                   "--threads", "1"], stderr=subprocess.DEVNULL,
                                  env=dict(os.environ, MODELC_CACHE=str(Path(work) / "cache")))
        try:
            http = triton_http.InferenceServerClient(f"127.0.0.1:{port}")
            deadline = time.time() + 30
            while True:
                try:
                    if http.is_server_ready():
                        break
                except Exception:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
            rpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
            x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
            binary = triton_http.InferInput("x", [1, 16], "FP32")
            binary.set_data_from_numpy(x, binary_data=True)
            json_input = triton_http.InferInput("x", [1, 16], "FP32")
            json_input.set_data_from_numpy(x, binary_data=False)
            raw = triton_grpc.InferInput("x", [1, 16], "FP32")
            raw.set_data_from_numpy(x)
            live = grpc.insecure_channel(f"127.0.0.1:{grpc_port}").unary_unary("/inference.GRPCInferenceService/ServerLive")
            outputs = [triton_http.InferRequestedOutput("probs", binary_data=True)]
            rows = [
                ("REST infer, tritonclient.http, binary tensors", lambda: http.infer("MLProgram", [binary], outputs=outputs)),
                ("REST infer, tritonclient.http, JSON tensors", lambda: http.infer("MLProgram", [json_input])),
                ("gRPC infer, tritonclient.grpc (raw contents)", lambda: rpc.infer("MLProgram", [raw])),
                ("REST health, tritonclient.http", http.is_server_live),
                ("gRPC health, tritonclient.grpc", rpc.is_server_live),
                ("gRPC health, bare grpcio call", lambda: live(b"")),
            ]
            print(f"modelc serve, 1 client, {count} sequential requests each (after a warm-up); microseconds")
            print(f"{'':48} {'mean':>7} {'p50':>7} {'p99':>7}")
            for label, call in rows:
                mean, p50, p99 = measure(call, count)
                print(f"{label:48} {mean:7.0f} {p50:7.0f} {p99:7.0f}")
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
