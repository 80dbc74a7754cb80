"""Starts the real `modelc serve` on a free loopback port for the end-to-end tests."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "Fixtures"
MODELC = os.environ.get("MODELC_BIN", str(ROOT / ".build" / "debug" / "modelc"))
MODELS = ["TreeEnsembleClassifier.mlmodel", "GLMClassifier.mlmodel", "MLProgram.mlpackage",
          "ImageClassifier.mlmodel", "KNNClassifier.mlmodel", "SVMClassifier.mlmodel"]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """One `modelc serve` process (model_dir None: the arguments say what to serve), its gRPC
    port a free one too unless the arguments say otherwise; stop() sends SIGTERM and returns its
    exit code."""

    def __init__(self, model_dir, tmp, *arguments, port=None, ready=True, env=None):
        self.port = port or free_port()
        self.log_path = Path(tmp) / f"serve-{self.port}.log"
        self.log = open(self.log_path, "wb")
        environment = dict(os.environ, MODELC_CACHE=str(Path(tmp) / "cache"))
        environment.update(env or {})
        port_option = [] if "--port" in arguments else ["--port", str(self.port)]
        self.grpc_port = None
        if "--grpc-port" not in arguments:
            self.grpc_port = free_port()
            port_option += ["--grpc-port", str(self.grpc_port)]
        elif arguments[list(arguments).index("--grpc-port") + 1] != "0":
            self.grpc_port = int(arguments[list(arguments).index("--grpc-port") + 1])
        directory = [] if model_dir is None else [str(model_dir)]
        self.process = subprocess.Popen([MODELC, "serve", *directory, *port_option, *arguments],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=environment)
        if ready:
            self.wait_ready()

    @property
    def url(self):
        return f"127.0.0.1:{self.port}"

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc_port}"

    def wait_ready(self, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"modelc serve exited {self.process.returncode}: {self.log_text()}")
            try:
                status, _ = self.request("GET", "/v2/health/ready")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("modelc serve did not become ready: " + self.log_text())

    def request(self, method, path, body=None, headers=None, timeout=30):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            payload = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            connection.request(method, path, body=payload, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def peak_rss_bytes(self):
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    def rss_bytes(self):
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self, timeout=60):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.log.close()
        return code

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, pattern, count=1, timeout=20):
        """The log once `pattern` is in it `count` times: the cache reports loads and
        evictions as events, possibly after the request that caused them was answered."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_text()
            if len(re.findall(pattern, text)) >= count or time.monotonic() > deadline:
                return text
            time.sleep(0.05)


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "models"
    directory.mkdir()
    for name in MODELS:
        source = FIXTURES / "Models" / name
        if source.is_dir():
            shutil.copytree(source, directory / name)
        else:
            shutil.copy(source, directory / name)
    return directory


@pytest.fixture
def server(model_dir, tmp_path):
    started = Server(model_dir, tmp_path)
    yield started
    assert started.stop() == 0, started.log_text()


def modelc_predict(model, inputs_json):
    """The CLI's own prediction, for comparing the server's answers with."""
    result = subprocess.run([MODELC, "predict", str(model), "--inputs", "-", "--json"], input=inputs_json,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[0])
