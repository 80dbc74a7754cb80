"""OpenTelemetry traces from the real server (`--trace-endpoint`), received by a loopback
OTLP/HTTP collector: span names, parent/child links, traceparent propagation, attributes; a
collector that is down costs requests nothing."""
import http.server
import json
import os
import re
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from conftest import MODELC, Server, free_port

IRIS = np.array([6.7, 3.0, 5.2, 2.3])
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
ROOT = "POST /v2/models/{model}/infer"


class Collector:
    """A loopback OTLP/HTTP JSON receiver on /v1/traces keeping every span it gets."""

    def __init__(self):
        self.spans = []
        self.content_types = []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = 404
                if self.path == "/v1/traces":
                    collector.content_types.append(self.headers["Content-Type"])
                    request = json.loads(body)
                    for resource in request["resourceSpans"]:
                        service = {entry["key"]: entry["value"] for entry in resource["resource"]["attributes"]}
                        for scope in resource["scopeSpans"]:
                            for span in scope["spans"]:
                                span["service"] = service["service.name"]["stringValue"]
                                collector.spans.append(span)
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *arguments):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def wait_for(self, count, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.spans) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.spans

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector():
    receiver = Collector()
    yield receiver
    receiver.close()


def attributes(span):
    return {entry["key"]: next(iter(entry["value"].values())) for entry in span.get("attributes", [])}


def infer(client, values=IRIS, headers=None):
    tensor = triton.InferInput("features", [len(values)], "FP64")
    tensor.set_data_from_numpy(np.asarray(values, dtype=np.float64), binary_data=True)
    return client.infer("GLMClassifier", [tensor], headers=headers)


def test_spans_nest_under_the_callers_traceparent(model_dir, tmp_path, collector):
    server = Server(model_dir, tmp_path, "--trace-endpoint", collector.endpoint, env={"OTEL_SERVICE_NAME": "iris-server"})
    try:
        client = triton.InferenceServerClient(server.url)
        infer(client, headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
        infer(client)
        with pytest.raises(InferenceServerException):
            infer(client, values=[1.0, 2.0, 3.0])
        # Unsampled by the caller: no spans.
        infer(client, headers={"traceparent": f"00-{'a' * 32}-{'b' * 16}-00"})
        spans = collector.wait_for(5 + 5 + 4)
    finally:
        assert server.stop() == 0, server.log_text()
    assert set(collector.content_types) == {"application/json"}
    assert all(span["service"] == "iris-server" for span in spans)
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and span["traceId"] != "0" * 32
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"]) and span["spanId"] != "0" * 16
        assert isinstance(span["startTimeUnixNano"], str) and int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])
    assert "a" * 32 not in {span["traceId"] for span in spans}
    traces = {}
    for span in spans:
        traces.setdefault(span["traceId"], []).append(span)
    assert len(traces) == 3 and len({span["spanId"] for span in spans}) == len(spans)

    continued = traces[TRACE_ID]
    root = next(span for span in continued if span["name"] == ROOT)
    assert root["parentSpanId"] == PARENT_ID and root["kind"] == 2 and root["status"]["code"] == 1
    root_attributes = attributes(root)
    assert root_attributes["model.name"] == "GLMClassifier" and root_attributes["model.version"] == "1"
    assert root_attributes["http.response.status_code"] == "200"
    assert root_attributes["url.path"] == "/v2/models/GLMClassifier/infer"
    children = {span["name"]: span for span in continued if span is not root}
    assert set(children) == {"deserialize", "queue", "compute", "serialize"}
    for child in children.values():
        assert child["parentSpanId"] == root["spanId"] and child["kind"] == 1
        assert int(root["startTimeUnixNano"]) <= int(child["startTimeUnixNano"]) <= int(child["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    order = [children[name] for name in ("deserialize", "queue", "compute", "serialize")]
    for before, after in zip(order, order[1:]):
        assert int(before["endTimeUnixNano"]) <= int(after["startTimeUnixNano"])
    assert attributes(children["compute"])["modelc.batch_size"] == "1"

    fresh = [trace for trace_id, trace in traces.items() if trace_id != TRACE_ID]
    roots = [next(span for span in trace if span["name"] == ROOT) for trace in fresh]
    assert all("parentSpanId" not in root or root["parentSpanId"] == "" for root in roots)
    failed = next(root for root in roots if root["status"]["code"] == 2)
    assert "expected 4" in failed["status"]["message"]
    assert attributes(failed)["http.response.status_code"] == "400"


def test_grpc_calls_are_traced_as_rpc_spans(model_dir, tmp_path, collector):
    import tritonclient.grpc as triton_grpc

    server = Server(model_dir, tmp_path, "--trace-endpoint", collector.endpoint)
    try:
        client = triton_grpc.InferenceServerClient(server.grpc_url)
        tensor = triton_grpc.InferInput("features", [4], "FP64")
        tensor.set_data_from_numpy(IRIS)
        client.infer("GLMClassifier", [tensor], headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
        with pytest.raises(InferenceServerException):
            client.infer("NoSuchModel", [tensor])
        spans = collector.wait_for(5 + 1)
    finally:
        assert server.stop() == 0, server.log_text()
    name = "inference.GRPCInferenceService/ModelInfer"
    root = next(span for span in spans if span["traceId"] == TRACE_ID and span["name"] == name)
    assert root["parentSpanId"] == PARENT_ID and root["kind"] == 2 and root["status"]["code"] == 1
    found = attributes(root)
    assert found["rpc.system"] == "grpc" and found["rpc.service"] == "inference.GRPCInferenceService"
    assert found["rpc.method"] == "ModelInfer" and found["rpc.grpc.status_code"] == "0" and found["model.name"] == "GLMClassifier"
    children = sorted(span["name"] for span in spans if span.get("parentSpanId") == root["spanId"])
    assert children == ["compute", "deserialize", "queue", "serialize"]
    failed = next(span for span in spans if span["traceId"] != TRACE_ID and span["name"] == name)
    assert failed["status"]["code"] == 2 and attributes(failed)["rpc.grpc.status_code"] == "5"


def test_a_collector_that_is_down_costs_requests_nothing(model_dir, tmp_path):
    down = f"http://127.0.0.1:{free_port()}/v1/traces"
    server = Server(model_dir, tmp_path, "--trace-endpoint", down)
    try:
        client = triton.InferenceServerClient(server.url)
        started = time.monotonic()
        for _ in range(20):
            assert infer(client).as_numpy("species") is not None
        assert time.monotonic() - started < 5
        deadline = time.monotonic() + 10
        failed = 0
        while time.monotonic() < deadline:
            _, body = server.request("GET", "/metrics")
            found = re.search(r'^modelc_trace_spans_dropped_total\{reason="export_failed"\} (\d+)$', body.decode(), re.M)
            failed = int(found.group(1)) if found else 0
            if failed == 20 * 5:
                break
            time.sleep(0.1)
        assert failed == 20 * 5
        assert re.search(r"^modelc_trace_exports_failed_total [1-9]", body.decode(), re.M)
        assert re.search(r"^modelc_trace_spans_exported_total 0$", body.decode(), re.M)
    finally:
        assert server.stop() == 0, server.log_text()
    assert server.log_text().count("trace export failing") == 1


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1/traces", "not a url", "http://"])
def test_a_bad_endpoint_stops_the_start_with_one_line(model_dir, tmp_path, url):
    result = subprocess.run([MODELC, "serve", str(model_dir), "--port", "0", "--trace-endpoint", url],
                            capture_output=True, text=True, timeout=30, env=dict(os.environ, MODELC_CACHE=str(tmp_path / "cache")))
    assert result.returncode == 111
    assert result.stderr.count("\n") == 1 and f"--trace-endpoint {url}:" in result.stderr


def test_a_collector_that_never_answers_holds_neither_requests_nor_the_drain(model_dir, tmp_path):
    # Accepts connections (the backlog) and never reads or answers them.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    server = Server(model_dir, tmp_path, "--trace-endpoint", f"http://127.0.0.1:{silent.getsockname()[1]}/v1/traces")
    try:
        client = triton.InferenceServerClient(server.url)
        started = time.monotonic()
        for _ in range(20):
            infer(client)
        assert time.monotonic() - started < 5
    finally:
        stopping = time.monotonic()
        assert server.stop() == 0, server.log_text()
        silent.close()
    # The drain waits 2 s at most for the last export, then the process exits.
    assert time.monotonic() - stopping < 8
    # 20 inferences and the start's readiness polls (one, or more while the ports were still opening).
    stopped = re.search(r"stopped answered=(\d+) drain_ms=(\d+)", server.log_text())
    assert stopped and int(stopped.group(1)) >= 21, server.log_text()
